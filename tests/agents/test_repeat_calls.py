"""Issue 34, item 5: an identical repeated tool call in one run is not run again (``repeat_calls``).

A model that asks for the same call (same tool, same arguments) over and over — SmolLM2 asking
``stock(item='apples')`` four times until ``max_turn`` — gets the earlier result with a note
beside new calls; a reply that only repeats calls is taken back and the final answer is asked
for on the conversation as it was. Each behaviour runs in
sync and async from one body (the `mode` fixture) on a scripted model.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from _support import resolve
from plait.actions import BaseAction, tool_api
from plait.agents import AsyncFunctionCallingAgent, AsyncReAct, FunctionCallingAgent, ReAct
from plait.agents.tool_loop import REPEATED, REUSED
from plait.exceptions import UserError
from plait.llms.response import ModelResponse, ToolCall
from plait.testing import scripted_llm


class Inventory(BaseAction):
    """What the shop has."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    @tool_api
    def stock(self, item: str) -> str:
        """How many of an item are in stock.

        Args:
            item (str): the item
        """
        self.asked.append(item)
        return f"{item}: 12"


def _call(*items: str) -> ModelResponse:
    calls = [ToolCall(f"c{i}", "Inventory.stock", json.dumps({"item": item})) for i, item in enumerate(items)]
    return ModelResponse(tool_calls=calls)


def _agent(mode: str, script: list[Any], **kwargs: Any) -> Any:
    cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
    return cls(scripted_llm(script, mode), [Inventory()], max_turn=5, **kwargs)


def _tool_messages(agent: Any) -> list[Any]:
    return [m for m in agent.memory.get_memory(0) if m.sender == "ActionExecutor"]


def test_the_apples_case_runs_the_tool_once_and_asks_for_the_answer(mode: str) -> None:
    agent = _agent(mode, [_call("apples"), _call("apples"), "12 apples", "never asked", "never asked"])
    reply = resolve(agent("How many apples?"))
    inventory = agent.executor.actions["Inventory"]
    assert inventory.asked == ["apples"] and reply.content == "12 apples"
    assert len(agent.llm.calls) == 3  # the call, its repeat, then the final answer (not five calls)
    assert agent.llm.calls[2].params.get("tool_choice") == "none"  # the answer was asked for
    # on the conversation as it was: the reply that only repeated a call is taken back, not shown with a note
    assert agent.llm.calls[2].messages == agent.llm.calls[1].messages
    [only] = _tool_messages(agent)
    assert "apples: 12" in str(only.content) and REUSED not in str(only.content)


def test_a_call_made_twice_in_one_reply_runs_once(mode: str) -> None:
    agent = _agent(mode, [_call("apples", "pears", "apples"), "done"])
    resolve(agent("Stock?"))
    assert agent.executor.actions["Inventory"].asked == ["apples", "pears"]
    results = _tool_messages(agent)
    assert [REUSED in str(m.content) for m in results] == [False, False, True]
    assert [m.extra_info["tool_call_id"] for m in results] == ["c0", "c1", "c2"]  # each call has its answer


def test_error_mode_answers_a_repeat_with_an_error_and_run_mode_runs_it(mode: str) -> None:
    agent = _agent(mode, [_call("apples"), _call("apples"), "done"], repeat_calls="error")
    resolve(agent("How many apples?"))
    assert agent.executor.actions["Inventory"].asked == ["apples"]
    assert REPEATED in str(_tool_messages(agent)[1].content)
    agent = _agent(mode, [_call("apples"), _call("apples"), "done"], repeat_calls="run")
    resolve(agent("How many apples?"))
    assert agent.executor.actions["Inventory"].asked == ["apples", "apples"]


def test_other_arguments_are_another_call_and_equal_objects_are_the_same_call(mode: str) -> None:
    same = ModelResponse(tool_calls=[ToolCall("c9", "Inventory.stock", '{ "item" :"apples"}')])
    agent = _agent(mode, [_call("apples"), _call("pears"), same, "done"])
    resolve(agent("Stock?"))
    assert agent.executor.actions["Inventory"].asked == ["apples", "pears"]


def test_a_text_protocol_agent_reuses_too(mode: str) -> None:
    call = 'Thought: look\nAction: Inventory.stock\nAction Input: {"item": "apples"}'
    cls = AsyncReAct if mode == "async" else ReAct
    agent = cls(scripted_llm([call, call, "Thought: ok\nFinal Answer: 12"], mode), [Inventory()], max_turn=5)
    assert resolve(agent("How many apples?")).content == "12"
    assert agent.executor.actions["Inventory"].asked == ["apples"]


def test_an_unknown_setting_is_refused_at_construction() -> None:
    with pytest.raises(UserError, match="repeat_calls must be one of"):
        FunctionCallingAgent(None, [Inventory()], repeat_calls="skip")  # type: ignore[arg-type]


def test_what_ran_is_kept_in_a_saved_run_state() -> None:
    from plait.agents.run_state import RunState, call_key

    state = RunState("function_calling")
    state.ran[call_key({"name": "t", "arguments": '{"b": 1, "a": 2}'})] = "earlier"
    again = RunState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert call_key({"name": "t", "arguments": {"a": 2, "b": 1}}) in again.ran
    assert list(again.ran.values()) == ["earlier"]
    assert "ran" not in RunState("function_calling").to_dict()  # nothing ran: the JSON is as before


def test_a_nonsense_call_gets_one_corrective_observation_not_four(mode: str) -> None:
    """The web demo's poem case: Calculator('CALCULATOR') four times; now the error is told once."""
    from plait.actions import get_tool

    nonsense = ModelResponse(tool_calls=[ToolCall("c0", "Calculator", json.dumps({"expression": "CALCULATOR"}))])
    cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
    script = [nonsense, nonsense, "A poem about the sea.", "never asked", "never asked"]
    agent = cls(scripted_llm(script, mode), [get_tool("Calculator")], max_turn=5)
    reply = resolve(agent("Write a short poem about the sea."))
    assert reply.content == "A poem about the sea." and len(agent.llm.calls) == 3
    assert len(_tool_messages(agent)) == 1  # the error was told once; the repeat was taken back
    assert agent.llm.calls[2].messages == agent.llm.calls[1].messages
