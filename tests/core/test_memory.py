from __future__ import annotations

import pytest

from _support import resolve
from plait.exceptions import UserError
from plait.memory import Memory, MemoryManager
from plait.schema import AgentMessage


def _contents(memory: Memory) -> list[str]:
    return [m.content for m in memory.get_memory()]


def test_add_accepts_messages_strings_dicts_and_lists() -> None:
    memory = Memory()
    memory.add("a")
    memory.add(AgentMessage(sender="bot", content="b"))
    memory.add([{"content": "c", "sender": "x"}, "d"])
    memory.add(None)
    assert _contents(memory) == ["a", "b", "c", "d"]
    assert memory.get_memory()[0].sender == "user"
    with pytest.raises(UserError):
        memory.add(42)  # type: ignore[arg-type]


def test_recent_n_and_filter_use_absolute_indices() -> None:
    memory = Memory(recent_n=2)
    memory.add(["a", "b", "c", "d"])
    assert [m.content for m in memory.get_memory()] == ["c", "d"]
    assert [m.content for m in memory.get_memory(recent_n=3)] == ["b", "c", "d"]
    assert [m.content for m in memory.get_memory(recent_n=0)] == []
    seen: list[int] = []
    memory.get_memory(recent_n=3, filter_func=lambda i, m: seen.append(i) or i != 2)
    assert seen == [1, 2, 3]


def test_delete_list_removes_the_named_indices() -> None:
    memory = Memory()
    memory.add(["a", "b", "c", "d"])
    memory.delete([0, 1])
    assert _contents(memory) == ["c", "d"]
    memory.add(["e"])
    memory.delete([-1, 0])
    assert _contents(memory) == ["d"]
    memory.delete(0)
    assert _contents(memory) == []
    memory.add(["x"])
    with pytest.raises(IndexError):
        memory.delete([5])
    assert _contents(memory) == ["x"]


def test_save_load_round_trip() -> None:
    memory = Memory()
    memory.add(["a", AgentMessage(sender="bot", content={"k": 1})])
    saved = memory.save()
    other = Memory()
    other.add("old")
    other.load(saved)
    assert other.save() == saved
    other.load(saved[:1], overwrite=False)
    assert len(other) == 3


def test_manager_keeps_sessions_apart() -> None:
    manager = MemoryManager(dict(type=Memory, recent_n=1))
    manager.add("a", session_id=1)
    manager.add(["b", "c"], session_id="s2")
    assert [m.content for m in manager.get_memory(1)] == ["a"]
    assert [m.content for m in manager.get_memory("s2")] == ["c"]
    assert manager.get(3) is None and manager.get_memory(3) == []
    manager.reset("s2")
    assert "s2" not in manager and manager.sessions() == [1]
    manager.truncate(1, 0)
    assert manager.length(1) == 0


def test_max_messages_caps_what_is_stored_after_each_call_never_orphaning_a_tool_result(mode: str) -> None:
    from plait.agents import AsyncFunctionCallingAgent, FunctionCallingAgent
    from plait.llms.response import ModelResponse, ToolCall
    from plait.testing import scripted_llm

    def double(x: int) -> int:
        """Double a number.

        Args:
            x: the number
        """
        return 2 * x

    script: list[object] = []
    for i in range(3):
        script += [ModelResponse("", [ToolCall(f"c{i}", "double", f'{{"x": {i}}}')], "tool_calls"), f"answer {i}"]
    cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
    agent = cls(scripted_llm(script, mode), [double], memory=dict(type=Memory, max_messages=5))
    for i in range(3):
        resolve(agent(f"question {i}", session_id="s"))
        stored = agent.memory.get("s").get_memory()
        assert len(stored) <= 5
        assert stored[0].sender != "ActionExecutor"  # a kept result always has its call before it
    assert [m.content for m in stored][-1] == "answer 2"
    assert stored[0].content == "question 2"  # 4 messages a call: the cut moved to the start of a turn
    with pytest.raises(UserError, match="max_messages"):
        Memory(max_messages=0)
