"""The OpenAI wire format as pure functions: URLs, request bodies, response and SSE parsing, retry timing."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from plait.exceptions import LLMAPIError, LLMConnectionError, LLMRateLimitError, LLMResponseError, UserError
from plait.llms import GPTAPI
from plait.llms._openai_protocol import (
    StreamAccumulator,
    build_headers,
    build_payload,
    chat_completions_url,
    parse_completion,
    parse_usage,
)
from plait.llms._retry import RetryPolicy, error_for_status, is_retryable, parse_retry_after
from plait.llms._sse import SSEDecoder
from plait.llms.response import ModelResponse, ToolCall, Usage

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
MESSAGES = [{"role": "user", "content": "hi"}]


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


# -- URLs and headers --


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/chat/completions"),
        ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1/chat/completions"),
        ("http://127.0.0.1:8000/v1/chat/completions", "http://127.0.0.1:8000/v1/chat/completions"),
        ("https://api.openai.com/v1/chat/completions", "https://api.openai.com/v1/chat/completions"),
        ("http://localhost:11434", "http://localhost:11434/v1/chat/completions"),
        ("https://example.com/openai/deployments/x", "https://example.com/openai/deployments/x/chat/completions"),
        (
            "https://example.com/openai/v1?api-version=2024",
            "https://example.com/openai/v1/chat/completions?api-version=2024",
        ),
        ("http://127.0.0.1:8000?key=k", "http://127.0.0.1:8000/v1/chat/completions?key=k"),
    ],
)
def test_api_base_accepts_a_base_url_or_the_full_endpoint(base: str, url: str) -> None:
    assert chat_completions_url(base) == url


def test_api_base_must_be_http() -> None:
    with pytest.raises(UserError, match="api_base must be an http"):
        chat_completions_url("127.0.0.1:8000")
    with pytest.raises(UserError) as info:  # the message shows the URL without its password
        chat_completions_url("ftp://user:hunter2pass@host/v1")
    assert "hunter2pass" not in str(info.value)


@pytest.mark.parametrize("field", ["model", "messages", "stream", "tools"])
def test_extra_body_cannot_replace_what_plait_sets(field: str) -> None:
    with pytest.raises(UserError, match="extra_body cannot replace"):
        build_payload("m", [{"role": "user", "content": "hi"}], {"extra_body": {field: "other"}})
    payload = build_payload("m", [{"role": "user", "content": "hi"}], {"extra_body": {"top_k": 5}})
    assert payload["top_k"] == 5 and payload["model"] == "m"


def test_headers_carry_authorization_only_with_a_key() -> None:
    assert build_headers(None) == {"Content-Type": "application/json"}
    assert build_headers("sk-1", "org-1") == {
        "Content-Type": "application/json",
        "Authorization": "Bearer sk-1",
        "OpenAI-Organization": "org-1",
    }


# -- request bodies --


def test_payload_maps_plait_params_and_sends_only_openai_fields() -> None:
    params = {
        "max_new_tokens": 100_000,
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 40,
        "repetition_penalty": 1.1,
        "stop_words": ["<|im_end|>", "\n```\n"],
        "seed": 7,
        "skip_special_tokens": False,
        "presence_penalty": None,
    }
    payload = build_payload("deepseek-chat", MESSAGES, params)
    assert payload == {
        "model": "deepseek-chat",
        "messages": MESSAGES,
        "max_tokens": 100_000,  # no cap
        "temperature": 0.2,
        "top_p": 0.9,
        "stop": ["<|im_end|>", "\n```\n"],
        "seed": 7,
    }


def test_payload_extra_body_json_mode_tools_and_stream() -> None:
    tool = {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    payload = build_payload(
        "m",
        MESSAGES,
        {"max_new_tokens": 8, "extra_body": {"top_k": 20, "repetition_penalty": 1.05}},
        stream=True,
        json_mode=True,
        tools=[tool],
        tool_choice="required",
    )
    assert payload["top_k"] == 20
    assert payload["repetition_penalty"] == 1.05
    assert payload["response_format"] == {"type": "json_object"}
    assert payload["tools"] == [{"type": "function", "function": tool}]
    assert payload["tool_choice"] == "required"
    assert payload["stream"] is True
    assert payload["stream_options"] == {"include_usage": True}
    assert "stop" not in payload


def test_a_tool_named_as_tool_choice_is_sent_as_the_function_object() -> None:
    # The API (and llama.cpp's server: HTTP 400 "Invalid tool_choice: get_weather") takes only
    # the three words or the function object; plait's backends also take a tool's bare name.
    tool = {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    named = {"type": "function", "function": {"name": "get_weather"}}
    for choice, sent in (("get_weather", named), (named, named), ("auto", "auto"), ("none", "none")):
        assert build_payload("m", MESSAGES, {}, tools=[tool], tool_choice=choice)["tool_choice"] == sent


def test_payload_prefers_max_completion_tokens_and_explicit_response_format() -> None:
    payload = build_payload(
        "o3-mini",
        MESSAGES,
        {
            "max_new_tokens": 512,
            "max_completion_tokens": 2048,
            "temperature": None,
            "response_format": {"type": "text"},
        },
        json_mode=True,
    )
    assert "max_tokens" not in payload
    assert "temperature" not in payload
    assert payload["max_completion_tokens"] == 2048
    assert payload["response_format"] == {"type": "text"}


def test_request_bodies_are_compact_utf8_json_and_what_orjson_refuses_still_goes() -> None:
    from plait.llms._openai_core import encode_body

    payload = {"model": "m", "messages": [{"role": "user", "content": "héllo \u4e16\u754c"}], "temperature": 0.5}
    body = encode_body(payload)
    assert body == json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert json.loads(body) == payload
    # refused by orjson, sent by the standard encoder as before
    assert json.loads(encode_body({"seed": 2**70})) == {"seed": 2**70}  # beyond 64 bits: kept exact
    assert json.loads(encode_body({"logit_bias": {50256: -100}})) == {"logit_bias": {"50256": -100}}
    assert json.loads(encode_body({"user": "a\ud800b"})) == {"user": "a?b"}  # a lone surrogate: replaced
    assert json.loads(encode_body({"temperature": float("nan")})) == {"temperature": None}  # not JSON: null
    with pytest.raises(TypeError):  # an object neither encoder knows is a bug, not a request
        encode_body({"model": object()})


def test_client_builds_requests_from_gen_params_without_a_network() -> None:
    llm = GPTAPI("any-model-name/v2", key=None, api_base="http://127.0.0.1:1/v1", max_new_tokens=8192, stop_words="X")
    llm.gen_params["stop_words"].append("\n```\n")
    payload, _, timeout = llm._request([{"role": "environment", "content": "obs"}], {"timeout": 3}, stream=False)
    assert payload["model"] == "any-model-name/v2"
    assert payload["max_tokens"] == 8192
    assert payload["stop"] == ["X", "\n```\n"]
    assert payload["messages"] == [{"role": "system", "content": "obs"}]
    assert timeout == 3
    assert "top_k" not in payload
    assert llm.api_base == "http://127.0.0.1:1/v1/chat/completions"
    assert llm.is_api


# -- non-streaming responses --


def test_parse_recorded_parallel_tool_calls() -> None:
    body = json.loads(fixture_text("openai_chat_completion_parallel_tool_calls.json"))
    response = parse_completion(body)
    assert response.content == ""
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == [
        ToolCall(
            "call_fdNz3vOBKYgOIpMdWotB9MjY",
            "GetWeatherArgs",
            '{"city": "Edinburgh", "country": "GB", "units": "c"}',
        ),
        ToolCall("call_h1DWI1POMJLb0KwIyQHWXD4p", "get_stock_price", '{"ticker": "AAPL", "exchange": "NASDAQ"}'),
    ]
    assert response.tool_calls[1].parsed_arguments() == {"ticker": "AAPL", "exchange": "NASDAQ"}
    assert response.usage == Usage(prompt_tokens=149, completion_tokens=60, total_tokens=209)
    assert response.raw is body


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"error": {"message": "model overloaded"}}, "model overloaded"),
        ({"id": "x", "choices": []}, "no 'choices'"),
        (["not", "an", "object"], "expected a JSON object"),
    ],
)
def test_parse_completion_rejects_bodies_without_choices(body: Any, match: str) -> None:
    with pytest.raises(LLMResponseError, match=match):
        parse_completion(body)


def test_parse_completion_accepts_dict_arguments_and_missing_ids() -> None:
    body = {
        "choices": [
            {
                "message": {"content": "ok", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
                "finish_reason": "tool_calls",
            }
        ]
    }
    assert parse_completion(body).tool_calls == [ToolCall("call_0", "f", '{"a": 1}')]


# -- SSE --


def test_sse_decoder_handles_any_split_and_line_ending() -> None:
    stream = b'data: {"a": 1}\r\n\r\n: comment\n\nevent: x\ndata: line1\ndata: line2\n\ndata: [DONE]\r\r'
    rng = random.Random(0)
    for _ in range(200):
        decoder = SSEDecoder()
        cuts = sorted(rng.sample(range(1, len(stream)), 6))
        events: list[str] = []
        for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
            events += decoder.feed(stream[start:end])
        events += decoder.flush()
        assert events == ['{"a": 1}', "line1\nline2", "[DONE]"]


def test_sse_decoder_flush_dispatches_an_unterminated_event() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x\n") == []
    assert decoder.flush() == ["x"]


def test_sse_decoder_keeps_the_last_event_id_and_the_retry_hint() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"id: 7\nretry: 250\ndata: \n\n") == [""]  # an MCP priming event
    assert (decoder.last_event_id, decoder.retry) == ("7", 250)
    assert decoder.feed(b"id: 8\n") == [] and decoder.last_event_id == "7"  # set when the event is dispatched
    assert decoder.feed(b"retry: soon\ndata: x\n\n") == ["x"]
    assert (decoder.last_event_id, decoder.retry) == ("8", 250)  # a retry that is not digits is ignored


def _accumulate(transcript: str, chunk_size: int) -> tuple[StreamAccumulator, list[str]]:
    acc = StreamAccumulator()
    decoder = SSEDecoder()
    texts: list[str] = []
    raw = transcript.encode()
    for i in range(0, len(raw), chunk_size):
        for data in decoder.feed(raw[i : i + chunk_size]):
            if acc.feed_data(data):
                texts.append(acc.text)
    for data in decoder.flush():
        acc.feed_data(data)
    return acc, texts


@pytest.mark.parametrize("chunk_size", [1, 7, 100_000])
def test_recorded_text_stream_reassembles_exactly(chunk_size: int) -> None:
    transcript = fixture_text("openai_chat_stream_text_sse.txt")
    deltas = []
    for line in transcript.splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                deltas.append(choice["delta"].get("content") or "")
    acc, texts = _accumulate(transcript, chunk_size)
    assert acc.text == "".join(deltas)
    assert acc.text.startswith("I'm unable to provide real-time weather updates.")
    assert texts[-1] == acc.text and len(texts) == sum(1 for d in deltas if d)
    assert acc.done and acc.complete
    response = acc.response()
    assert response == ModelResponse(
        content=acc.text, finish_reason="stop", usage=Usage(prompt_tokens=14, completion_tokens=30, total_tokens=44)
    )


@pytest.mark.parametrize("chunk_size", [1, 13, 100_000])
def test_recorded_parallel_tool_call_stream_reassembles_exactly(chunk_size: int) -> None:
    acc, texts = _accumulate(fixture_text("openai_chat_stream_parallel_tool_calls_sse.txt"), chunk_size)
    assert texts and not any(texts)  # the calls grew (streamed to the caller as calls), the text never
    response = acc.response()
    assert [(c.id, c.name, c.arguments) for c in acc.tool_calls] == [
        (c.id, c.name, c.arguments) for c in response.tool_calls
    ]
    assert response.tool_calls == [
        ToolCall(
            "call_JMW1whyEaYG438VE1OIflxA2", "GetWeatherArgs", '{"city": "Edinburgh", "country": "GB", "units": "c"}'
        ),
        ToolCall("call_DNYTawLBoN8fj3KN6qU9N1Ou", "get_stock_price", '{"ticker": "AAPL", "exchange": "NASDAQ"}'),
    ]
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(prompt_tokens=149, completion_tokens=60, total_tokens=209)


def test_accumulator_handles_whole_calls_without_index_and_errors() -> None:
    acc = StreamAccumulator()
    acc.feed({"choices": [{"delta": {"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]}}]})
    acc.feed({"choices": [{"delta": {"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": {"x": 1}}}]}}]})
    assert [(c.id, c.name, c.arguments) for c in acc.response().tool_calls] == [
        ("a", "f", "{}"),
        ("b", "g", '{"x": 1}'),
    ]
    assert not acc.complete
    with pytest.raises(LLMResponseError, match="not JSON"):
        acc.feed_data("{broken")
    with pytest.raises(LLMResponseError, match="mid-stream"):
        acc.feed({"error": {"message": "boom"}})


# -- retry decisions --


def test_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "1500", "Retry-After": "9"}) == 1.5
    assert parse_retry_after({}) is None
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert 0 <= (parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) or 0) < 1


def test_retry_policy_backoff_is_exponential_with_jitter_and_bounded() -> None:
    policy = RetryPolicy(max_attempts=5, backoff_base=1.0, backoff_max=4.0)
    err = error_for_status(503, "")
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 4.0)]:
        delays = {policy.decide(err, attempt) for _ in range(50)}
        assert all(d is not None and ceiling / 2 <= d <= ceiling for d in delays)
        assert len(delays) > 1  # jitter
    assert policy.decide(err, 5) is None


def test_retry_policy_honours_retry_after_up_to_a_limit() -> None:
    policy = RetryPolicy(max_attempts=3, backoff_base=0.05, max_retry_after=10)
    delay = policy.decide(error_for_status(429, "{}", retry_after=2.0), 1)
    assert delay is not None and 2.0 <= delay <= 2.05
    assert policy.decide(error_for_status(429, "{}", retry_after=11.0), 1) is None


@pytest.mark.parametrize(
    ("err", "retryable"),
    [
        (error_for_status(500, ""), True),
        (error_for_status(429, ""), True),
        (error_for_status(408, ""), True),
        (error_for_status(400, ""), False),
        (error_for_status(401, ""), False),
        (LLMConnectionError("x"), True),
        (LLMResponseError("x"), True),
    ],
)
def test_which_errors_are_retried(err: Any, retryable: bool) -> None:
    assert is_retryable(err) is retryable


def test_error_for_status_quotes_the_server_message() -> None:
    err = error_for_status(429, '{"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}')
    assert isinstance(err, LLMRateLimitError)
    assert isinstance(err, LLMAPIError)
    assert err.status == 429
    assert "Rate limit reached" in str(err)
    assert "rate_limit_exceeded" in err.body


@pytest.mark.parametrize(
    "body",
    [
        {"choices": [{"message": "just a string"}]},
        {"choices": [{"message": {"content": "x", "tool_calls": ["not a call"]}}]},
    ],
)
def test_malformed_fields_are_response_errors(body: Any) -> None:
    with pytest.raises(LLMResponseError, match="malformed message"):
        parse_completion(body)
    assert parse_usage({"prompt_tokens": "many"}) is None
    with pytest.raises(LLMResponseError, match="malformed chunk"):
        StreamAccumulator().feed({"choices": [{"delta": "text"}]})
