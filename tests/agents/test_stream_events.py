"""Issue 36 item 1: typed stream events, the same sequence in sync and async, for every paradigm."""

from __future__ import annotations

import json
from typing import Any

import pytest

from _support import collect
from plait.actions import BaseAction, tool_api
from plait.agents import (
    Agent,
    AsyncAgent,
    AsyncFunctionCallingAgent,
    AsyncStreamingFunctionCallingAgent,
    FunctionCallingAgent,
    StreamingFunctionCallingAgent,
)
from plait.agents.containers import AsyncSequential, Sequential
from plait.agents.react import AsyncReAct, ReAct
from plait.agents.stream import AgentForInternLM, AsyncAgentForInternLM
from plait.events import (
    ApprovalNeeded,
    Final,
    ReasoningDelta,
    StreamEvent,
    SubAgentEnded,
    SubAgentStarted,
    TextDelta,
    ToolCallStarted,
    ToolResult,
)
from plait.llms.response import ModelResponse, ToolCall
from plait.schema import AgentStatusCode, Reasoning
from plait.testing import scripted_llm


class Weather(BaseAction):
    """Current weather of a city."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls = 0

    @tool_api
    def run(self, city: str) -> str:
        """Report the weather.

        Args:
            city: the city
        """
        self.calls += 1
        return f"{city}: sunny"


def events(mode: str, agent: Any, *message: Any, **kwargs: Any) -> list[StreamEvent]:
    return collect(agent.stream_events(*message, **kwargs))


def started(agent: str, call: str, city: str) -> dict[str, Any]:
    return {"type": "tool_call_started", "agent": agent, "id": call, "name": "Weather", "arguments": {"city": city}}


def result(agent: str, call: str, output: str, status: str = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "agent": agent, "id": call, "name": "Weather", "status": status, "output": output}


def shape(items: list[StreamEvent]) -> list[dict[str, Any]]:
    """The events as data without the final message's object, each reply's text deltas joined into one."""
    out: list[dict[str, Any]] = []
    for event in items:
        data = event.to_dict() if not isinstance(event, Final) else {"final": event.message.content}
        last = out[-1] if out else {}
        if data.get("type") == "text_delta" and last.get("type") == "text_delta" and last["agent"] == event.agent:
            assert data["text"] == last["text"] + data["delta"]  # each delta extends the reply
            last["delta"], last["text"] = data["text"], data["text"]
            continue
        out.append(data)
    return out


NATIVE = [
    started("bot", "c1", "Paris"),
    result("bot", "c1", "Paris: sunny"),
    {"type": "text_delta", "agent": "bot", "delta": "It is sunny.", "text": "It is sunny."},
    {"final": "It is sunny."},
]


@pytest.mark.parametrize("streaming", [True, False])
def test_native_tool_calls_give_the_call_before_its_result_in_both_modes(mode: str, streaming: bool) -> None:
    script = [ModelResponse(tool_calls=[ToolCall("c1", "Weather", '{"city": "Paris"}')]), ["It is ", "sunny."]]
    classes = {
        (True, "sync"): StreamingFunctionCallingAgent,
        (True, "async"): AsyncStreamingFunctionCallingAgent,
        (False, "sync"): FunctionCallingAgent,
        (False, "async"): AsyncFunctionCallingAgent,
    }
    agent = classes[streaming, mode](scripted_llm(script, mode), [Weather()], name="bot")
    # a non-streaming agent's model call is streamed for its events too (the agent gets the same reply)
    assert shape(events(mode, agent, "weather in Paris?")) == NATIVE


def test_react_events(mode: str) -> None:
    call = 'Thought: I need it.\nAction: Weather\nAction Input: {"city": "Rome"}'
    cls = ReAct if mode == "sync" else AsyncReAct
    agent = cls(scripted_llm([call, "Thought: done\nFinal Answer: sunny"], mode), [Weather()], name="r")
    assert shape(events(mode, agent, "weather?")) == [
        {"type": "text_delta", "agent": "r", "delta": call, "text": call},
        started("r", "call-0", "Rome"),
        result("r", "call-0", "Rome: sunny"),
        {"type": "text_delta", "agent": "r", "delta": "Thought: done\nFinal Answer: sunny",
         "text": "Thought: done\nFinal Answer: sunny"},
        {"final": "sunny"},
    ]  # fmt: skip


def test_internlm2_protocol_events(mode: str) -> None:
    call = "<|action_start|><|plugin|>\n" + json.dumps({"name": "Weather", "parameters": {"city": "Oslo"}})
    call += "<|action_end|>\n"
    cls = AgentForInternLM if mode == "sync" else AsyncAgentForInternLM
    agent = cls(scripted_llm([["Let me check.", call], ["It is ", "sunny."]], mode), plugins=[Weather()], name="i")
    got = events(mode, agent, "weather?")
    kinds = [type(event).__name__ for event in got]
    assert kinds == ["TextDelta", "TextDelta", "ToolCallStarted", "ToolResult", "TextDelta", "TextDelta", "Final"]
    started, result = got[2], got[3]
    assert isinstance(started, ToolCallStarted) and (started.name, started.arguments) == ("Weather", {"city": "Oslo"})
    assert isinstance(result, ToolResult) and (result.status, result.output) == ("ok", "Oslo: sunny")
    assert isinstance(got[-1], Final) and got[-1].message.content == "It is sunny."
    assert {event.agent for event in got} == {"i"}  # its inner agent is not reported as a sub-agent


def test_approval_pause_and_resume_as_events(mode: str) -> None:
    calls = [ToolCall("c1", "Weather", '{"city": "Paris"}'), ToolCall("c2", "Weather", '{"city": "Rome"}')]
    script = [ModelResponse(tool_calls=calls), "Paris sunny; Rome not asked"]
    cls = FunctionCallingAgent if mode == "sync" else AsyncFunctionCallingAgent
    tool = Weather(requires_approval=True)
    agent = cls(scripted_llm(script, mode), [tool], name="bot")
    paused = events(mode, agent, "weather?", session_id="s")
    assert isinstance(paused[-2], ApprovalNeeded) and [call.id for call in paused[-2].calls] == ["c1", "c2"]
    assert isinstance(paused[-1], Final) and paused[-1].paused and tool.calls == 0
    assert not any(isinstance(event, (ToolCallStarted, ToolResult)) for event in paused)
    resumed = collect(agent.resume_events({"c1": True, "c2": "not Rome"}, session_id="s"))
    assert shape(resumed) == [
        result("bot", "c2", "A person refused this call: it did not run. Their reason: not Rome", "refused"),
        started("bot", "c1", "Paris"),
        result("bot", "c1", "Paris: sunny"),
        {"type": "text_delta", "agent": "bot", "delta": "Paris sunny; Rome not asked",
         "text": "Paris sunny; Rome not asked"},
        {"final": "Paris sunny; Rome not asked"},
    ]  # fmt: skip
    assert tool.calls == 1 and resumed[-1].message.stream_state == AgentStatusCode.END


def test_sub_agents_are_reported_with_their_text(mode: str) -> None:
    agent_cls, seq_cls = (Agent, Sequential) if mode == "sync" else (AsyncAgent, AsyncSequential)
    writer = agent_cls(scripted_llm(["draft"], mode), name="writer")
    critic = agent_cls(scripted_llm(["better"], mode), name="critic")
    got = events(mode, seq_cls(writer, critic, name="team"), "write")
    assert got[:-1] == [
        SubAgentStarted("writer", "team"),
        TextDelta("writer", "draft", "draft"),
        SubAgentEnded("writer", "team"),
        SubAgentStarted("critic", "team"),
        TextDelta("critic", "better", "better"),
        SubAgentEnded("critic", "team"),
    ]
    assert isinstance(got[-1], Final) and got[-1].message.content == "better"


def test_reasoning_is_its_own_event_and_never_text(mode: str) -> None:
    reply = ModelResponse(content="42", reasoning=Reasoning(text="6 times 7"))
    cls = FunctionCallingAgent if mode == "sync" else AsyncFunctionCallingAgent
    got = events(mode, cls(scripted_llm([reply], mode), [], name="bot"), "answer?")
    assert ReasoningDelta("bot", "6 times 7", "6 times 7") in got and TextDelta("bot", "42", "42") in got
    assert all("6 times" not in event.text for event in got if isinstance(event, TextDelta))


def test_lagent_stream_is_unchanged_by_events() -> None:
    script = [ModelResponse(tool_calls=[ToolCall("c1", "Weather", '{"city": "Paris"}')]), ["It is ", "sunny."]]
    agent = StreamingFunctionCallingAgent(scripted_llm(script * 3), [Weather()], name="bot")
    plain = [(chunk.content, chunk.stream_state) for chunk in agent("weather?", session_id=1)]
    list(agent.stream_events("weather?", session_id=2))
    again = [(chunk.content, chunk.stream_state) for chunk in agent("weather?", session_id=3)]
    assert plain == again and all(isinstance(content, str) for content, _ in plain)
