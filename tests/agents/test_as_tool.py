"""Issue 39 item 1: `agent.as_tool(...)` — a sub-agent as a tool, in the caller's driver and session tree."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from _support import collect, resolve
from plait.actions import BaseAction
from plait.agents import Agent, AsyncAgent, AsyncFunctionCallingAgent, FunctionCallingAgent
from plait.agents.react import AsyncReAct, ReAct
from plait.events import SubAgentEnded, SubAgentStarted, ToolResult
from plait.exceptions import UserError
from plait.llms.response import ModelResponse, ToolCall
from plait.testing import scripted_llm


class Verdict(BaseModel):
    score: int
    reason: str


class Draft(BaseModel):
    title: str
    words: int


def calls(*items: tuple[str, str, str]) -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall(i, n, a) for i, n, a in items], finish_reason="tool_calls")


def sub_agent(mode: str, script: list[Any], **kwargs: Any) -> Any:
    cls = Agent if mode == "sync" else AsyncAgent
    return cls(scripted_llm(script, mode), "You are a critic.", name="critic", **kwargs)


def lead(mode: str, script: list[Any], tools: list[Any]) -> Any:
    cls = FunctionCallingAgent if mode == "sync" else AsyncFunctionCallingAgent
    return cls(scripted_llm(script, mode), tools, "Use your critic.", name="blogger")


def test_lead_calls_sub_agent_and_uses_its_answer(mode: str) -> None:
    critic = sub_agent(mode, ["Too long; cut it."])
    tool = critic.as_tool(description="Reviews a draft.")
    assert tool.name == "critic" and [p["name"] for p in tool.description["parameters"]] == ["message"]
    agent = lead(mode, [calls(("c1", "critic", '{"message": "Review: hello world"}')), "Cutting it."], [tool])
    reply = resolve(agent("Write a post"))
    assert reply.content == "Cutting it."
    first, second = agent.llm.calls
    assert [t["function"]["name"] for t in first.params["tools"]] == ["critic"]
    assert second.messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "Too long; cut it."}
    (asked,) = critic.llm.calls
    assert asked.messages[-1]["content"] == "Review: hello world"


def test_typed_sub_agent_returns_validated_json(mode: str) -> None:
    critic = sub_agent(mode, ['Here: {"score": "7", "reason": "clear"}'], output_type=Verdict)
    tool = critic.as_tool(name="review", input_type=Draft)
    schema = tool.to_openai_tools()[0]["function"]["parameters"]
    assert set(schema["properties"]) == {"title", "words"} and sorted(schema["required"]) == ["title", "words"]
    arguments = json.dumps({"title": "Hi", "words": "12"})
    agent = lead(mode, [calls(("c1", "review", arguments)), "Scored."], [tool])
    assert resolve(agent("Post")).content == "Scored."
    (asked,) = critic.llm.calls
    assert asked.messages[-1]["content"].startswith('{"title": "Hi", "words": 12}')  # validated: "12" became 12
    result = agent.llm.calls[1].messages[-1]["content"]
    assert json.loads(result) == {"score": 7, "reason": "clear"}  # validated: "7" became 7


def test_bad_typed_arguments_are_an_observation(mode: str) -> None:
    critic = sub_agent(mode, [])
    tool = critic.as_tool(input_type=Draft)
    agent = lead(mode, [calls(("c1", "critic", '{"title": "Hi"}')), "Sorry."], [tool])
    assert resolve(agent("Post")).content == "Sorry."
    assert "words" in agent.llm.calls[1].messages[-1]["content"] and critic.llm.calls == []


def test_memory_per_call_and_per_conversation(mode: str) -> None:
    once = sub_agent(mode, ["a1", "a2"])
    kept = sub_agent(mode, ["b1", "b2"])
    kept.name = "keeper"
    script = [
        calls(("c1", "critic", '{"message": "one"}'), ("c2", "keeper", '{"message": "one"}')),
        "done 1",
        calls(("c3", "critic", '{"message": "two"}'), ("c4", "keeper", '{"message": "two"}')),
        "done 2",
    ]
    agent = lead(mode, script, [once.as_tool(), kept.as_tool(history="per_conversation")])
    resolve(agent("first", session_id="s"))
    resolve(agent("second", session_id="s"))

    def contents(sub: Any, session: str) -> list[str]:
        return [m["content"] for m in sub.state_dict(session)["memory"]]

    assert contents(once, "s/c1") == ["one", "a1"]  # per call: named by the model's call id
    assert contents(once, "s/c3") == ["two", "a2"]
    assert contents(kept, "s/keeper") == ["one", "b1", "two", "b2"]
    assert once.state_dict("s")["memory"] == [] and kept.state_dict("s")["memory"] == []
    assert [m["content"] for m in kept.llm.calls[1].messages if m["role"] != "system"] == ["one", "b1", "two"]


def test_stream_events_show_the_sub_agent(mode: str) -> None:
    critic = sub_agent(mode, ["Fine."])
    agent = lead(mode, [calls(("c1", "critic", '{"message": "ok?"}')), "Posted."], [critic.as_tool()])
    events = collect(agent.stream_events("Post"))
    started = [e for e in events if isinstance(e, SubAgentStarted)]
    ended = [e for e in events if isinstance(e, SubAgentEnded)]
    assert [(e.agent, e.parent) for e in started] == [("critic", "blogger")]
    assert [(e.agent, e.parent) for e in ended] == [("critic", "blogger")]
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.output == "Fine." and events.index(started[0]) < events.index(result)


def test_unknown_history_fails_at_construction() -> None:
    with pytest.raises(UserError, match="history"):
        Agent(scripted_llm([], "sync"), name="x").as_tool(history="shared_forever")


class Refund(BaseAction):
    """Refund a payment."""

    def __init__(self) -> None:
        super().__init__(requires_approval=True)
        self.runs = 0

    def run(self, amount: int) -> str:
        """Refund money.

        Args:
            amount: how much
        """
        self.runs += 1
        return f"refunded {amount}"


def test_react_holds_a_sub_agent_too(mode: str) -> None:
    critic = sub_agent(mode, ["Looks good."])
    cls = ReAct if mode == "sync" else AsyncReAct
    script = ["Action: critic\nAction Input: Draft: hi", "Final Answer: Approved."]
    agent = cls(scripted_llm(script, mode), [critic.as_tool()])
    assert resolve(agent("Review it", session_id=3)).content == "Approved."
    assert agent.llm.calls[1].messages[-1] == {"role": "user", "content": "Observation: Looks good."}
    assert [m["content"] for m in critic.state_dict("3/call-0")["memory"]] == ["Draft: hi", "Looks good."]
