"""A stored session survives kill -9: every completed turn is on disk when its call returns, and an
interrupted turn is removed when the session is read back (never sent to a model as a broken prompt)."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from _support import resolve
from plait.agents import Agent, AsyncAgent
from plait.memory import SessionStore
from plait.testing import AsyncFunctionLLM, FunctionLLM
from plait.testing.fake_openai import FakeOpenAIServer, Reply

SRC = str(Path(__file__).resolve().parents[2] / "src")

CHILD = textwrap.dedent(
    """
    import sys, time
    from plait.actions import BaseAction, tool_api
    from plait.agents import FunctionCallingAgent
    from plait.llms import GPTAPI
    from plait.memory import SessionStore

    class Nap(BaseAction):
        @tool_api
        def run(self, seconds: float) -> str:
            '''Rest a while.

            Args:
                seconds (float): how long
            '''
            time.sleep(seconds)
            return "rested"

    url, db = sys.argv[1:3]
    agent = FunctionCallingAgent(GPTAPI(model_type="m", api_base=url, key="k", retry=0), [Nap()])
    SessionStore(db).attach(agent)
    for n in range(100000):
        agent(f"turn {n}", session_id="s")
        print(n, flush=True)  # the call returned: this turn must survive a kill
    """
)


def _model(body: dict[str, Any]) -> Reply:
    """A tool call for a question (a nap whose length the question's parity decides), then an answer."""
    last = body["messages"][-1]
    if last["role"] == "user":
        nap = 0.0 if int(last["content"].split()[-1]) % 2 else 0.05
        return Reply("", tool_calls=[("Nap.run", {"seconds": nap})])
    return Reply("the answer")


def _restored(db: Path) -> list[dict[str, Any]]:
    """The session as a new process reads it back (through a fresh store, as after a restart)."""
    with SessionStore(db) as store:
        saved = store.read("memory", "s")
    return saved or []


def test_kill_9_loses_no_completed_turn_and_leaves_no_broken_tail(tmp_path: Path) -> None:
    rng = random.Random(20261125)
    kills, checked_turns, removed_tails = 20, 0, 0
    with FakeOpenAIServer(handler=_model) as server:
        for batch in range(kills // 4):  # four children at a time
            children = []
            for i in range(4):
                db = tmp_path / f"kill{batch}_{i}.db"
                child = subprocess.Popen(
                    [sys.executable, "-c", CHILD, server.base_url, str(db)],
                    stdout=subprocess.PIPE,
                    text=True,
                    env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
                )
                children.append((child, db, rng.uniform(0.05, 0.8)))
            for child, _, _ in children:
                assert child.stdout is not None
                child.stdout.readline()  # its first turn is done: kill it some time into the next ones
            started = time.monotonic()
            for child, _, after in sorted(children, key=lambda c: c[2]):
                time.sleep(max(0.0, started + after - time.monotonic()))
                child.kill()  # SIGKILL: no exit handler, no flush
            for child, db, _ in children:
                done = 1 + len(child.communicate()[0].split())
                child.wait()
                with sqlite3.connect(db) as raw:
                    interrupted = raw.execute("SELECT open_from FROM sessions").fetchone()
                removed_tails += interrupted is not None and interrupted[0] is not None
                messages = _restored(db)
                users = [m["content"] for m in messages if m["sender"] == "user"]
                assert done > 0 and len(users) >= done, (done, users[-3:])  # 0 completed turns lost
                assert users == [f"turn {n}" for n in range(len(users))]
                roles = [m["sender"] for m in messages]
                assert roles == ["user", "FunctionCallingAgent", "ActionExecutor", "FunctionCallingAgent"] * len(users)
                assert all(m["content"] == "the answer" for m in messages[3::4])  # every turn ends with its answer
                checked_turns += len(users)
    print(f"kill -9 x{kills}: {checked_turns} completed turns kept, {removed_tails} interrupted turns removed")
    assert checked_turns > kills and removed_tails > 0  # the kills did land mid-turn


def _open_a_turn_and_die(db: Path, mode: str) -> None:
    """What a process killed mid-call leaves: a committed turn, then an open one with its user message."""
    store = SessionStore(db)
    agent = store.attach(make_agent(mode))
    resolve(agent("first", session_id="u"))
    turn = agent.memory.open_turn("u", agent.memory.length("u"))
    assert turn is not None
    agent.update_memory("second, never answered", "u")
    store.flush()  # the writes reached the file, the call did not finish


def make_agent(mode: str) -> Agent:
    if mode == "async":

        async def areply(messages: Any, params: Any) -> str:
            return f"{len(messages)}:{messages[-1]['content']}"

        return AsyncAgent(AsyncFunctionLLM(areply))
    return Agent(FunctionLLM(lambda messages, params: f"{len(messages)}:{messages[-1]['content']}"))


def test_an_interrupted_turn_is_removed_when_the_session_is_read_back(
    mode: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "s.db"
    _open_a_turn_and_die(db, mode)
    restarted = SessionStore(db).attach(make_agent(mode))
    assert [m.content for m in restarted.memory.get_memory("u")] == ["first", "1:first"]
    assert "removed 1 message(s) of a call interrupted" in caplog.text
    reply = resolve(restarted("again", session_id="u"))
    assert reply.content == "3:again"  # the model saw the two complete messages, not the dangling one
    assert [m["content"] for m in _restored_any(db, "u")] == ["first", "1:first", "again", "3:again"]


def test_a_call_returns_only_once_its_turn_is_committed(mode: str, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    agent = SessionStore(db).attach(make_agent(mode))
    for n in range(30):  # an instant model: nothing may be left in the queue when the call returns
        resolve(agent(f"m{n}", session_id=1))
        with sqlite3.connect(db) as other:  # another connection sees it at once
            count = other.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        assert count == 2 * (n + 1)


def test_a_failed_call_closes_its_turn(tmp_path: Path) -> None:
    db = tmp_path / "s.db"

    def flaky(messages: Any, params: Any) -> str:
        if messages[-1]["content"] == "boom":
            raise RuntimeError("model down")
        return "ok"

    store = SessionStore(db)
    agent = store.attach(Agent(FunctionLLM(flaky)))
    agent("hello", session_id="f")
    with pytest.raises(RuntimeError):
        agent("boom", session_id="f")
    store.flush()
    with sqlite3.connect(db) as raw:
        assert raw.execute("SELECT open_from FROM sessions").fetchall() == [(None,)]
    assert [m["content"] for m in _restored_any(db, "f")] == ["hello", "ok"]


def test_a_file_from_before_turns_were_tracked_is_upgraded(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as raw:
        raw.executescript(
            """
            CREATE TABLE messages (keypath TEXT NOT NULL, session TEXT NOT NULL, position INTEGER NOT NULL,
                message TEXT NOT NULL, PRIMARY KEY (keypath, session, position)) WITHOUT ROWID;
            CREATE TABLE sessions (keypath TEXT NOT NULL, session TEXT NOT NULL, updated REAL NOT NULL,
                PRIMARY KEY (keypath, session)) WITHOUT ROWID;
            INSERT INTO messages VALUES ('memory', '"u"', 0, '{"content": "kept", "sender": "user"}');
            INSERT INTO sessions VALUES ('memory', '"u"', 1.0);
            """
        )
    agent = SessionStore(db).attach(make_agent("sync"))
    assert [m.content for m in agent.memory.get_memory("u")] == ["kept"]
    agent("next", session_id="u")
    assert [m["content"] for m in _restored_any(db, "u")][:2] == ["kept", "next"]


def _restored_any(db: Path, session: str) -> list[dict[str, Any]]:
    with SessionStore(db) as store:
        return store.read("memory", session) or []
