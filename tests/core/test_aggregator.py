from __future__ import annotations

import pytest

from plait.agents.aggregator import DefaultAggregator
from plait.exceptions import UserError
from plait.memory import Memory
from plait.schema import ActionReturn, ActionStatusCode, AgentMessage


def _memory(*messages: AgentMessage | str) -> Memory:
    memory = Memory()
    memory.add(list(messages))
    return memory


def test_own_messages_are_assistant_and_user_turns_join_with_newlines() -> None:
    memory = _memory(
        "hi",
        AgentMessage(sender="critic", content="there"),
        AgentMessage(sender="bot", content={"k": "✓"}),
        AgentMessage(sender="tool", content=ActionReturn(result=[{"type": "text", "content": "42"}])),
        AgentMessage(sender="tool", content=ActionReturn(errmsg="bad args", state=ActionStatusCode.ARGS_ERROR)),
    )
    out = DefaultAggregator().aggregate(memory, "bot", None, "sys")
    assert out == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi\nthere"},
        {"role": "assistant", "content": '{"k": "✓"}'},
        {"role": "user", "content": "42\nbad args"},
    ]
    assert memory.get_memory()[0].content == "hi"  # inputs untouched


def test_system_instruction_forms_and_the_seed_alias() -> None:
    agg = DefaultAggregator()
    assert agg.aggregate_system_intruction("x") == [{"role": "system", "content": "x"}]
    assert agg.aggregate_system_instruction({"role": "system", "content": "y", "name": "n"}) == [
        {"role": "system", "content": "y", "name": "n"}
    ]
    assert agg.aggregate_system_instruction(["a", {"role": "user", "content": "b"}]) == [
        {"role": "system", "content": "a"},
        {"role": "user", "content": "b"},
    ]
    with pytest.raises(UserError):
        agg.aggregate_system_instruction({"content": "no role"})
    with pytest.raises(UserError):
        agg.aggregate_system_instruction(3)


def test_parser_instructions_reach_the_prompt() -> None:
    class Parser:
        def format_instruction(self) -> str:
            return "answer in JSON"

    out = DefaultAggregator().aggregate(_memory("q"), "bot", Parser(), "sys")
    assert out[:2] == [{"role": "system", "content": "sys"}, {"role": "system", "content": "answer in JSON"}]
