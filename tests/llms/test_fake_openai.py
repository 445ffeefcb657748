"""plait.testing.fake_openai: the fake OpenAI-compatible server itself (framing, scripts, faults, load)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from typing import Any

import aiohttp
import pytest

from plait.exceptions import ScriptError
from plait.testing.fake_openai import FakeOpenAIServer, HTTPFault, Reply

HI = [{"role": "user", "content": "hi"}]


def post(server: FakeOpenAIServer, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    """``(status, headers, raw body)`` of one chat request (error statuses included)."""
    request = urllib.request.Request(
        server.url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, dict(err.headers), err.read()


def test_models_endpoint_and_addresses(fake_server: Any) -> None:
    server = fake_server(model="tiny")
    assert server.port > 0
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    with urllib.request.urlopen(server.base_url + "/models", timeout=10) as resp:
        data = json.loads(resp.read())
    assert data["object"] == "list"
    assert [m["id"] for m in data["data"]] == ["tiny"]


def test_completion_body_shape_and_usage(fake_server: Any) -> None:
    server = fake_server([Reply("two words", tool_calls=[("f", {"x": 1})])])
    status, _, raw = post(server, {"model": "m", "messages": HI})
    body = json.loads(raw)
    assert status == 200
    assert body["object"] == "chat.completion"
    assert body["model"] == "m"
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "two words"
    assert choice["message"]["tool_calls"] == [
        {"id": "call_0", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    ]
    assert body["usage"] == {"prompt_tokens": 1, "completion_tokens": 5, "total_tokens": 6}
    assert server.requests == [{"model": "m", "messages": HI}]


@pytest.mark.parametrize("include_usage", [True, False])
def test_sse_framing(fake_server: Any, include_usage: bool) -> None:
    server = fake_server([Reply("a b")])
    body = {"model": "m", "messages": HI, "stream": True}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    status, headers, raw = post(server, body)
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    text = raw.decode()
    assert text.endswith("data: [DONE]\n\n")
    events = text.split("\n\n")[:-1]
    assert all(event.startswith("data: ") and "\n" not in event for event in events)
    chunks = [json.loads(event[6:]) for event in events[:-1]]
    assert [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]] == ["", "a ", "b", None]
    assert chunks[-2 if include_usage else -1]["choices"][0]["finish_reason"] == "stop"
    if include_usage:
        assert chunks[-1]["choices"] == []
        assert chunks[-1]["usage"] == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    else:
        assert all("usage" not in c for c in chunks)


def test_faults_carry_status_body_and_retry_after(fake_server: Any) -> None:
    server = fake_server([HTTPFault(429, {"error": {"message": "slow down"}}, retry_after=2)])
    status, headers, raw = post(server, {"model": "m", "messages": HI})
    assert status == 429
    assert headers["Retry-After"] == "2"
    assert json.loads(raw) == {"error": {"message": "slow down"}}


def test_script_exhaustion_is_loud(fake_server: Any) -> None:
    server = fake_server(["only one"])
    post(server, {"model": "m", "messages": HI})
    server.assert_done()
    status, _, raw = post(server, {"model": "m", "messages": HI})
    assert status == 500
    assert json.loads(raw)["error"]["type"] == "script_exhausted"
    with pytest.raises(ScriptError, match="script exhausted at request 2"):
        server.assert_done()


def test_unused_script_fails_assert_done(fake_server: Any) -> None:
    server = fake_server(["a", "b"])
    with pytest.raises(ScriptError, match="2 scripted replies were never requested"):
        server.assert_done()


def test_handler_functions_sync_and_async(fake_server: Any) -> None:
    seen: list[Any] = []

    def handler(body: dict[str, Any]) -> str:
        seen.append(body["messages"][-1]["content"])
        return "handled"

    server = fake_server(handler=handler)
    _, _, raw = post(server, {"model": "m", "messages": HI})
    assert json.loads(raw)["choices"][0]["message"]["content"] == "handled"
    assert seen == ["hi"]

    async def slow(body: dict[str, Any]) -> Reply:
        await asyncio.sleep(0)
        return Reply(str(len(body["messages"])))

    server = fake_server(handler=slow)
    _, _, raw = post(server, {"model": "m", "messages": HI * 3})
    assert json.loads(raw)["choices"][0]["message"]["content"] == "3"


def test_handler_errors_are_recorded(fake_server: Any) -> None:
    def broken(body: dict[str, Any]) -> str:
        raise RuntimeError("oops")

    server = fake_server(handler=broken)
    assert post(server, {"model": "m", "messages": HI})[0] == 500
    with pytest.raises(ScriptError, match="handler raised RuntimeError"):
        server.assert_done()


def test_push_and_headers_are_recorded(fake_server: Any) -> None:
    server = fake_server([])
    server.push("x")
    post(server, {"model": "m", "messages": HI}, headers={"Authorization": "Bearer k"})
    assert server.headers[0]["Authorization"] == "Bearer k"
    assert server.remaining == 0


def test_serves_256_concurrent_requests_with_latency(fake_server: Any) -> None:
    server = fake_server(latency=0.2)

    async def burst() -> tuple[list[str], float]:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

            async def one(i: int) -> str:
                body = {"model": "m", "messages": [{"role": "user", "content": f"c{i}"}]}
                async with session.post(server.url, json=body) as resp:
                    data = await resp.json()
                    return str(data["choices"][0]["message"]["content"])

            start = time.perf_counter()
            answers = await asyncio.gather(*(one(i) for i in range(256)))
            return list(answers), time.perf_counter() - start

    answers, elapsed = asyncio.run(burst())
    assert answers == [f"c{i}" for i in range(256)]
    assert elapsed < 40  # concurrent, not serial (serial would take at least 256 x 0.2 s = 51 s)
    assert len(server.requests) == 256


def test_start_stop_are_idempotent() -> None:
    server = FakeOpenAIServer()
    server.stop()
    with server:
        assert server.start() is server
        port = server.port
        post(server, {"model": "m", "messages": HI})
    server.stop()
    assert port > 0
