"""Issue 35 item 1: one owner for a session's state (`plait.sessions`).

A session of an agent tree lives in one `Session` of the tree's one `SessionRegistry`: every
agent's messages, summary and tool-loop run under its dotted path, and the calls running on
it. `MemoryManager` is a view of it; assembling a tree moves what its agents held.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from _support import resolve
from plait.agents import Agent, AgentList, AsyncAgent
from plait.agents.run_state import RunState
from plait.memory import Memory, MemoryManager
from plait.memory.session_store import SessionStore
from plait.schema import AgentMessage
from plait.testing import AsyncFunctionLLM, FunctionLLM

SRC = Path(__file__).resolve().parents[2] / "src" / "plait"


def echo(mode: str, name: str = "echo") -> Any:
    if mode == "async":

        async def areply(messages: Any, params: Any) -> str:
            return f"{name}:{messages[-1]['content']}"

        return AsyncAgent(AsyncFunctionLLM(areply), name=name)
    return Agent(FunctionLLM(lambda messages, params: f"{name}:{messages[-1]['content']}"), name=name)


def test_a_tree_keeps_every_agents_part_of_a_session_in_one_session(mode: str) -> None:
    root = echo(mode, "root")
    root.helper = echo(mode, "helper")
    resolve(root("hi", session_id="s"))
    resolve(root.helper("there", session_id="s"))
    assert root.helper._session_registry is root._session_registry
    session = root._session_registry.sessions["s"]
    assert sorted(session.parts) == ["", "helper"]
    assert [m.content for m in session.parts["helper"].memory.memory] == ["there", "helper:there"]
    assert root.helper.memory.get_memory("s") == session.parts["helper"].memory.memory
    assert not session.calls  # no call runs now


def test_joining_a_tree_moves_what_an_agent_held(mode: str) -> None:
    helper = echo(mode, "helper")
    resolve(helper("before", session_id="s"))
    team = AgentList([helper])
    root = echo(mode, "root")
    root.team = team
    assert helper._session_path == "team.0" and helper._session_registry is root._session_registry
    assert [m.content for m in helper.memory.get_memory("s")] == ["before", "helper:before"]
    assert root.state_dict("s")["team.0.memory"][0]["content"] == "before"


def test_a_busy_session_is_marked_in_the_session(mode: str) -> None:
    seen: list[dict[str, object]] = []
    root = echo(mode, "root")

    class Spy:
        def before_agent(self, agent: Any, messages: Any, session_id: Any) -> None:
            seen.append(dict(agent._session_registry.sessions[session_id].calls))

        def after_agent(self, agent: Any, message: Any, session_id: Any) -> None:
            return None

    root.register_hook(Spy())
    resolve(root("hi", session_id="s"))
    assert list(seen[0]) == [""]  # the root's call held the session while it ran
    assert not root._session_registry.sessions["s"].calls


def test_evict_drops_the_whole_session_and_a_store_reads_it_back(tmp_path: Path, mode: str) -> None:
    root = echo(mode, "root")
    root.helper = echo(mode, "helper")
    SessionStore(tmp_path / "s.db").attach(root)
    resolve(root("hi", session_id="s"))
    resolve(root.helper("there", session_id="s"))
    assert root.evict("s") is True
    assert "s" not in root._session_registry.sessions
    assert [m.content for m in root.helper.memory.get_memory("s")] == ["there", "helper:there"]


def test_run_state_lives_in_the_session_and_is_pruned_with_it(mode: str) -> None:
    root = echo(mode, "root")
    root.set_run_state(RunState("native"), "r")
    assert root._session_registry.sessions["r"].parts[""].run is not None
    assert root._calls == {}
    root.set_run_state(None, "r")
    assert "r" not in root._session_registry.sessions  # nothing left: no empty session kept


def test_a_new_memory_manager_replaces_the_memories(mode: str) -> None:
    root = echo(mode, "root")
    resolve(root("hi", session_id="s"))
    fresh = MemoryManager(dict(type=Memory))
    fresh.add(AgentMessage(sender="user", content="kept"), session_id="t")
    root.memory = fresh
    assert root.memory.get_memory("s") == []
    assert [m.content for m in root.memory.get_memory("t")] == ["kept"]


def test_a_memory_manager_alone_keeps_its_own_sessions() -> None:
    manager = MemoryManager(dict(type=Memory))
    manager.add(AgentMessage(content="hi"), session_id=7)
    assert [m.content for m in manager.get_memory(7)] == ["hi"] and 7 in manager
    assert manager.sessions() == [7]
    manager.reset(7)
    assert manager.get_memory(7) == [] and 7 not in manager.memory_map


def _imports(module: Path) -> set[str]:
    tree = ast.parse(module.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add("." * node.level + node.module)
    return found


@pytest.mark.parametrize(
    ("module", "forbidden"), [("memory/manager.py", "session_store"), ("memory/session_store.py", "manager")]
)
def test_the_manager_and_the_store_no_longer_import_each_other(module: str, forbidden: str) -> None:
    assert not any(name.endswith(forbidden) for name in _imports(SRC / module)), _imports(SRC / module)
