"""SessionStore: agent memories kept in a SQLite file, across agents, stores and processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from _support import resolve
from plait.agents import Agent, AsyncAgent
from plait.exceptions import LLMConnectionError, UserError
from plait.memory import Memory, SessionStore
from plait.schema import AgentMessage
from plait.testing import AsyncFunctionLLM, FunctionLLM

SRC = str(Path(__file__).resolve().parents[2] / "src")


def echo_llm(mode: str) -> Any:
    """Replies with the number of messages it saw and the last one."""

    def reply(messages: Any, params: Any) -> str:
        return f"{len(messages)}:{messages[-1]['content']}"

    if mode == "async":

        async def areply(messages: Any, params: Any) -> str:
            return reply(messages, params)

        return AsyncFunctionLLM(areply)
    return FunctionLLM(reply)


class Team(Agent):
    """A tree: a root memory plus a writer's and a critic's."""

    def __init__(self, llm: Any, agent_cls: type[Agent]) -> None:
        super().__init__(llm, name="team")
        self.writer = agent_cls(llm, name="writer")
        self.critic = agent_cls(llm, name="critic")


def make_agent(mode: str) -> Agent:
    return (AsyncAgent if mode == "async" else Agent)(echo_llm(mode))


def contents(agent: Agent, session_id: Any, keypath: str = "memory") -> list[Any]:
    return [m["content"] for m in agent.state_dict(session_id)[keypath]]


def test_sessions_survive_a_new_agent_and_store(mode: str, tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    with SessionStore(db) as store:
        first = store.attach(make_agent(mode))
        resolve(first("My name is Ada.", session_id="u1"))
        resolve(first("hello", session_id=7))
    second = SessionStore(db).attach(make_agent(mode))
    assert contents(second, "u1") == ["My name is Ada.", "1:My name is Ada."]
    reply = resolve(second("What is my name?", session_id="u1"))
    assert reply.content == "3:What is my name?"  # the model saw the stored history
    assert contents(second, 7) == ["hello", "1:hello"]
    assert second.memory.sessions() == ["u1", 7]


def test_every_memory_of_a_tree_is_kept_under_its_state_dict_key(tmp_path: Path) -> None:
    db = tmp_path / "tree.db"
    llm = echo_llm("sync")
    with SessionStore(db) as store:
        team = store.attach(Team(llm, Agent))
        team.writer("draft", session_id="s")
        team.critic("review", session_id="s")
        team("summary", session_id="s")
        expected = team.state_dict("s")
    with SessionStore(db) as store:
        fresh = store.attach(Team(llm, Agent))
        assert fresh.state_dict("s") == expected
        assert set(expected) == {"memory", "writer.memory", "critic.memory"}
        assert store.sessions("writer.memory") == ["s"]


def test_a_failed_call_leaves_nothing_behind(mode: str, tmp_path: Path) -> None:
    db = tmp_path / "rollback.db"

    def broken(messages: Any, params: Any) -> str:
        raise LLMConnectionError("down")

    async def abroken(messages: Any, params: Any) -> str:
        raise LLMConnectionError("down")

    llm = AsyncFunctionLLM(abroken) if mode == "async" else FunctionLLM(broken)
    with SessionStore(db) as store:
        agent = store.attach((AsyncAgent if mode == "async" else Agent)(llm))
        agent.memory.add("kept", session_id=0)
        with pytest.raises(LLMConnectionError):
            resolve(agent("lost", session_id=0))
    with SessionStore(db) as store:
        assert contents(store.attach(make_agent(mode)), 0) == ["kept"]


def test_deletes_loads_and_resets_are_written(tmp_path: Path) -> None:
    db = tmp_path / "edits.db"
    with SessionStore(db) as store:
        agent = store.attach(make_agent("sync"))
        for text in ["a", "b", "c"]:
            agent.memory.add(text, session_id="x")
        agent.memory.get("x").delete([0, 2])
        agent.memory.add("d", session_id="y")
        agent.load_state_dict({"memory": [{"content": "loaded"}]}, session_id="z")
        agent.memory.add("gone", session_id="w")
        agent.reset("w")
    with SessionStore(db) as store:
        again = store.attach(make_agent("sync"))
        assert contents(again, "x") == ["b"]
        assert contents(again, "y") == ["d"]
        assert contents(again, "z") == ["loaded"]
        assert contents(again, "w") == []
        assert sorted(map(str, store.sessions())) == ["x", "y", "z"]


def test_sessions_held_before_attaching_are_written(tmp_path: Path) -> None:
    db = tmp_path / "late.db"
    agent = make_agent("sync")
    agent("before", session_id=1)
    with SessionStore(db) as store:
        store.attach(agent)
        agent("after", session_id=1)
    with SessionStore(db) as store:
        assert contents(store.attach(make_agent("sync")), 1) == ["before", "1:before", "after", "3:after"]


def test_delete_and_prune(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from plait.memory import _session_journal, _sql_store

    clock = {"now": 1000.0}
    fake_time = type("Clock", (), {"time": staticmethod(lambda: clock["now"])})
    monkeypatch.setattr(_sql_store, "time", fake_time)  # prune's cutoff
    monkeypatch.setattr(_session_journal, "time", fake_time)  # the writes' timestamps
    with SessionStore(tmp_path / "prune.db") as store:
        agent = store.attach(make_agent("sync"))
        agent("old", session_id="old")
        store.flush()
        clock["now"] = 2000.0
        agent("new", session_id="new")
        agent("other", session_id="other")
        store.delete("other")
        clock["now"] = 2500.0
        assert store.prune(older_than=600) == ["old"]
        assert store.sessions() == ["new"]


def test_messages_with_tool_results_round_trip(tmp_path: Path) -> None:
    from plait.schema import ActionReturn, FunctionCall

    with SessionStore(tmp_path / "rich.db") as store:
        memory = store.attach(make_agent("sync")).memory
        call = FunctionCall("Calculator", {"expression": "1+1"})
        result = ActionReturn(args={"expression": "1+1"}, type="Calculator", result=[{"type": "text", "content": "2"}])
        memory.add([AgentMessage(sender="a", content=call), AgentMessage(sender="ActionExecutor", content=result)], 0)
    with SessionStore(tmp_path / "rich.db") as store:
        saved = store.read("memory", 0)
    assert saved is not None
    assert saved[0]["content"] == {"name": "Calculator", "parameters": {"expression": "1+1"}}
    assert saved[1]["content"]["result"] == [{"type": "text", "content": "2"}]


def test_unserialisable_content_is_reported_by_flush_not_by_the_agent(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "bad.db") as store:
        memory = store.attach(make_agent("sync")).memory
        memory.add(AgentMessage(sender="a", content=object()), session_id=0)  # the agent's own path goes on
        with pytest.raises(UserError, match="not JSON serialisable"):
            store.flush()
        store.flush()  # reported once


def test_a_closed_store_refuses_writes(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "closed.db")
    agent = store.attach(make_agent("sync"))
    store.close()
    store.close()
    with pytest.raises(UserError, match="is closed"):
        agent("hi", session_id="late")


def test_bad_session_ids_are_refused(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "ids.db") as store:
        agent = store.attach(make_agent("sync"))
        with pytest.raises(UserError, match="str or int ids"):
            agent("hi", session_id=object())


def test_many_concurrent_sessions_each_keep_their_own(tmp_path: Path) -> None:
    db = tmp_path / "many.db"
    store = SessionStore(db)
    agent = store.attach(make_agent("async"))

    async def session(i: int) -> None:
        for turn in range(2):
            await agent(f"s{i}-t{turn}", session_id=i)

    async def main() -> None:
        await asyncio.gather(*(session(i) for i in range(128)))

    asyncio.run(main())
    store.close()
    with SessionStore(db) as again:
        fresh = again.attach(make_agent("async"))
        for i in range(128):
            assert contents(fresh, i) == [f"s{i}-t0", f"1:s{i}-t0", f"s{i}-t1", f"3:s{i}-t1"]


def test_a_session_written_by_one_process_is_read_by_another(tmp_path: Path) -> None:
    db = tmp_path / "processes.db"
    program = textwrap.dedent(
        f"""
        import sys
        from plait.agents import Agent
        from plait.memory import SessionStore
        from plait.testing import FunctionLLM

        agent = SessionStore({str(db)!r}).attach(Agent(FunctionLLM(lambda m, p: str(len(m)))))
        print(agent(sys.argv[1], session_id="shared").content)
        """
    )
    outputs = []
    for text in ["one", "two", "three"]:
        run = subprocess.run(
            [sys.executable, "-c", program, text],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
            check=True,
        )
        outputs.append(run.stdout.strip())
    assert outputs == ["1", "3", "5"]  # each process saw the history the previous ones left


def test_memory_without_a_store_is_unchanged() -> None:
    memory = Memory()
    memory.add(["a", "b"])
    memory.truncate(1)
    memory.reset()
    assert memory.journal is None and len(memory) == 0
