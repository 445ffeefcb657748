"""Streaming reliability of the OpenAI-compatible clients: a deadline per attempt; retries never undo shown text.

* A server that keeps a stream open with keep-alive comments (``: ping``) and never answers
  is cut off at the attempt's deadline (``stream_timeout``; by default four times ``timeout``),
  and the attempts are bounded by ``retry``.
* Once streamed text reached the caller, a retry after a cut stream only ever extends it:
  the repeated part is held back; a retry whose answer differs is an `LLMConnectionError`.

Which limit ended a stream is read from the error (the deadline names itself), not from the
clock; each per-read limit leaves the pings (every 0.1 s) at least 0.4 s of slack, so a crowded
machine that delays a ping does not end a stream by its per-read limit instead. Upper bounds on
the time are only against the 60 s the pings would otherwise last.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import pytest

from _support import collect, resolve
from plait.agents import AsyncStreamingAgent, StreamingAgent
from plait.exceptions import LLMConnectionError, LLMTimeoutError, UserError
from plait.llms._openai_core import STREAM_DEADLINE_FACTOR, _held_back, stream_deadline
from plait.schema import ModelStatusCode
from plait.testing.fake_http import Canned, FakeHTTPServer
from plait.testing.fake_openai import PingDrip, Reply, Truncated

HI = [{"role": "user", "content": "hi"}]
FULL = "the full answer is forty two"


def texts(items: list[Any]) -> list[str]:
    """The text of every streamed item (the END item last), in order."""
    return [text for _status, text, _extra in items]


def assert_only_grows(seen: list[str]) -> None:
    """Each text the caller saw is a prefix of the next one."""
    for before, after in itertools.pairwise(seen):
        assert after.startswith(before), (before, after)


def assert_stream_grows(items: list[Any], final: str) -> None:
    """The chunks' texts grow strictly (no text shown twice, none taken back); the END item has `final`."""
    *chunks, (status, text, response) = items
    seen = texts(chunks)
    for before, after in itertools.pairwise(seen):
        assert after.startswith(before) and after != before, (before, after)
    assert status == ModelStatusCode.END and seen[-1] == text == response.content == final


# -- the deadline --


def test_ping_drip_stream_ends_at_the_deadline(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([PingDrip(interval=0.1, seconds=60), PingDrip(interval=0.1, seconds=60)])
    llm = make_llm(server, retry=2, timeout=1, stream_timeout=0.6)
    start = time.perf_counter()
    with pytest.raises(LLMTimeoutError, match=r"0\.6 s deadline") as info:
        collect(llm.stream_chat(HI))
    elapsed = time.perf_counter() - start
    assert info.value.attempts == 2 and len(server.requests) == 2
    assert 1.1 < elapsed < 30  # two attempts of 0.6 s each; each drip would last 60 s


def test_default_deadline_is_a_multiple_of_timeout(mode: str, fake_server: Any, make_llm: Any) -> None:
    # timeout=0.5 bounds each read (pings every 0.1 s pass); the attempt ends at 4 x 0.5 = 2 s
    server = fake_server([PingDrip(interval=0.1, seconds=60)])
    llm = make_llm(server, retry=1, timeout=0.5)
    start = time.perf_counter()
    with pytest.raises(LLMTimeoutError, match=r"within its 2 s deadline") as info:
        collect(llm.stream_chat(HI))
    assert info.value.attempts == 1
    assert 1.9 < time.perf_counter() - start < 30


def test_deadline_follows_a_per_call_timeout(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([PingDrip(interval=0.1, seconds=60)])
    llm = make_llm(server, retry=1, timeout=300)
    start = time.perf_counter()
    with pytest.raises(LLMTimeoutError, match=r"within its 2 s deadline"):  # 4 x 0.5, not 4 x 300
        collect(llm.stream_chat(HI, timeout=0.5))
    assert time.perf_counter() - start < 30
    assert "timeout" not in server.requests[0]


def test_deadline_after_partial_text_then_retry_succeeds(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([PingDrip(interval=0.1, seconds=60, content="the full "), Reply(FULL)])
    items = collect(make_llm(server, retry=2, timeout=1, stream_timeout=0.5).stream_chat(HI))
    assert texts(items)[:2] == ["the ", "the full "]  # the first attempt's, then only what goes beyond it
    assert_stream_grows(items, FULL)
    assert len(server.requests) == 2


def test_stream_within_its_deadline_is_unaffected(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([Reply(FULL)], chunk_delay=0.1)  # over 1 s in all, more than one read's limit
    items = collect(make_llm(server, retry=1, timeout=0.5, stream_timeout=60).stream_chat(HI))
    assert texts(items)[-1] == FULL and len(server.requests) == 1


def test_non_streaming_call_keeps_its_total_timeout(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([PingDrip(interval=0.1, seconds=60)])  # whitespace every 0.1 s, never an answer
    start = time.perf_counter()
    with pytest.raises(LLMTimeoutError):
        resolve(make_llm(server, retry=1, timeout=0.5).chat(HI))
    assert time.perf_counter() - start < 30  # the 0.5 s limit ended it, not the 60 s drip


def test_stream_deadline_rule() -> None:
    assert stream_deadline(300.0, None) == STREAM_DEADLINE_FACTOR * 300.0
    assert stream_deadline(None, None) is None
    assert stream_deadline(1.0, 30.0) == 30.0
    assert stream_deadline(None, 30.0) == 30.0
    assert stream_deadline(1.0, float("inf")) is None
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(UserError, match="stream_timeout"):
            stream_deadline(1.0, bad)


def test_a_bad_stream_timeout_is_refused_at_construction(mode: str, fake_server: Any, make_llm: Any) -> None:
    with pytest.raises(UserError, match="stream_timeout"):
        make_llm(fake_server(), stream_timeout=0)


# -- retries after text was streamed --


def test_cut_stream_then_same_answer_only_grows(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([Truncated(FULL), Reply(FULL)])
    items = collect(make_llm(server).stream_chat(HI))
    assert len(server.requests) == 2
    assert "the full answer is " in texts(items)  # the first attempt's text reached the caller before the cut
    assert_stream_grows(items, FULL)


def test_retry_cut_again_while_catching_up_still_only_grows(mode: str, fake_server: Any, make_llm: Any) -> None:
    # the second attempt is cut before it repeats all the first one sent: nothing of it is shown
    server = fake_server([Truncated(FULL), Truncated("the full"), Reply(FULL)])
    items = collect(make_llm(server, retry=3).stream_chat(HI))
    assert len(server.requests) == 3
    assert_stream_grows(items, FULL)


def test_cut_stream_then_different_answer_is_a_connection_error(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([Truncated("partial answer that never"), Reply("a different answer")])
    seen: list[str] = []
    llm = make_llm(server)

    def consume() -> None:
        for _status, text, _extra in llm.stream_chat(HI):
            seen.append(text)

    async def aconsume() -> None:
        async for _status, text, _extra in llm.stream_chat(HI):
            seen.append(text)

    with pytest.raises(LLMConnectionError, match=r"cut after 20 characters and the retried answer differs") as info:
        resolve(aconsume()) if mode == "async" else consume()
    assert seen == ["partial ", "partial answer ", "partial answer that "]  # never a shrinking or other text
    assert info.value.attempts == 2 and len(server.requests) == 2  # a diverged retry is not retried again


def test_retry_that_ends_shorter_than_what_was_shown_is_a_connection_error(
    mode: str, fake_server: Any, make_llm: Any
) -> None:
    server = fake_server([Truncated(FULL), Reply("the")])
    with pytest.raises(LLMConnectionError, match="retried answer differs"):
        collect(make_llm(server).stream_chat(HI))


def test_retry_before_any_text_stays_invisible(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([Truncated(""), Reply("a different answer")])
    items = collect(make_llm(server).stream_chat(HI))
    assert texts(items)[-1] == "a different answer" and len(server.requests) == 2


def test_streaming_agent_shows_and_remembers_the_same_answer(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server([Truncated(FULL), Reply(FULL)])
    cls = AsyncStreamingAgent if mode == "async" else StreamingAgent
    agent = cls(make_llm(server))
    chunks = collect(agent("hi"))
    seen = [chunk.content for chunk in chunks]
    assert_only_grows(seen)
    assert seen[-1] == FULL
    assert [m.content for m in agent.memory.get_memory()] == ["hi", FULL]


def test_held_back_rule() -> None:
    assert _held_back("", "a") is False
    assert _held_back("abc", "ab") is True
    assert _held_back("abc", "abc") is True
    assert _held_back("abc", "abcd") is False
    assert _held_back("abc", "abX") is None


# -- the same deadline on the Claude client (the SDK bounds only each read) --


def _claude_stream_that_stalls(first: str) -> Canned:
    """A Messages API stream that sends `first`, then only ``ping`` events (for 60 s)."""

    def event(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

    start = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test", "content": []}
    start |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 1}}
    body = event("message_start", {"message": start})
    body += event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    body += event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": first}})
    return Canned.text(
        body,
        content_type="text/event-stream",
        keep_alive=event("ping", {}).encode(),
        keep_alive_every=0.1,
        keep_alive_for=60,
    )


@pytest.mark.parametrize("stream_timeout", [2.0, None])
def test_claude_ping_drip_stream_ends_at_the_deadline(mode: str, stream_timeout: float | None) -> None:
    pytest.importorskip("anthropic")
    from plait.llms.anthropic_llm import AsyncClaudeAPI, ClaudeAPI

    cls = AsyncClaudeAPI if mode == "async" else ClaudeAPI
    with FakeHTTPServer() as server:
        server.route("POST", "/v1/messages", _claude_stream_that_stalls("Hel"))
        # timeout=0.5 bounds each read (pings come every 0.1 s); None: the deadline is 4 x 0.5 s
        llm = cls("claude-test", key="sk-test", base_url=server.base_url, timeout=0.5, stream_timeout=stream_timeout)
        seen: list[str] = []

        def consume() -> None:
            seen.extend(text for _status, text, _extra in llm.stream_chat(HI))

        async def aconsume() -> None:
            async for _status, text, _extra in llm.stream_chat(HI):
                seen.append(text)

        start = time.perf_counter()
        with pytest.raises(LLMTimeoutError, match=r"within its 2 s deadline"):
            resolve(aconsume()) if mode == "async" else consume()
        assert time.perf_counter() - start < 30  # the pings would go on for 60 s
        assert seen == ["Hel"]
