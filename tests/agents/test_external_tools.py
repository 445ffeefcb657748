"""External tools (issue 38, item 1): tools a caller runs. A function-calling agent offers them to its model
(beside its own, or instead of them), a call to one pauses the run like an approval (`PendingCall.external`),
and `resume({id: ToolOutput(text)})` gives its result; the agent's own calls of the turn run as usual. Sync
and async from one body (the `mode` fixture)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from _support import resolve
from plait.actions import BaseAction, tool_api
from plait.agents import AsyncFunctionCallingAgent, FunctionCallingAgent
from plait.exceptions import ResumeError, UserError
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.schema import AgentStatusCode, PendingCall, ToolOutput
from plait.testing.fake_openai import FakeOpenAIServer, Reply

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


class Lookup(BaseAction):
    """Look up an account's balance."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls = 0

    @tool_api
    def run(self, account: str) -> str:
        """Look up an account's balance.

        Args:
            account (str): the account
        """
        self.calls += 1
        return f"{account} has 120"


def model(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return Reply("done: " + " | ".join(m["content"] for m in messages if m["role"] == "tool"))
    return Reply(tool_calls=[("Lookup", {"account": "alice"}), ("get_weather", {"city": "Oslo"})])


def _agent(mode: str, server: FakeOpenAIServer, lookup: Lookup) -> Any:
    llm = (AsyncGPTAPI if mode == "async" else GPTAPI)(model_type="m", api_base=server.base_url, key="k", retry=0)
    return (AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent)(llm, [lookup])


def test_a_call_to_an_external_tool_waits_and_its_output_is_the_result(mode: str) -> None:
    with FakeOpenAIServer(handler=model) as server:
        lookup = Lookup()
        agent = _agent(mode, server, lookup)
        paused = resolve(agent("alice and the weather", session_id="s", external_tools=[WEATHER]))
        assert paused.stream_state == AgentStatusCode.INTERRUPTED
        (waiting,) = paused.content
        assert waiting == PendingCall(waiting.id, "get_weather", {"city": "Oslo"}, external=True)
        assert lookup.calls == 1  # the agent's own call of the turn ran
        sent = server.requests[0]
        assert [t["function"]["name"] for t in sent["tools"]] == ["Lookup", "get_weather"]
        assert "external_tools" not in sent  # the keyword never reaches the model as a field
        with pytest.raises(ResumeError, match=r"external tool 'get_weather'.*ToolOutput"):
            resolve(agent.resume({waiting.id: True}, session_id="s"))  # the agent cannot run it
        saved = json.loads(json.dumps(agent.state_dict("s")))  # the paused run, tools and all, as JSON
        fresh = _agent(mode, server, Lookup())
        fresh.load_state_dict(saved, session_id="s")
        reply = resolve(fresh.resume({waiting.id: ToolOutput("sunny, 21 C")}, session_id="s"))
        assert reply.content == "done: alice has 120 | sunny, 21 C"
        assert [t["function"]["name"] for t in server.requests[-1]["tools"]] == ["Lookup", "get_weather"]


def test_tool_output_answers_an_approval_gated_call_without_running_it(mode: str) -> None:
    with FakeOpenAIServer(handler=model) as server:
        lookup = Lookup(requires_approval=True)
        agent = _agent(mode, server, lookup)
        paused = resolve(agent("alice", session_id="s", external_tools=[WEATHER]))
        ids = {call.name: call.id for call in paused.content}
        assert {call.name: call.external for call in paused.content} == {"Lookup": False, "get_weather": True}
        decisions = {ids["Lookup"]: ToolOutput("alice has 7"), ids["get_weather"]: ToolOutput("rain")}
        reply = resolve(agent.resume(decisions, session_id="s"))
        assert reply.content == "done: alice has 7 | rain" and lookup.calls == 0
        gated, external = resolve(agent("again", session_id="t", external_tools=[WEATHER])).content
        reply = resolve(agent.resume({gated.id: True, external.id: "not now"}, session_id="t"))  # a refusal fits too
        assert reply.content.startswith("done: alice has 120 | A person refused") and "not now" in reply.content


def test_external_tools_only_and_mistakes(mode: str) -> None:
    with FakeOpenAIServer(handler=model) as server:
        agent = _agent(mode, server, Lookup())
        resolve(agent("x", session_id="only", external_tools=[WEATHER], external_tools_only=True))
        assert [t["function"]["name"] for t in server.requests[-1]["tools"]] == ["get_weather"]
        own = {"type": "function", "function": {"name": "Lookup"}}
        with pytest.raises(UserError, match=r"external_tools\[0\].function.name.*agent's own tools"):
            resolve(agent("x", session_id="a", external_tools=[own]))
        with pytest.raises(UserError, match=r"'external_tools\[0\]' must be a function tool"):
            resolve(agent("x", session_id="b", external_tools=[{"name": "f"}]))
        (call,) = resolve(agent("x", session_id="c", external_tools=[WEATHER])).content
        with pytest.raises(ResumeError, match="ToolOutput"):
            resolve(agent.resume({call.id: 42}, session_id="c"))
