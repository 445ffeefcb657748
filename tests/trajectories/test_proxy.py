"""`plait record-proxy`: an OpenAI SDK loop (not plait) through the proxy to a real fake server on 127.0.0.1.

The upstream is `FakeOpenAIServer`; the client is the ``openai`` SDK. What is asserted is
what lands in the trajectory file: grouping, branches stored once, tokens kept, keys nowhere.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from plait.exceptions import UserError
from plait.testing.fake_openai import FakeOpenAIServer, HTTPFault, InvalidJSON, RawSSE, Reply, Truncated
from plait.trajectories import read_trajectories
from plait.trajectories.grouping import conversation
from plait.trajectories.proxy import RecordProxy

SYSTEM = {"role": "system", "content": "You are terse."}


def _answer(body: dict[str, Any]) -> Reply:
    return Reply(content=f"answer to {body['messages'][-1]['content']}")


@pytest.fixture
def upstream() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(handler=_answer) as server:
        yield server


def _ask(client: openai.OpenAI, messages: list[dict[str, Any]], stream: bool, **extra: Any) -> str:
    if not stream:
        reply = client.chat.completions.create(model="fake-model", messages=messages, **extra)  # type: ignore[arg-type]
        return reply.choices[0].message.content or ""
    parts = []
    for chunk in client.chat.completions.create(model="fake-model", messages=messages, stream=True, **extra):  # type: ignore[arg-type]
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
    return "".join(parts)


def _conversation(client: openai.OpenAI, start: list[dict[str, Any]], turns: list[str], stream: bool) -> list[Any]:
    """A scripted agent loop: each user turn, the model's answer sent back with the next one."""
    messages = list(start)
    for turn in turns:
        messages.append({"role": "user", "content": turn})
        messages.append({"role": "assistant", "content": _ask(client, messages, stream)})
    return messages


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_three_conversations_one_branching_become_four_trajectories(
    upstream: FakeOpenAIServer, tmp_path: Path, stream: bool
) -> None:
    out = tmp_path / "t.jsonl"
    with RecordProxy(upstream.base_url, str(out), port=0) as proxy:
        client = openai.OpenAI(base_url=proxy.url, api_key="unused", max_retries=0)
        a = _conversation(client, [SYSTEM], ["a1", "a2", "a3"], stream)
        b = _conversation(client, [SYSTEM], ["b1", "b2"], stream)
        c = _conversation(client, [SYSTEM], ["c1"], stream)
        branch = _conversation(client, a[:3], ["a2 said otherwise", "a3 again"], stream)  # A, from its 1st answer
    requests = len(upstream.requests)
    assert requests == 3 + 2 + 1 + 2

    trajectories = list(read_trajectories(out))
    assert len(trajectories) == 4
    by_id = {t.id: t for t in trajectories}
    whole = sorted((conversation(t, by_id) for t in trajectories), key=len)
    assert sorted([a, b, c, branch], key=len) == whole
    child = next(t for t in trajectories if "parent" in t.metadata)
    parent = by_id[child.metadata["parent"]]
    assert conversation(parent, by_id) == a and child.metadata["branch_at"] == 3
    assert child.messages == branch[3:]  # the shared turns are not stored again
    replies = [m["content"] for t in trajectories for m in t.messages if m["role"] == "assistant"]
    assert len(replies) == requests == len(set(replies))  # every answer stored once
    assert all(t.source == "proxy" and t.model == "fake-model" and not t.token_exact for t in trajectories)


def test_sessions_group_by_header_and_flush_writes(upstream: FakeOpenAIServer, tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    with RecordProxy(upstream.base_url, str(out), port=0) as proxy:
        same = [SYSTEM, {"role": "user", "content": "hi"}]
        for session in ("s1", "s2"):
            client = openai.OpenAI(
                base_url=proxy.url, api_key="x", max_retries=0, default_headers={"X-Session-Id": session}
            )
            _conversation(client, [SYSTEM], ["hi", "more"], stream=False)
        _ask(openai.OpenAI(base_url=proxy.url, api_key="x", max_retries=0), same, False)
        assert out.read_text() == ""  # open until they end
        flushed = urllib.request.urlopen(urllib.request.Request(proxy.url + "/trajectories/flush", b"", method="POST"))
        assert json.loads(flushed.read()) == {"written": 3}
    trajectories = list(read_trajectories(out))
    assert sorted(t.metadata.get("session", "") for t in trajectories) == ["", "s1", "s2"]
    assert [len(t.messages) for t in trajectories] == [5, 5, 3]


def test_idle_trajectories_are_written_and_a_later_turn_branches_from_their_end(
    upstream: FakeOpenAIServer, tmp_path: Path
) -> None:
    out = tmp_path / "t.jsonl"
    with RecordProxy(upstream.base_url, str(out), port=0, idle_s=0.2) as proxy:
        client = openai.OpenAI(base_url=proxy.url, api_key="x", max_retries=0)
        first = _conversation(client, [SYSTEM], ["one"], stream=False)
        deadline = 200
        while not out.read_text() and deadline:  # written by the proxy's sweeper once idle
            time.sleep(0.05)
            deadline -= 1
        assert len(out.read_text().splitlines()) == 1
        _conversation(client, first, ["two"], stream=False)
    first_t, second = read_trajectories(out)
    assert second.metadata == {"parent": first_t.id, "branch_at": 3}
    assert conversation(second, {first_t.id: first_t, second.id: second})[:3] == first


# -- tokens ----------------------------------------------------------------------------------------
def _llama_cpp_reply(body: dict[str, Any]) -> dict[str, Any]:
    """A reply shaped as llama.cpp's server sends it with ``logprobs: true`` (each item has the token ``id``)."""
    items = [
        {"id": 19556, "token": "Hello", "bytes": [72, 101, 108, 108, 111], "logprob": -2.08, "top_logprobs": []},
        {"id": 665, "token": " there", "bytes": [32, 116, 104, 101, 114, 101], "logprob": -0.87, "top_logprobs": []},
    ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "length",
                "message": {"role": "assistant", "content": "Hello there"},
                "logprobs": {"content": items},
            }
        ],
    }


def _vllm_stream() -> RawSSE:
    """A stream shaped as vLLM sends it with ``return_token_ids`` and ``return_tokens_as_token_ids``."""

    def event(data: dict[str, Any]) -> str:
        return "data: " + json.dumps(data) + "\n\n"

    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    first = dict(base, prompt_token_ids=[1, 2, 3], choices=[{"index": 0, "delta": {"role": "assistant"}}])
    pieces = [("Hel", 10, -0.5), ("lo", 11, -0.25)]
    chunks = [
        dict(
            base,
            choices=[
                {
                    "index": 0,
                    "delta": {"content": text},
                    "token_ids": [tid],
                    "logprobs": {"content": [{"token": f"token_id:{tid}", "logprob": lp, "top_logprobs": []}]},
                }
            ],
        )
        for text, tid, lp in pieces
    ]
    last = dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop", "token_ids": []}])
    return RawSSE("".join(event(e) for e in [first, *chunks, last]) + "data: [DONE]\n\n")


def test_a_stream_with_odd_shapes_is_relayed_and_recorded(tmp_path: Path) -> None:
    odd = [
        {"choices": [{"index": 0, "delta": {"content": "ok", "tool_calls": 5}}]},
        {"choices": "no"},
        [1, 2],
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop", "logprobs": {"content": 7}}]},
    ]
    sse = RawSSE("".join(f"data: {json.dumps(event)}\n\n" for event in odd) + "data: {broken\n\ndata: [DONE]\n\n")
    out = tmp_path / "t.jsonl"
    with FakeOpenAIServer([sse]) as upstream, RecordProxy(upstream.base_url, str(out), port=0) as proxy:
        url = proxy.url + "/chat/completions"
        body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}).encode()
        relayed = urllib.request.urlopen(urllib.request.Request(url, body, {"Content-Type": "application/json"}))
        assert relayed.read().decode() == sse.text
    (trajectory,) = read_trajectories(out)
    assert trajectory.messages[-1] == {"role": "assistant", "content": "ok"}


def test_token_ids_and_logprobs_are_kept_from_llama_cpp_and_vllm_replies(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    with FakeOpenAIServer([_llama_cpp_reply({}), _vllm_stream()]) as upstream:
        with RecordProxy(upstream.base_url, str(out), port=0, tokens=True) as proxy:
            client = openai.OpenAI(base_url=proxy.url, api_key="x", max_retries=0)
            assert _ask(client, [{"role": "user", "content": "one"}], False) == "Hello there"
            assert _ask(client, [{"role": "user", "content": "two"}], True) == "Hello"
        upstream.assert_done()
        assert all(r["logprobs"] is True and r["return_token_ids"] is True for r in upstream.requests)
    llama, vllm = read_trajectories(out)
    assert llama.token_exact and vllm.token_exact
    assert llama.tokens[0].completion_ids == [19556, 665] and llama.tokens[0].logprobs == [-2.08, -0.87]
    assert llama.tokens[0].prompt_ids is None and llama.tokens[0].message == 1
    assert vllm.tokens[0].model_dump() == {
        "message": 1,
        "prompt_ids": [1, 2, 3],
        "completion_ids": [10, 11],
        "logprobs": [-0.5, -0.25],
    }


def test_malformed_token_fields_leave_the_turn_text_only(tmp_path: Path) -> None:
    reply = _llama_cpp_reply({})
    reply["choices"][0]["logprobs"]["content"][0]["id"] = 1.5  # not a token id
    vllm = _llama_cpp_reply({})
    vllm["choices"][0]["token_ids"] = ["x"]
    out = tmp_path / "t.jsonl"
    with FakeOpenAIServer([reply, vllm]) as upstream, RecordProxy(upstream.base_url, str(out), port=0) as proxy:
        client = openai.OpenAI(base_url=proxy.url, api_key="x", max_retries=0)
        _ask(client, [{"role": "user", "content": "one"}], False)
        _ask(client, [{"role": "user", "content": "two"}], False)
        assert "logprobs" not in upstream.requests[0]  # not asked for without tokens=True
    assert [t.token_exact for t in read_trajectories(out)] == [False, False]


# -- secrets, access, hostile bytes ----------------------------------------------------------------
SECRET = "sk-upstream-secret-9f8e7d"


def test_the_upstream_key_is_sent_upstream_and_written_nowhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    out = tmp_path / "t.jsonl"
    echo = HTTPFault(401, {"error": {"message": f"Incorrect API key provided: {SECRET}"}})
    script = [Reply("fine"), echo, Reply(SECRET[:3] + " ok")]
    with (
        FakeOpenAIServer(script) as upstream,
        RecordProxy(upstream.base_url, str(out), port=0, upstream_key=SECRET) as proxy,
    ):
        client = openai.OpenAI(base_url=proxy.url, api_key="client-key", max_retries=0)
        text = repr(proxy)
        _ask(client, [{"role": "user", "content": "hi"}], False)
        with pytest.raises(openai.AuthenticationError) as failed:
            _ask(client, [{"role": "user", "content": "again"}], False)
        assert SECRET not in str(failed.value) and "***" in str(failed.value)
        _ask(client, [{"role": "user", "content": "stream"}], True)
    assert all(h["Authorization"] == f"Bearer {SECRET}" for h in upstream.headers)
    assert SECRET not in text and SECRET not in out.read_text() and SECRET not in caplog.text
    assert len(list(read_trajectories(out))) == 2


def test_without_a_key_of_its_own_the_proxy_passes_the_clients_on_and_masks_it_in_errors(tmp_path: Path) -> None:
    echo = HTTPFault(401, {"error": {"message": f"Incorrect API key provided: {SECRET}"}})
    with FakeOpenAIServer([echo]) as upstream, RecordProxy(upstream.base_url, str(tmp_path / "t"), port=0) as proxy:
        client = openai.OpenAI(base_url=proxy.url, api_key=SECRET, max_retries=0)
        with pytest.raises(openai.AuthenticationError) as failed:
            _ask(client, [{"role": "user", "content": "hi"}], False)
    assert upstream.headers[0]["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in str(failed.value)


def test_hostile_clients_and_upstreams_get_errors_and_the_proxy_keeps_serving(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    script = [InvalidJSON(), Truncated(), "after"]
    with FakeOpenAIServer(script) as upstream, RecordProxy(upstream.base_url, str(out), port=0) as proxy:
        url = proxy.url + "/chat/completions"
        for body in (
            b"{not json",
            b'{"messages": "no"}',
            b"[1]",
            b'{"messages": [{"content": "no role"}]}',
            b'{"messages": [{"role": 5}]}',
        ):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(urllib.request.Request(url, body, {"Content-Type": "application/json"}))
            assert refused.value.code == 400 and "error" in json.loads(refused.value.read())
        client = openai.OpenAI(base_url=proxy.url, api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as bad:
            _ask(client, [{"role": "user", "content": "1"}], False)
        assert bad.value.status_code == 502
        with pytest.raises(
            (openai.APIError, httpx.HTTPError)
        ):  # the stream breaks off: the client sees it, nothing is recorded
            _ask(client, [{"role": "user", "content": "2"}], True)
        assert _ask(client, [{"role": "user", "content": "3"}], False) == "after"
        models = json.loads(urllib.request.urlopen(proxy.url + "/models").read())
        assert models["data"][0]["id"] == "fake-model"
    assert [t.messages[-1]["content"] for t in read_trajectories(out)] == ["after"]


def test_an_unreachable_upstream_is_a_502(tmp_path: Path) -> None:
    with FakeOpenAIServer() as gone:
        base = gone.base_url
    with RecordProxy(base, str(tmp_path / "t.jsonl"), port=0) as proxy:
        client = openai.OpenAI(base_url=proxy.url, api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as failed:
            _ask(client, [{"role": "user", "content": "1"}], False)
        assert failed.value.status_code == 502


def test_loopback_only_without_a_token_and_the_token_is_checked(upstream: FakeOpenAIServer, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="without a token"):
        RecordProxy(upstream.base_url, str(tmp_path / "t.jsonl"), host="0.0.0.0", port=0)
    assert not (tmp_path / "t.jsonl").exists()
    with RecordProxy(upstream.base_url, str(tmp_path / "u.jsonl"), port=0, token="proxy-token") as proxy:
        with pytest.raises(openai.AuthenticationError):
            _ask(openai.OpenAI(base_url=proxy.url, api_key="wrong", max_retries=0), [SYSTEM], False)
        assert _ask(openai.OpenAI(base_url=proxy.url, api_key="proxy-token", max_retries=0), [SYSTEM], False)
    assert "proxy-token" not in upstream.headers[0].get("Authorization", "")  # the proxy's token stays here


def test_the_command_writes_open_trajectories_when_stopped(upstream: FakeOpenAIServer, tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    env = {**os.environ, "UPSTREAM_KEY": SECRET}
    command = [sys.executable, "-m", "plait.cli", "record-proxy", "--upstream", upstream.base_url, "--port", "0"]
    command += ["--out", str(out), "--api-key-env", "UPSTREAM_KEY"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        url = line.split(" on ", 1)[1].split(" ", 1)[0]
        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
        _conversation(client, [SYSTEM], ["one", "two"], stream=True)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    (trajectory,) = read_trajectories(out)
    assert len(trajectory.messages) == 5 and SECRET not in out.read_text() + line + err
    assert upstream.headers[0]["Authorization"] == f"Bearer {SECRET}"


def test_trajectories_open_when_the_proxy_is_killed_are_written_by_the_next_one(
    upstream: FakeOpenAIServer, tmp_path: Path
) -> None:
    out = tmp_path / "t.jsonl"
    command = [sys.executable, "-m", "plait.cli", "record-proxy", "--upstream", upstream.base_url, "--port", "0"]
    process = subprocess.Popen([*command, "--out", str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split(" on ", 1)[1].split(" ", 1)[0]
        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
        sent = _conversation(client, [SYSTEM], ["one", "two"], stream=False)
        checkpoint = Path(str(out) + ".open")
        for _ in range(600):  # saved within CHECKPOINT_S (2 s); up to a minute on a busy machine
            if checkpoint.exists() and len(next(read_trajectories(checkpoint)).messages) == 5:
                break
            time.sleep(0.1)
    finally:
        process.kill()  # SIGKILL: nothing runs on the way out
        process.communicate(timeout=60)
    assert out.read_text() == ""  # open when killed
    proxy = RecordProxy(upstream.base_url, str(out), port=0)
    assert proxy.recovered == 1 and not checkpoint.exists()
    proxy.file.close()
    (trajectory,) = read_trajectories(out)
    assert trajectory.messages == sent
