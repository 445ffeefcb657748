"""GPTAPI / AsyncGPTAPI against a real local HTTP server; every behaviour runs in sync and async mode."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from _support import collect, resolve
from plait.agents import Agent, AsyncAgent
from plait.exceptions import (
    LLMAPIError,
    LLMConnectionError,
    LLMRateLimitError,
    LLMResponseError,
    LLMTimeoutError,
)
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.llms._http import LeanClient
from plait.llms.response import ModelResponse, ToolCall, ToolCallsSoFar, Usage
from plait.schema import ModelStatusCode
from plait.testing.fake_openai import Hang, HTTPFault, InvalidJSON, RawSSE, Reply, Truncated
from plait.utils._aio import PerLoop

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
HI = [{"role": "user", "content": "hi"}]
WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


def texts(items: list[Any]) -> list[str]:
    return [text for _, text, _ in items]


# -- chat, parameters, streaming --


def test_chat_returns_text_and_sends_any_model_name(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server(["Hello there!"])
    llm = make_llm(server, model_type="deepseek-chat", max_new_tokens=16_384, temperature=0.1, top_k=3)
    assert resolve(llm.chat(HI)) == "Hello there!"
    (body,) = server.requests
    assert body["model"] == "deepseek-chat"
    assert body["max_tokens"] == 16_384
    assert body["temperature"] == 0.1
    assert body["messages"] == HI
    assert "top_k" not in body and "repetition_penalty" not in body and "stop" not in body
    assert "Authorization" not in server.headers[0]


def test_appended_stop_word_reaches_the_server_as_stop(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server(["a", "b"])
    llm = make_llm(server, stop_words=["<|im_end|>"])
    llm.gen_params["stop_words"].append("\n```\n")
    resolve(llm.chat(HI))
    resolve(llm.chat(HI, stop_words=["END"]))  # a per-call override replaces them for that call only
    assert server.requests[0]["stop"] == ["<|im_end|>", "\n```\n"]
    assert server.requests[1]["stop"] == ["END"]
    assert llm.gen_params["stop_words"] == ["<|im_end|>", "\n```\n"]


def test_client_side_stop_words_truncate_the_reply(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server(["print(1)\n```\nextra text"])  # a server that ignored `stop`
    llm = make_llm(server, stop_words=["\n```\n"])
    assert resolve(llm.chat(HI)) == "print(1)"


def test_json_mode_extra_body_and_per_call_overrides(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server(['{"ok": true}'])
    llm = make_llm(server, json_mode=True, extra_body={"top_k": 20})
    assert json.loads(resolve(llm.chat(HI, seed=1, temperature=0))) == {"ok": True}
    body = server.requests[0]
    assert body["response_format"] == {"type": "json_object"}
    assert body["top_k"] == 20
    assert body["seed"] == 1
    assert body["temperature"] == 0


def test_stream_chat_yields_cumulative_text_and_a_final_response(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([Reply("The sky is blue.")])
    llm = make_llm(server)
    items = collect(llm.stream_chat(HI))
    assert texts(items) == ["The ", "The sky ", "The sky is ", "The sky is blue.", "The sky is blue."]
    assert [status for status, _, _ in items] == [ModelStatusCode.STREAM_ING] * 4 + [ModelStatusCode.END]
    final = items[-1][2]
    assert isinstance(final, ModelResponse)
    assert final.content == "The sky is blue." and final.finish_reason == "stop"
    assert final.usage == Usage(prompt_tokens=1, completion_tokens=4, total_tokens=5)
    assert server.requests[0]["stream"] is True
    assert server.requests[0]["stream_options"] == {"include_usage": True}


def test_string_input_becomes_a_user_message(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server(["ok"])
    resolve(make_llm(server).chat("just a prompt"))
    assert server.requests[0]["messages"] == [{"role": "user", "content": "just a prompt"}]


def test_batch_chat_answers_each_conversation(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server()  # echo
    llm = make_llm(server)
    assert resolve(llm.chat([[{"role": "user", "content": "one"}], [{"role": "user", "content": "two"}]])) == [
        "one",
        "two",
    ]


# -- native tool calling --


def test_complete_returns_parallel_tool_calls_and_usage(mode: str, fake_server: Any, make_llm: Any) -> None:
    reply = Reply(tool_calls=[("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})])
    server = fake_server([reply])
    llm = make_llm(server)
    response = resolve(llm.complete(HI, tools=[WEATHER], tool_choice="auto"))
    assert response.content == ""
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == [
        ToolCall("call_0", "get_weather", '{"city": "Paris"}'),
        ToolCall("call_1", "get_weather", '{"city": "Rome"}'),
    ]
    assert response.usage is not None and response.usage.completion_tokens > 0
    assert server.requests[0]["tools"] == [WEATHER]
    assert server.requests[0]["tool_choice"] == "auto"


def test_tool_results_round_trip_as_native_messages(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server(["It is sunny in Paris."])
    llm = make_llm(server)
    call = ToolCall("call_0", "get_weather", '{"city": "Paris"}')
    history = [
        *HI,
        {"role": "assistant", "content": None, "tool_calls": [call.to_openai()]},
        {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
    ]
    assert resolve(llm.complete(history, tools=[WEATHER])).content == "It is sunny in Paris."
    assert server.requests[0]["messages"] == history


def test_streamed_tool_call_deltas_are_reassembled(mode: str, fake_server: Any, make_llm: Any) -> None:
    reply = Reply("Let me check.", tool_calls=[("get_weather", {"city": "Paris, France"}), ("noop", {})])
    server = fake_server([reply], chunk_size=3)
    items = collect(make_llm(server).stream_chat(HI, tools=[WEATHER]))
    status, text, final = items[-1]
    assert status == ModelStatusCode.END and text == "Let me check."
    assert final.tool_calls == [
        ToolCall("call_0", "get_weather", '{"city": "Paris, France"}'),
        ToolCall("call_1", "noop", "{}"),
    ]
    assert final.finish_reason == "tool_calls"


# -- recorded transcripts replayed over HTTP --


def test_recorded_text_stream_replays_exactly(mode: str, fake_server: Any, make_llm: Any) -> None:
    transcript = (FIXTURES / "openai_chat_stream_text_sse.txt").read_text(encoding="utf-8")
    server = fake_server([RawSSE(transcript)])
    llm = make_llm(server)
    items = collect(llm.stream_chat(HI))
    expected = "".join(
        choice["delta"].get("content") or ""
        for line in transcript.splitlines()
        if line.startswith("data: {")
        for choice in json.loads(line[6:])["choices"]
    )
    assert items[-1][1] == expected
    assert items[-1][2].usage == Usage(14, 30, 44)
    assert all(len(a[1]) < len(b[1]) for a, b in itertools.pairwise(items[:-1]))
    assert llm.usage == Usage(14, 30, 44)


def test_recorded_parallel_tool_call_stream_replays_exactly(mode: str, fake_server: Any, make_llm: Any) -> None:
    transcript = (FIXTURES / "openai_chat_stream_parallel_tool_calls_sse.txt").read_text(encoding="utf-8")
    server = fake_server([RawSSE(transcript)])
    items = collect(make_llm(server).stream_chat(HI, tools=[WEATHER]))
    *writing, (status, _, final) = items
    assert status == ModelStatusCode.END
    assert writing and all(text == "" and isinstance(extra, ToolCallsSoFar) for _, text, extra in writing)
    assert writing[-1][2].tool_calls == tuple(final.tool_calls)  # the calls as written are the calls
    assert [(c.id, c.name, c.parsed_arguments()) for c in final.tool_calls] == [
        ("call_JMW1whyEaYG438VE1OIflxA2", "GetWeatherArgs", {"city": "Edinburgh", "country": "GB", "units": "c"}),
        ("call_DNYTawLBoN8fj3KN6qU9N1Ou", "get_stock_price", {"ticker": "AAPL", "exchange": "NASDAQ"}),
    ]


def test_recorded_completion_body_replays_exactly(mode: str, fake_server: Any, make_llm: Any) -> None:
    body = json.loads((FIXTURES / "openai_chat_completion_parallel_tool_calls.json").read_text(encoding="utf-8"))
    server = fake_server([body])
    response = resolve(make_llm(server).complete(HI, tools=[WEATHER]))
    assert [c.name for c in response.tool_calls] == ["GetWeatherArgs", "get_stock_price"]
    assert response.usage == Usage(149, 60, 209)


# -- retries and faults --


def test_500_then_ok_is_retried(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([HTTPFault(500), HTTPFault(503), "recovered"])
    assert resolve(make_llm(server).chat(HI)) == "recovered"
    assert len(server.requests) == 3
    server.assert_done()


def test_429_retry_after_is_honoured(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([HTTPFault(429, retry_after=0.4), "ok"])
    llm = make_llm(server)
    start = time.perf_counter()
    assert resolve(llm.chat(HI)) == "ok"
    waited = time.perf_counter() - start
    assert 0.4 <= waited < 30  # the backoff alone would be <= 0.05 s


def test_persistent_500_gives_up_after_retry_attempts(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([HTTPFault(500, {"error": {"message": "engine crashed"}})] * 3)
    with pytest.raises(LLMAPIError, match="HTTP 500: engine crashed") as info:
        resolve(make_llm(server, retry=3).chat(HI))
    assert info.value.status == 500
    assert info.value.attempts == 3
    assert "engine crashed" in info.value.body
    assert len(server.requests) == 3


def test_client_errors_are_not_retried(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([HTTPFault(400, {"error": {"message": "bad 'messages'"}}), "never"])
    with pytest.raises(LLMAPIError, match="bad 'messages'") as info:
        resolve(make_llm(server).chat(HI))
    assert info.value.status == 400 and info.value.attempts == 1
    assert server.remaining == 1


def test_rate_limit_exhaustion_raises_rate_limit_error(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([HTTPFault(429)] * 2)
    with pytest.raises(LLMRateLimitError) as info:
        resolve(make_llm(server, retry=2).chat(HI))
    assert info.value.attempts == 2 and info.value.status == 429


def test_timeout_is_bounded(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([Hang(60), Hang(60)])
    llm = make_llm(server, retry=2, timeout=0.2)
    start = time.perf_counter()
    with pytest.raises(LLMTimeoutError, match="timed out") as info:
        resolve(llm.chat(HI))
    assert info.value.attempts == 2
    assert time.perf_counter() - start < 30  # each Hang lasts 60 s


def test_per_call_timeout_override(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([Reply("slow", delay=30)])
    with pytest.raises(LLMTimeoutError):
        resolve(make_llm(server, retry=1, timeout=30).chat(HI, timeout=0.1))
    assert "timeout" not in server.requests[0]


def test_truncated_stream_is_retried_then_reported(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([Truncated("whole answer"), Reply("whole answer")])  # the retry repeats what was streamed
    assert collect(make_llm(server).stream_chat(HI))[-1][1] == "whole answer"
    server = fake_server([Truncated()] * 2)
    with pytest.raises(LLMConnectionError, match="before the response was complete") as info:
        collect(make_llm(server, retry=2).stream_chat(HI))
    assert info.value.attempts == 2


def test_truncated_json_body_is_a_connection_error(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([Truncated()] * 2)
    with pytest.raises(LLMConnectionError) as info:
        resolve(make_llm(server, retry=2).chat(HI))
    assert info.value.attempts == 2


@pytest.mark.parametrize("stream", [False, True])
def test_invalid_json_gives_up_with_a_response_error(mode: str, stream: bool, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([InvalidJSON()] * 3)
    llm = make_llm(server, retry=3)
    with pytest.raises(LLMResponseError, match=r"not (valid )?JSON") as info:
        if stream:
            collect(llm.stream_chat(HI))
        else:
            resolve(llm.chat(HI))
    assert info.value.attempts == 3
    assert len(server.requests) == 3


def test_connection_refused_is_a_connection_error(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server()
    llm = make_llm(server, retry=2)
    server.stop()
    with pytest.raises(LLMConnectionError, match="could not reach the server") as info:
        resolve(llm.chat(HI))
    assert info.value.attempts == 2


# -- keys --


def test_exhausted_key_is_skipped(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server(exhausted_keys={"sk-empty"})
    llm = make_llm(server, key=["sk-empty", "sk-good"], retry=1)
    for i in range(4):
        assert resolve(llm.chat(f"q{i}")) == f"q{i}"
    used = [h.get("Authorization") for h in server.headers]
    assert used == ["Bearer sk-empty", "Bearer sk-good", "Bearer sk-good", "Bearer sk-good", "Bearer sk-good"]
    assert llm.keys.retired == {"sk-empty"}


def test_all_keys_exhausted_raises(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server(exhausted_keys={"k1", "k2"})
    llm = make_llm(server, key=["k1", "k2"])
    with pytest.raises(LLMRateLimitError, match="exceeded your current quota") as info:
        resolve(llm.chat(HI))
    assert info.value.attempts == 2  # one request per key, then no key is left: no waiting
    with pytest.raises(LLMRateLimitError, match="all 2 API keys have insufficient quota"):
        resolve(llm.chat(HI))
    assert len(server.requests) == 2


def test_keys_rotate_round_robin_and_env_key(
    mode: str, fake_server: Any, make_llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_server()
    llm = make_llm(server, key=["a", "b"], org="org-x")
    for _ in range(4):
        resolve(llm.chat(HI))
    assert [h["Authorization"] for h in server.headers] == ["Bearer a", "Bearer b", "Bearer a", "Bearer b"]
    assert all(h["OpenAI-Organization"] == "org-x" for h in server.headers)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    resolve(make_llm(server, key="ENV").chat(HI))
    assert server.headers[-1]["Authorization"] == "Bearer sk-env"


# -- usage --


def test_usage_accumulates_over_requests(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([Reply("a b", usage={"prompt_tokens": 10, "completion_tokens": 2}), Reply("c")])
    llm = make_llm(server)
    resolve(llm.chat(HI))
    collect(llm.stream_chat(HI))
    assert llm.usage == Usage(prompt_tokens=11, completion_tokens=3, total_tokens=14)


# -- concurrency and lifecycle --


def _pool(llm: AsyncGPTAPI) -> PerLoop[Any]:
    """The per-loop pools of a client of a plain http:// server (the lean HTTP/1.1 client's)."""
    http = llm._transport.http
    assert isinstance(http, LeanClient)
    return http.pool


def test_async_client_pools_one_session_for_256_concurrent_calls(fake_server: Any) -> None:
    server = fake_server(latency=0.02)
    llm = AsyncGPTAPI("m", api_base=server.base_url, key=None)

    async def run() -> list[str]:
        answers = await asyncio.gather(*(llm.chat(f"session {i}") for i in range(256)))
        assert len(_pool(llm)._sessions) == 1
        return list(answers)

    assert asyncio.run(run()) == [f"session {i}" for i in range(256)]
    assert llm.usage.prompt_tokens == 512
    # A second event loop gets its own session; the first one was closed with its loop.
    (first,) = [session for session, _ in _pool(llm)._sessions.values()]
    assert first.closed
    assert asyncio.run(llm.chat("again")) == "again"


def test_async_aclose_and_context_manager(fake_server: Any) -> None:
    server = fake_server()

    async def run() -> None:
        async with AsyncGPTAPI("m", api_base=server.base_url, key=None) as llm:
            assert await llm.chat("x") == "x"
            (session,) = [s for s, _ in _pool(llm)._sessions.values()]
        assert session.closed
        assert not _pool(llm)._sessions

    asyncio.run(run())


def test_sync_client_is_thread_safe(fake_server: Any) -> None:
    server = fake_server(latency=0.01)
    with GPTAPI("m", api_base=server.base_url, key=None) as llm:
        results: dict[int, str] = {}

        def worker(i: int) -> None:
            results[i] = llm.chat(f"thread {i}")

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(32)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results == {i: f"thread {i}" for i in range(32)}
        assert llm.usage.prompt_tokens == 64


def test_sync_client_works_inside_a_running_event_loop(fake_server: Any) -> None:
    server = fake_server()
    with GPTAPI("m", api_base=server.base_url, key=None) as llm:

        async def inside() -> str:
            return llm.chat("from a coroutine")

        assert asyncio.run(inside()) == "from a coroutine"


def test_abandoned_stream_releases_its_connection(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([Reply("one two three four"), "next"], chunk_delay=0.01)
    llm = make_llm(server)
    if mode == "sync":
        stream = llm.stream_chat(HI)
        assert next(stream)[1] == "one "
        stream.close()
    else:

        async def first() -> str:
            stream = llm.stream_chat(HI)
            async for _status, text, _ in stream:
                await stream.aclose()
                return str(text)
            return ""

        assert asyncio.run(first()) == "one "
    assert resolve(llm.chat(HI)) == "next"


def test_sync_client_close_is_idempotent_and_restartable(fake_server: Any) -> None:
    server = fake_server()
    llm = GPTAPI("m", api_base=server.base_url, key=None)
    assert llm.chat("a") == "a"
    llm.close()
    llm.close()
    assert llm.chat("b") == "b"  # a later call starts the IO thread again
    llm.close()


def test_failed_call_leaves_agent_memory_unchanged(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server(["first answer", HTTPFault(500), HTTPFault(502)])
    llm = make_llm(server, retry=2)
    agent = (AsyncAgent if mode == "async" else Agent)(llm, "Be brief.")
    assert resolve(agent("hello")).content == "first answer"
    before = agent.state_dict()
    with pytest.raises(LLMAPIError) as info:
        resolve(agent("again"))
    assert info.value.status == 502 and info.value.attempts == 2
    assert agent.state_dict() == before
    assert server.requests[0]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello"},
    ]


def test_a_held_stream_waits_for_its_gate(mode: str, fake_server: Any, make_llm: Any) -> None:
    gate = threading.Event()
    server = fake_server([Reply("one two three four", hold=(2, gate))])
    llm = make_llm(server)
    seen: list[str] = []
    if mode == "sync":
        for _status, text, _ in llm.stream_chat(HI):
            seen.append(str(text))
            if text == "one two ":
                assert not gate.is_set()
                gate.set()
    else:

        async def read() -> None:
            async for _status, text, _ in llm.stream_chat(HI):
                seen.append(str(text))
                if text == "one two ":
                    gate.set()

        asyncio.run(read())
    assert "one two " in seen and seen[-1] == "one two three four"
