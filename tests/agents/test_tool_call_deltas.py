"""Issue 36 item 1: "tool call started (id, name, arguments as they stream)" — `ToolCallDelta` events.

While the model streams a native tool call, `stream_events` gives `ToolCallDelta`s (the call's
place, id and name once known, the new arguments text and the text so far), all before the
call's `ToolCallStarted`; joined, a call's deltas are its arguments. The sequence is the same
in sync and async, for streaming and non-streaming agents. The Lagent-style stream of a
streaming agent is unchanged: the arguments' JSON never shows as text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _support import collect
from plait.agents import (
    AsyncFunctionCallingAgent,
    AsyncStreamingFunctionCallingAgent,
    FunctionCallingAgent,
    StreamingFunctionCallingAgent,
)
from plait.events import Final, StreamEvent, TextDelta, ToolCallDelta, ToolCallStarted, ToolResult
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.testing.fake_openai import FakeOpenAIServer, Reply

CALLS = [("weather", {"city": "Oslo, Norway"}), ("weather", {"city": "Bergen"})]
ARGUMENTS = [json.dumps(arguments) for _, arguments in CALLS]


def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return f"{city}: sunny"


def script() -> list[Reply]:
    return [Reply(content="Checking.", tool_calls=CALLS), Reply("It is sunny.")]


CLASSES = {
    (True, "sync"): StreamingFunctionCallingAgent,
    (True, "async"): AsyncStreamingFunctionCallingAgent,
    (False, "sync"): FunctionCallingAgent,
    (False, "async"): AsyncFunctionCallingAgent,
}


def run_events(mode: str, streaming: bool, **server: Any) -> list[StreamEvent]:
    with FakeOpenAIServer(script(), chunk_size=3, **server) as fake:
        llm = (GPTAPI if mode == "sync" else AsyncGPTAPI)("m", api_base=fake.base_url, key=None, retry=1)
        agent = CLASSES[streaming, mode](llm, [weather], name="bot")
        got = collect(agent.stream_events("Weather in Oslo and Bergen?"))
        if isinstance(llm, GPTAPI):
            llm.close()
        fake.assert_done()
    return got


@pytest.mark.parametrize("streaming", [True, False])
def test_tool_call_deltas_stream_the_arguments_before_the_call_starts(streaming: bool) -> None:
    sync, async_ = run_events("sync", streaming), run_events("async", streaming)
    data = [event.to_dict() for event in sync if not isinstance(event, Final)]
    assert data == [event.to_dict() for event in async_ if not isinstance(event, Final)]  # identical in both modes
    deltas = [event for event in sync if isinstance(event, ToolCallDelta)]
    assert len(deltas) > 2 * len(CALLS)  # the arguments came in pieces (chunk_size=3), not whole
    for index, arguments in enumerate(ARGUMENTS):
        mine = [event for event in deltas if event.index == index]
        assert "".join(event.delta for event in mine) == arguments  # joined, the deltas are the arguments
        so_far = ""
        for event in mine:  # each delta extends the arguments so far
            so_far += event.delta
            assert event.arguments == so_far
        assert {(event.id, event.name, event.agent) for event in mine} == {(f"call_{index}", "weather", "bot")}
    kinds = [type(event) for event in sync]
    first_started = kinds.index(ToolCallStarted)
    assert max(i for i, kind in enumerate(kinds) if kind is ToolCallDelta) < first_started  # every delta before
    assert kinds.index(ToolCallDelta) > max(i for i, kind in enumerate(kinds[:first_started]) if kind is TextDelta)
    started = [event for event in sync if isinstance(event, ToolCallStarted)]
    assert [(event.id, event.arguments) for event in started] == [
        ("call_0", {"city": "Oslo, Norway"}),
        ("call_1", {"city": "Bergen"}),
    ]
    assert [event.output for event in sync if isinstance(event, ToolResult)] == ["Oslo, Norway: sunny", "Bergen: sunny"]
    text = [event.delta for event in sync if isinstance(event, TextDelta)]
    assert "".join(text) == "Checking.It is sunny."  # the call's JSON is never text
    assert isinstance(sync[-1], Final) and sync[-1].message.content == "It is sunny."


def test_to_dict_of_a_delta() -> None:
    event = ToolCallDelta("bot", 1, "call_1", "weather", '"}', '{"city": "Oslo"}')
    assert event.to_dict() == {
        "type": "tool_call_delta",
        "agent": "bot",
        "index": 1,
        "id": "call_1",
        "name": "weather",
        "delta": '"}',
        "arguments": '{"city": "Oslo"}',
    }


def test_lagent_stream_shows_no_call_json_and_no_repeated_chunk(mode: str) -> None:
    with FakeOpenAIServer(script(), chunk_size=3) as fake:
        llm = (GPTAPI if mode == "sync" else AsyncGPTAPI)("m", api_base=fake.base_url, key=None, retry=1)
        chunks = collect(CLASSES[True, mode](llm, [weather], name="bot")("Weather?"))
        if isinstance(llm, GPTAPI):
            llm.close()
    seen = [(chunk.content, int(chunk.stream_state)) for chunk in chunks]
    assert seen == [
        ("Che", 1), ("Checki", 1), ("Checking.", 1),  # the tool turn: its text only, once each
        ("It", 1), ("It is", 1), ("It is sun", 1), ("It is sunny.", 1), ("It is sunny.", 0),
    ]  # fmt: skip


def test_replayed_run_gives_the_same_deltas(tmp_path: Path) -> None:
    from plait.replay import record, replay

    log = tmp_path / "run.jsonl"
    with FakeOpenAIServer(script(), chunk_size=3) as fake:
        llm = GPTAPI("m", api_base=fake.base_url, key=None, retry=1)
        with llm:
            agent = StreamingFunctionCallingAgent(llm, [weather], name="bot")
            with record(agent, log):
                recorded = list(agent.stream_events("Weather?"))
            agent.reset()
            with replay(agent, log):
                replayed = list(agent.stream_events("Weather?"))
        assert len(fake.requests) == 2
    deltas = [event for event in recorded if isinstance(event, ToolCallDelta)]
    assert deltas and deltas == [event for event in replayed if isinstance(event, ToolCallDelta)]
