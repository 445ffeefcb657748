"""The one tool loop: one budget rule, the run state in `state_dict`, and going on from a saved state.

Every tool-using paradigm runs on `plait.agents.tool_loop`; each test here runs all of them
(sync and async from one body) with a scripted model and the same `Doubler` tool.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from _support import Doubler, resolve
from plait.agents import (
    AgentForInternLM,
    AsyncAgentForInternLM,
    AsyncAutoGPT,
    AsyncConversationalAgent,
    AsyncFunctionCallingAgent,
    AsyncReAct,
    AsyncReWOO,
    AutoGPT,
    ConversationalAgent,
    FunctionCallingAgent,
    ReAct,
    ReWOO,
)
from plait.agents.autogpt import AutoGPTProtocol
from plait.agents.conversational import ConversationalProtocol
from plait.agents.function_calling import FunctionCallingProtocol
from plait.agents.internlm_loop import InternLMProtocol
from plait.agents.react import ReActProtocol
from plait.agents.rewoo import ReWOOProtocol
from plait.agents.run_state import RunState
from plait.agents.tool_loop import LoopProtocol, run_tool_loop
from plait.driver import run_async, run_sync
from plait.effects import Effect, Flow, ToolCall
from plait.exceptions import StateDictError, UserError
from plait.interceptors import Interceptor, intercept
from plait.llms.response import ModelResponse, ToolCall as ModelToolCall
from plait.schema import AgentMessage
from plait.testing import scripted_llm

PLUGIN, END = "<|action_start|><|plugin|>\n", "<|action_end|>\n"


@dataclass(frozen=True)
class Paradigm:
    """How to build one paradigm's agent, script a tool call and an answer, and make its protocol."""

    name: str
    classes: tuple[type[Any], type[Any]]
    call: Any  # a reply that calls Doubler(x=21)
    answer: Any  # a reply that ends the run with "42"
    protocol: Callable[[Any], LoopProtocol[Any]]
    options: tuple[tuple[str, Any], ...] = ()

    def build(self, mode: str, script: list[Any], **kwargs: Any) -> Any:
        cls = self.classes[0 if mode == "sync" else 1]
        llm = scripted_llm(script, mode)
        if self.name == "internlm":
            return cls(llm, plugins=[Doubler()], **dict(self.options), **kwargs)
        return cls(llm, [Doubler()], **dict(self.options), **kwargs)


def _fc_call() -> ModelResponse:
    return ModelResponse(tool_calls=[ModelToolCall("c1", "Doubler", '{"x": 21}')], finish_reason="tool_calls")


def _blob(action: str, action_input: Any) -> str:
    return json.dumps({"action": action, "action_input": action_input})


def _autogpt(name: str, **args: Any) -> str:
    return json.dumps({"thoughts": {"text": "go"}, "command": {"name": name, "args": args}})


PARADIGMS = [
    Paradigm(
        "react",
        (ReAct, AsyncReAct),
        'Thought: double it\nAction: Doubler\nAction Input: {"x": 21}',
        "Thought: done\nFinal Answer: 42",
        ReActProtocol,
    ),
    Paradigm(
        "function_calling", (FunctionCallingAgent, AsyncFunctionCallingAgent), _fc_call(), "42", FunctionCallingProtocol
    ),
    Paradigm(
        "autogpt",
        (AutoGPT, AsyncAutoGPT),
        _autogpt("Doubler", x=21),
        _autogpt("finish", response="42"),
        AutoGPTProtocol,
    ),
    Paradigm(
        "conversational",
        (ConversationalAgent, AsyncConversationalAgent),
        _blob("Doubler", {"x": 21}),
        _blob("Final Answer", "42"),
        ConversationalProtocol,
    ),
    Paradigm(
        "rewoo",
        (ReWOO, AsyncReWOO),
        'Plan: double 21.\n#E1 = Doubler[{"x": 21}]',
        "42",
        ReWOOProtocol,
    ),
    Paradigm(
        "internlm",
        (AgentForInternLM, AsyncAgentForInternLM),
        "Let me double it." + PLUGIN + json.dumps({"name": "Doubler", "parameters": {"x": 21}}) + END,
        "42",
        lambda agent: InternLMProtocol(agent, [AgentMessage(sender="user", content="Double 21.")]),
    ),
]


def llm_of(agent: Any) -> Any:
    """The scripted model (AgentForInternLM's is its inner agent's)."""
    return agent.agent.llm if isinstance(agent, AgentForInternLM) else agent.llm


@pytest.fixture(params=PARADIGMS, ids=[p.name for p in PARADIGMS])
def paradigm(request: pytest.FixtureRequest) -> Paradigm:
    return request.param  # type: ignore[no-any-return]


class _Snapshot(Interceptor):
    """Takes the agent's `state_dict` when a tool call starts (the run is between two effects)."""

    effects = (ToolCall,)

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.states: list[dict[str, Any]] = []

    def around(self, effect: Effect[Any]) -> Flow[Any]:
        self.states.append(json.loads(json.dumps(self.agent.state_dict(0))))
        return (yield effect)


def test_the_run_state_is_in_state_dict_while_the_run_lasts(mode: str, paradigm: Paradigm) -> None:
    agent = paradigm.build(mode, [paradigm.call, paradigm.answer])
    snapshot = _Snapshot(agent)
    with intercept(agent, snapshot):
        reply = resolve(agent("Double 21."))
    assert "42" in str(reply.content)
    (state,) = snapshot.states
    run = state["run_state"]
    assert run["version"] == 1 and run["protocol"] == paradigm.name and run["turns"] == 1
    assert [call["name"] for call in run["pending"]] == ["Doubler"]
    assert "run_state" not in agent.state_dict(0)  # a finished run leaves nothing behind


def test_a_saved_run_goes_on_in_a_new_agent(mode: str, paradigm: Paradigm) -> None:
    """All a run needs between effects is in its state: a copy loaded elsewhere finishes the same way."""
    first = paradigm.build(mode, [paradigm.call, paradigm.answer])
    snapshot = _Snapshot(first)
    with intercept(first, snapshot):
        expected = resolve(first("Double 21."))
    saved = snapshot.states[0]

    second = paradigm.build(mode, [paradigm.answer])
    second.load_state_dict(saved, 0)
    state = second.run_state(0)
    assert isinstance(state, RunState) and state.pending
    flow = run_tool_loop(paradigm.protocol(second), second.max_turn, 0, {}, state)
    reply = run_sync(flow) if mode == "sync" else resolve(run_async(flow))
    assert reply.content == expected.content
    assert reply.extra_info == expected.extra_info
    assert len(llm_of(second).calls) == 1  # only the answer: the tool call was the pending step
    assert second.run_state(0) is None


def _forever(paradigm: Paradigm) -> list[Any]:
    if paradigm.name == "rewoo":
        return ["no plan here"] * 10
    return [paradigm.call] * 10


@pytest.mark.parametrize("budget", [2, 3])
def test_max_turn_is_the_number_of_model_calls(mode: str, paradigm: Paradigm, budget: int) -> None:
    """A model that never finishes gets exactly `max_turn` calls, whatever the paradigm.

    ReWOO keeps its last call for the solver, which needs a plan: a planner that never
    plans gets the other ``max_turn - 1`` calls and the reply says it failed.
    """
    key = "max_iterations" if paradigm.name == "conversational" else "max_turn"
    agent = paradigm.build(mode, _forever(paradigm), **{key: budget})
    reply = resolve(agent("Double 21."))
    assert len(llm_of(agent).calls) == (budget - 1 if paradigm.name == "rewoo" else budget)
    assert isinstance(reply, AgentMessage)


@pytest.mark.parametrize("budget", [0, -1, True, "3"])
def test_a_budget_below_one_call_is_refused(paradigm: Paradigm, budget: Any) -> None:
    key = "max_iterations" if paradigm.name == "conversational" else "max_turn"
    with pytest.raises(UserError, match=key):
        paradigm.build("sync", [], **{key: budget})


def test_parallel_calls_run_together_and_answer_in_order(mode: str) -> None:
    calls = [ModelToolCall(f"c{i}", "Doubler", json.dumps({"x": i})) for i in range(4)]
    script = [ModelResponse(tool_calls=calls, finish_reason="tool_calls"), "done"]
    agent = PARADIGMS[1].build(mode, script)
    resolve(agent("Double 0..3."))
    tool_messages = [m for m in agent.llm.calls[1].messages if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        ("c0", "0"),
        ("c1", "2"),
        ("c2", "4"),
        ("c3", "6"),
    ]


def test_a_failed_run_drops_its_state(mode: str) -> None:
    agent = PARADIGMS[0].build(mode, [PARADIGMS[0].call])  # the script ends before the answer
    with pytest.raises(Exception, match="script"):
        resolve(agent("Double 21."))
    assert agent.run_state(0) is None and agent.state_dict(0)["memory"] == []


def test_run_state_json_is_versioned() -> None:
    state = RunState("react", turns=2, steps=[{"a": 1}], pending=[{"name": "Doubler", "arguments": {"x": 1}}])
    state.messages["inputs"] = [AgentMessage(sender="user", content="hi")]
    data = json.loads(json.dumps(state.to_dict()))
    again = RunState.from_dict(data)
    assert again.to_dict() == state.to_dict()
    with pytest.raises(StateDictError, match="version"):
        RunState.from_dict({**data, "version": 99})
    with pytest.raises(StateDictError, match="malformed"):
        RunState.from_dict({"version": 1})


def test_a_state_of_another_paradigm_is_refused() -> None:
    agent = PARADIGMS[0].build("sync", [])
    with pytest.raises(UserError, match="cannot go on"):
        run_sync(run_tool_loop(ReActProtocol(agent), 3, 0, {}, RunState("rewoo")))


def test_reset_forgets_an_unfinished_run() -> None:
    agent = PARADIGMS[0].build("sync", [])
    agent.set_run_state(RunState("react"), 0)
    agent.reset(0)
    assert agent.run_state(0) is None


def test_a_turn_s_call_ids_are_made_unique_before_anything_waits_or_runs() -> None:
    from plait.agents.tool_loop import _one_id_per_call
    from plait.llms.response import unique_call_ids

    assert unique_call_ids(["X", "X", "", "X_1", "call_2"]) == ["X", "X_2", "call_2_1", "X_1", "call_2"]
    assert unique_call_ids(["a", "b"]) == ["a", "b"]
    calls = [{"name": "t", "arguments": "{}", "id": "call-1"}, {"name": "t", "arguments": "{}"}]
    assert [c.get("id") for c in _one_id_per_call(calls)] == ["call-1", "call-1_1"]  # an id-less call is named by place
    plain = [{"name": "t", "arguments": "{}"}, {"name": "t", "arguments": "{}"}]
    assert _one_id_per_call(plain) == plain  # nothing to re-issue: text protocols keep id-less calls
    response = ModelResponse(tool_calls=[ModelToolCall("X", "t", "{}"), ModelToolCall("X", "t", "{}")])
    assert [c.id for c in response.tool_calls] == ["X", "X_1"]
