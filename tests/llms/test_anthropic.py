"""ClaudeAPI / AsyncClaudeAPI through the real anthropic SDK against a fake Messages API on 127.0.0.1."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("anthropic")

from _support import collect, resolve
from plait.exceptions import LLMAPIError, LLMRateLimitError, MissingDependencyError, UserError
from plait.llms._anthropic_protocol import build_request, convert_tool_choice, parse_message
from plait.llms.anthropic_llm import AsyncClaudeAPI, ClaudeAPI
from plait.schema import ModelStatusCode
from plait.testing.fake_http import Canned, FakeHTTPServer, RecordedRequest

MODEL = "claude-3-5-sonnet-20241022"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def message(*blocks: dict[str, Any], stop_reason: str = "end_turn") -> Canned:
    return Canned.json(
        {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": list(blocks),
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 5},
        }
    )


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def sse(*pieces: str, stop_reason: str = "end_turn") -> Canned:
    def event(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

    start = {"id": "msg_02", "type": "message", "role": "assistant", "model": MODEL, "content": []}
    start |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 1}}
    body = event("message_start", {"message": start})
    body += event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    for piece in pieces:
        body += event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}})
    body += event("content_block_stop", {"index": 0})
    body += event(
        "message_delta", {"delta": {"stop_reason": stop_reason, "stop_sequence": None}, "usage": {"output_tokens": 4}}
    )
    body += event("message_stop", {})
    return Canned.text(body, content_type="text/event-stream")


def error(status: int, kind: str, msg: str, **headers: str) -> Canned:
    return Canned.json({"type": "error", "error": {"type": kind, "message": msg}}, status, headers=headers)


@pytest.fixture
def server() -> Iterator[FakeHTTPServer]:
    srv = FakeHTTPServer().start()
    yield srv
    srv.stop()


def _make(mode: str, server: FakeHTTPServer, **kwargs: Any) -> ClaudeAPI | AsyncClaudeAPI:
    kwargs.setdefault("key", "sk-test")
    kwargs.setdefault("retry", 3)
    cls = AsyncClaudeAPI if mode == "async" else ClaudeAPI
    return cls(MODEL, base_url=server.base_url, **kwargs)


def _key(request: RecordedRequest) -> str:
    """The API key a request carried (SDK versions differ: ``x-api-key`` or a bearer token)."""
    return request.headers.get("x-api-key") or request.headers["authorization"].removeprefix("Bearer ")


def _bodies(server: FakeHTTPServer) -> list[dict[str, Any]]:
    return [r.json() for r in server.requests_to("/v1/messages")]


def test_chat_request_shape(mode: str, server: FakeHTTPServer) -> None:
    server.route("POST", "/v1/messages", message(text("Hi there.")))
    llm = _make(mode, server, max_new_tokens=100, stop_words=["<stop>"])
    conversation = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello", "name": "bob"},
        {"role": "environment", "content": "it is sunny"},  # sent as a user turn: merged with the one before
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "and now?"},
    ]
    assert resolve(llm.chat(conversation)) == "Hi there."
    body = _bodies(server)[-1]
    assert body["model"] == MODEL and body["max_tokens"] == 100
    assert body["system"] == "Be brief."
    assert body["messages"] == [
        {"role": "user", "content": "hello\nit is sunny"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "and now?"},
    ]
    assert body["stop_sequences"] == ["<stop>"]
    assert not {"temperature", "top_p", "top_k", "repetition_penalty"} & set(body)  # not sent unless set
    assert _key(server.requests[-1]) == "sk-test"
    resolve(llm.chat("hi", temperature=0.2, top_k=5))
    body = _bodies(server)[-1]
    assert (body["temperature"], body["top_k"], body["messages"]) == (0.2, 5, [{"role": "user", "content": "hi"}])


def test_client_side_stop_words(mode: str, server: FakeHTTPServer) -> None:
    server.route("POST", "/v1/messages", message(text("Answer: 42\n```\nmore")))
    llm = _make(mode, server)
    llm.gen_params["stop_words"].append("\n```\n")
    assert resolve(llm.chat("q")) == "Answer: 42"
    assert _bodies(server)[-1]["stop_sequences"] == ["\n```\n"]


def test_stream_chat(mode: str, server: FakeHTTPServer) -> None:
    server.route("POST", "/v1/messages", sse("Hel", "lo", " world"))
    items = collect(_make(mode, server).stream_chat([{"role": "user", "content": "hi"}]))
    assert [t for _, t, _ in items] == ["Hel", "Hello", "Hello world", "Hello world"]
    assert [s for s, _, _ in items] == [ModelStatusCode.STREAM_ING] * 3 + [ModelStatusCode.END]
    final = items[-1][2]
    assert final.finish_reason == "stop" and final.usage.completion_tokens == 4
    assert _bodies(server)[-1]["stream"] is True


def test_native_tool_use(mode: str, server: FakeHTTPServer) -> None:
    server.route(
        "POST",
        "/v1/messages",
        message(
            text("Let me check."),
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}},
            stop_reason="tool_use",
        ),
    )
    llm = _make(mode, server)
    reply = resolve(llm.complete([{"role": "user", "content": "weather?"}], tools=[WEATHER], tool_choice="required"))
    assert reply.content == "Let me check." and reply.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.parsed_arguments()) for c in reply.tool_calls] == [
        ("toolu_1", "get_weather", {"city": "Paris"}),
        ("toolu_2", "get_weather", {"city": "Rome"}),
    ]
    assert (reply.usage.prompt_tokens, reply.usage.total_tokens) == (12, 17)
    body = _bodies(server)[-1]
    assert body["tools"] == [
        {"name": "get_weather", "input_schema": WEATHER["function"]["parameters"], "description": "Weather in a city."}
    ]
    assert body["tool_choice"] == {"type": "any"}
    # the tool round trip: OpenAI-style assistant tool_calls and tool results become Claude blocks
    history = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [c.to_openai() for c in reply.tool_calls]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "rain"},
    ]
    resolve(llm.complete(history, tools=[WEATHER]))
    sent = _bodies(server)[-1]["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}},
        ],
    }
    assert sent[2]["role"] == "user" and [b["tool_use_id"] for b in sent[2]["content"]] == ["toolu_1", "toolu_2"]
    assert sent[2]["content"][0]["content"] == [{"type": "text", "text": "sunny"}]


def test_retries_with_backoff_then_succeeds(mode: str, server: FakeHTTPServer) -> None:
    server.route(
        "POST",
        "/v1/messages",
        [
            error(529, "overloaded_error", "Overloaded", **{"retry-after-ms": "10"}),
            error(429, "rate_limit_error", "slow down", **{"retry-after-ms": "10"}),
            message(text("finally")),
        ],
    )
    started = time.monotonic()
    assert resolve(_make(mode, server, retry=3).chat("hi")) == "finally"
    assert len(server.requests) == 3 and time.monotonic() - started < 5


def test_retries_are_bounded(mode: str, server: FakeHTTPServer) -> None:
    server.route("POST", "/v1/messages", error(429, "rate_limit_error", "slow down", **{"retry-after-ms": "5"}))
    with pytest.raises(LLMRateLimitError) as info:
        resolve(_make(mode, server, retry=2).chat("hi"))
    assert len(server.requests) == 2 and info.value.status == 429 and "slow down" in info.value.body


def test_client_errors_are_not_retried(mode: str, server: FakeHTTPServer) -> None:
    server.route("POST", "/v1/messages", error(400, "invalid_request_error", "max_tokens: too large"))
    with pytest.raises(LLMAPIError, match="too large") as info:
        resolve(_make(mode, server).chat("hi"))
    assert info.value.status == 400 and len(server.requests) == 1


def test_rejected_key_rotates_to_the_next(mode: str, server: FakeHTTPServer) -> None:
    def by_key(request: RecordedRequest) -> Canned:
        if _key(request) == "sk-bad":
            return error(401, "authentication_error", "invalid x-api-key")
        return message(text("ok"))

    server.route("POST", "/v1/messages", by_key)
    llm = _make(mode, server, key=["sk-bad", "sk-good"])
    assert resolve(llm.chat("hi")) == "ok"
    assert resolve(llm.chat("again")) == "ok"
    assert [_key(r) for r in server.requests] == ["sk-bad", "sk-good", "sk-good"]
    assert llm.keys.retired == {"sk-bad"}


def test_all_keys_rejected(mode: str, server: FakeHTTPServer) -> None:
    server.route("POST", "/v1/messages", error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(LLMAPIError, match="invalid x-api-key"):
        resolve(_make(mode, server, key=["a", "b"]).chat("hi"))


def test_key_from_environment(monkeypatch: pytest.MonkeyPatch, server: FakeHTTPServer) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env1,sk-env2")
    assert _make("sync", server, key="ENV").keys.keys == ["sk-env1", "sk-env2"]
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(UserError, match="API key"):
        _make("sync", server, key="ENV")


def test_missing_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(MissingDependencyError, match=r"plait\[anthropic\]"):
        ClaudeAPI(key="x")


def test_protocol_helpers() -> None:
    assert [convert_tool_choice(c) for c in ("auto", "none", "required", "f", None)] == [
        {"type": "auto"},
        {"type": "none"},
        {"type": "any"},
        {"type": "tool", "name": "f"},
        None,
    ]
    assert convert_tool_choice({"type": "function", "function": {"name": "g"}}) == {"type": "tool", "name": "g"}
    request = build_request(
        "m", [{"role": "user", "content": "a"}], {"max_new_tokens": 7, "metadata": {"user_id": "u"}}
    )
    assert request == {
        "model": "m",
        "max_tokens": 7,
        "messages": [{"role": "user", "content": "a"}],
        "metadata": {"user_id": "u"},
    }
    with pytest.raises(UserError, match="meta template"):
        build_request("m", [{"role": "environment", "content": "x"}], {})
    parsed = parse_message({"content": [text("a"), text("b")], "stop_reason": "max_tokens"})
    assert (parsed.content, parsed.finish_reason, parsed.usage) == ("ab", "length", None)


def test_a_transport_error_after_the_response_began_is_an_llm_error() -> None:
    """A stream the connection cuts raises the SDK's HTTP library's own error; plait maps it (issue 15)."""
    anthropic = pytest.importorskip("anthropic")
    from plait.exceptions import LLMConnectionError, LLMTimeoutError
    from plait.llms.anthropic_llm import _to_plait

    library = next(
        (importlib.import_module(name) for name in ("httpx", "httpx2") if importlib.util.find_spec(name)), None
    )
    if library is None:
        pytest.skip("the SDK's HTTP library is not importable under a known name")
    cut = _to_plait(anthropic, library.ReadError("peer closed connection sk-ant-secret"), 1, ["sk-ant-secret"])
    assert isinstance(cut, LLMConnectionError) and "ReadError" in str(cut) and "sk-ant-secret" not in str(cut)
    slow = _to_plait(anthropic, library.ReadTimeout("read timed out"), 1)
    assert isinstance(slow, LLMTimeoutError)
    assert _to_plait(anthropic, KeyError("x"), 1) is None  # a bug stays a bug
