"""The session backend conformance suite: what every `SessionBackend` must do, as checks any backend can run.

A backend is described by a `BackendSpec` (``"module:callable"`` and its JSON arguments); each
check opens it as often as it needs (a fresh store object plays a restart, a child process
plays a second worker) and raises `AssertionError` when the backend falls short. With pytest:

```python
import pytest
from plait.testing.session_backends import CHECKS, BackendSpec

@pytest.mark.parametrize("check", list(CHECKS.values()), ids=list(CHECKS))
def test_my_backend(check, tmp_path):
    check(BackendSpec("my_package.store:MyStore", (str(tmp_path / "db"),)), tmp_path)
```

or all at once, without pytest: ``run_checks(spec, workdir)``. Each check gets an empty store
and a scratch folder of its own. The checks:

* `check_round_trip`: messages (tool calls and results, any text), summary and paused run read
  back exactly by a fresh store object; ``0`` and ``"0"`` are different sessions.
* `check_continue_in_a_fresh_store`: an agent tree's sessions continue with a new agent on a new
  store object, every memory under its `state_dict` key; many async sessions at once.
* `check_failed_call_leaves_nothing`: a call that fails stores nothing and leaves no open turn.
* `check_conflict_in_process`: two store objects on one session: `SessionConflictError` in the
  stale one, nothing acknowledged lost, and it goes on after reading the session again.
* `check_two_writers_create_one_session`: two writers starting one new session at the same moment:
  one wins, the other gets `SessionConflictError`, no first turn overwritten.
* `check_interrupted_turn`: a turn opened and never finished is left out when read back, and the
  model is never sent it.
* `check_delete_prune_sessions`: `sessions`, `delete` (a live writer of it gets a conflict), `prune`.
* `check_retention`: ``ttl`` and ``max_sessions``, by `expire` and by the store itself.
* `check_closed_and_bad_ids`: a closed store refuses writes; ids other than str and int are refused.
* `check_shared_sessions_move`: two ``shared=True`` store objects (two server workers) taking
  turns on one session: each turn sees every earlier one, no conflict; an approval paused on one
  is resumed on the other exactly once, and the first then knows it is over.
* `check_kill_9_mid_turn`, `check_approval_resumed_in_another_process`,
  `check_two_processes_one_session`: real processes (see `plait.testing._backend_processes`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..agents import Agent, AsyncAgent, FunctionCallingAgent
from ..exceptions import ResumeError, SessionConflictError, SessionStoreError, UserError
from ..memory.backend import SessionBackend
from ..memory.base_memory import ContextSummary
from ..schema import ActionReturn, AgentMessage, AgentStatusCode, FunctionCall
from ..types import JSONValue
from ._backend_processes import (
    check_approval_resumed_in_another_process,
    check_kill_9_mid_turn,
    check_two_processes_one_session,
    expect,
)
from ._backend_spec import BackendSpec, opened
from .llms import AsyncFunctionLLM, FunctionLLM

__all__ = [
    "CHECKS",
    "BackendSpec",
    "Check",
    "check_approval_resumed_in_another_process",
    "check_closed_and_bad_ids",
    "check_conflict_in_process",
    "check_continue_in_a_fresh_store",
    "check_delete_prune_sessions",
    "check_failed_call_leaves_nothing",
    "check_interrupted_turn",
    "check_kill_9_mid_turn",
    "check_retention",
    "check_round_trip",
    "check_shared_sessions_move",
    "check_two_processes_one_session",
    "check_two_writers_create_one_session",
    "run_checks",
]

Check = Callable[[BackendSpec, Path], None]
"""A conformance check: ``check(spec, workdir)`` on an empty store, with a scratch folder of its own."""

_GAP = 2.0  # seconds between the old and the new sessions of the age checks (far more than a call takes)


def _echo(messages: Any, params: Any) -> str:
    return f"{len(messages)}:{messages[-1]['content']}"


def _agent() -> Agent:
    return Agent(FunctionLLM(_echo))


class _Team(Agent):
    """A tree: the root's memory and a writer's."""

    def __init__(self) -> None:
        super().__init__(FunctionLLM(_echo), name="team")
        self.writer = Agent(FunctionLLM(_echo), name="writer")


def _contents(messages: list[dict[str, Any]] | None) -> list[Any]:
    return [m["content"] for m in messages or []]


def check_round_trip(spec: BackendSpec, workdir: Path) -> None:
    """Messages, the running summary and a paused run are read back exactly by a fresh store object."""
    call = FunctionCall("Calculator", {"expression": "1+1"})
    result = ActionReturn(args={"expression": "1+1"}, type="Calculator", result=[{"type": "text", "content": "2"}])
    text = "naïve ✓ 漢字 \x00 'quotes' \"double\" ? %s \\ end"  # what SQL and JSON quote: kept as it is
    summary = ContextSummary("Ada asked for a sum.", 2, "digest-1")
    run: dict[str, JSONValue] = {"waiting": ["c1"], "turn_start": 0, "nested": {"a": [1, 2.5, None, True]}}
    with opened(spec) as store:
        memory = store.attach(_agent()).memory
        memory.add([AgentMessage(sender="user", content=text), AgentMessage(sender="a", content=call)], "rt")
        memory.add(AgentMessage(sender="ActionExecutor", content=result), "rt")
        memory.set_summary(summary, "rt")
        held = memory.get("rt")
        if held is None or held.journal is None:
            raise AssertionError("a bound memory has no journal")
        held.journal.pause(run, wait=True)  # what the tool loop does when a run pauses
        memory.add("zero as an int", 0)
        memory.add("zero as a str", "0")
        store.flush()
    with opened(spec) as store:
        saved: list[dict[str, Any]] = list(store.read("memory", "rt") or [])
        expect(_contents(saved)[0] == text, f"text came back as {_contents(saved)[:1]}")
        expect(saved[1]["content"] == {"name": "Calculator", "parameters": {"expression": "1+1"}}, "a tool call")
        expect(saved[2]["content"]["result"] == [{"type": "text", "content": "2"}], "a tool result")
        expect(store.read_summary("memory", "rt") == summary, "the summary did not round-trip")
        expect(store.read_run("memory", "rt") == run, "the paused run did not round-trip")
        loaded = store.load("memory", "rt")
        expect(loaded.found and loaded.messages == saved, "load and read disagree")
        expect(loaded.summary == summary and loaded.run == run, "load lost the summary or the run")
        expect(_contents(store.read("memory", 0)) == ["zero as an int"], "0 and '0' were mixed up")
        expect(_contents(store.read("memory", "0")) == ["zero as a str"], "'0' and 0 were mixed up")
        expect(store.read("memory", "none") is None and not store.load("memory", "none").found, "an unknown session")
        expect(store.read_run("memory", "none") is None and store.read_summary("memory", "none") is None, "unknown")


def check_continue_in_a_fresh_store(spec: BackendSpec, workdir: Path) -> None:
    """An agent tree's sessions go on with a new agent on a new store object; async sessions keep their own."""
    with opened(spec) as store:
        team = store.attach(_Team())
        team("My name is Ada.", session_id="u1")
        team.writer("draft", session_id="u1")
        team("hello", session_id=7)
        expected = team.state_dict("u1")
    with opened(spec) as store:
        fresh = store.attach(_Team())
        expect(fresh.state_dict("u1") == expected, "the tree's session did not come back as it was")
        expect(set(expected) == {"memory", "writer.memory"}, f"keys {sorted(expected)}")
        expect(store.sessions() == ["u1", 7] and store.sessions("writer.memory") == ["u1"], "sessions per memory")
        reply = fresh("What is my name?", session_id="u1")
        expect(reply.content == "3:What is my name?", f"the model did not see the history: {reply.content}")

    async def areply(messages: Any, params: Any) -> str:
        return _echo(messages, params)

    with opened(spec) as store:
        agent = store.attach(AsyncAgent(AsyncFunctionLLM(areply)))

        async def session(i: int) -> None:
            for turn in range(2):
                await agent(f"s{i}-t{turn}", session_id=f"a{i}")

        async def main() -> None:
            await asyncio.gather(*(session(i) for i in range(32)))

        asyncio.run(main())
    with opened(spec) as store:
        for i in range(32):
            want = [f"s{i}-t0", f"1:s{i}-t0", f"s{i}-t1", f"3:s{i}-t1"]
            expect(_contents(store.read("memory", f"a{i}")) == want, f"async session a{i} is not its own")


def check_failed_call_leaves_nothing(spec: BackendSpec, workdir: Path) -> None:
    """A call whose model fails stores nothing of it, and leaves no turn open."""

    def flaky(messages: Any, params: Any) -> str:
        if messages[-1]["content"] == "boom":
            raise RuntimeError("model down")
        return "ok"

    with opened(spec) as store:
        agent = store.attach(Agent(FunctionLLM(flaky)))
        agent("hello", session_id="f")
        try:
            agent("boom", session_id="f")
        except RuntimeError:
            pass
        else:
            raise AssertionError("the failing model did not fail the call")
        store.flush()
    with opened(spec) as store:
        loaded = store.load("memory", "f")
        expect(_contents(loaded.messages) == ["hello", "ok"], f"a failed call left {_contents(loaded.messages)}")
        expect(loaded.journal.interrupted is None, "a failed call left its turn open")


def check_conflict_in_process(spec: BackendSpec, workdir: Path) -> None:
    """Two store objects writing one session: the stale one gets `SessionConflictError`, then goes on."""
    with opened(spec) as one, opened(spec) as two:
        first, second = one.attach(_agent()), two.attach(_agent())
        first("a", session_id="s")
        expect(second.memory.get_memory("s")[-1].content == "1:a", "the second did not read the first's turn")
        first("b", session_id="s")  # the second writer's copy is now old
        try:
            second("c", session_id="s")
        except SessionConflictError as exc:
            expect(exc.session_id == "s" and "another writer wrote to it" in str(exc), f"the error says {exc}")
            expect(isinstance(exc, SessionStoreError), "a conflict is a SessionStoreError")
        else:
            raise AssertionError("a stale writer's turn was accepted")
        expect([m.content for m in second.memory.get_memory("s")] == ["a", "1:a", "b", "3:b"], "not read again")
        expect(second("d", session_id="s").content == "5:d", "the second writer did not go on after reading again")
        try:
            first("e", session_id="s")
        except SessionConflictError:
            pass
        else:
            raise AssertionError("the first writer, now stale, was not refused")
    with opened(spec) as store:
        want = ["a", "1:a", "b", "3:b", "d", "5:d"]
        expect(_contents(store.read("memory", "s")) == want, "an acknowledged turn was lost or a refused one kept")


def check_two_writers_create_one_session(spec: BackendSpec, workdir: Path, sessions: int = 40) -> None:
    """Two writers (store objects, threads) starting the same new sessions at the same moment: one wins each.

    Neither finds the session missing and overwrites the other's first turn: every acknowledged
    turn is stored, the other writer gets `SessionConflictError`.
    """
    gate = threading.Barrier(2)
    outcomes: dict[str, list[str]] = {}

    def write(store: SessionBackend, name: str) -> None:
        agent = store.attach(_agent())
        for i in range(sessions):
            gate.wait(timeout=60)
            try:
                agent(f"{name} {i}", session_id=f"new-{i}")
            except SessionConflictError:
                outcomes.setdefault(name, []).append("conflict")
            else:
                outcomes.setdefault(name, []).append(f"{name} {i}")

    with opened(spec) as one, opened(spec) as two:
        threads = [threading.Thread(target=write, args=(store, name)) for store, name in ((one, "A"), (two, "B"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        acked = [text for texts in outcomes.values() for text in texts if text != "conflict"]
        expect(len(acked) + sum(t == "conflict" for v in outcomes.values() for t in v) == 2 * sessions, "a lost call")
        stored = [text for i in range(sessions) for text in _contents(one.read("memory", f"new-{i}"))[::2]]
    expect(sorted(stored) == sorted(acked), f"acknowledged {len(acked)} first turns, {len(stored)} stored")


def check_interrupted_turn(spec: BackendSpec, workdir: Path) -> None:
    """A turn opened and never finished (its process died) is left out when read back, and never sent again."""
    with opened(spec) as store:
        agent = store.attach(_agent())
        agent("first", session_id="u")
        turn = agent.memory.open_turn("u", agent.memory.length("u"))
        expect(turn is not None, "a bound memory opened no turn")
        agent.update_memory("second, never answered", "u")
        store.flush()  # the writes are stored, the call never finishes
    with opened(spec) as store:
        expect(_contents(store.read("memory", "u")) == ["first", "1:first"], "the half turn was read back")
        loaded = store.load("memory", "u")
        expect(loaded.found and loaded.journal.interrupted is not None, "the interrupted turn is not reported")
        restarted = store.attach(_agent())
        expect([m.content for m in restarted.memory.get_memory("u")] == ["first", "1:first"], "memory holds it")
        reply = restarted("again", session_id="u")
        expect(reply.content == "3:again", f"the model was sent the half turn: {reply.content}")
    with opened(spec) as store:
        want = ["first", "1:first", "again", "3:again"]
        expect(_contents(store.read("memory", "u")) == want, "the half turn was not removed by the next write")
        expect(store.load("memory", "u").journal.interrupted is None, "the session still has an open turn")


def check_delete_prune_sessions(spec: BackendSpec, workdir: Path) -> None:
    """`sessions` lists by last change; `delete` removes every memory's part (a live writer is refused); `prune`."""
    with opened(spec) as store:
        team = store.attach(_Team())
        team("old", session_id="old")
        team.writer("old draft", session_id="old")
        store.flush()
        time.sleep(_GAP)
        middle = time.time()
        time.sleep(_GAP)
        team("new", session_id="new")
        team("other", session_id="other")
        expect(store.sessions() == ["old", "new", "other"], f"sessions: {store.sessions()}")
        store.delete("other")
        expect(store.read("memory", "other") is None and store.sessions() == ["old", "new"], "delete")
        try:
            team("again", session_id="other")
        except SessionConflictError as exc:
            expect("another writer deleted it" in str(exc), f"the error says {exc}")
        else:
            raise AssertionError("a writer of a deleted session was not refused")
        expect(team("again", session_id="other").content == "1:again", "the deleted session did not start afresh")
        expect(store.prune(older_than=time.time() - middle) == ["old"], "prune removed the wrong sessions")
        expect(store.sessions() == ["new", "other"] and store.sessions("writer.memory") == [], "prune left parts")


def check_retention(spec: BackendSpec, workdir: Path) -> None:
    """``ttl`` removes sessions unchanged for that long; ``max_sessions`` keeps the most recently changed."""
    with opened(spec) as store:
        store.attach(_agent())("old", session_id="old")
    time.sleep(_GAP)
    with opened(spec, ttl=_GAP / 2) as store:
        store.attach(_agent())("new", session_id="new")
        removed = store.expire()
        expect(removed in ([], ["old"]), f"expire removed {removed}")  # [] when the store's own sweep came first
        expect(store.sessions() == ["new"], f"ttl kept {store.sessions()}")
    with opened(spec, max_sessions=2, sweep_every=3600) as store:
        agent = store.attach(_agent())
        for name in ("s1", "s2", "s3"):
            agent(name, session_id=name)
        expect(store.sessions() == ["new", "s1", "s2", "s3"], f"sessions: {store.sessions()}")
        expect(store.expire() == ["new", "s1"], "max_sessions=2 did not remove the least recently changed")
        expect(store.sessions() == ["s2", "s3"], f"max_sessions kept {store.sessions()}")
    with opened(spec, max_sessions=1, sweep_every=0) as store:
        store.attach(_agent())("s4", session_id="s4")  # the store applies its policy after writes
        expect(store.sessions() == ["s4"], f"the store's own sweep kept {store.sessions()}")


def check_closed_and_bad_ids(spec: BackendSpec, workdir: Path) -> None:
    """A closed store refuses writes (and closes twice); session ids are str or int."""
    store = spec.open()
    agent = store.attach(_agent())
    try:
        agent("hi", session_id=object())
    except UserError as exc:
        expect("str or int" in str(exc), f"the error says {exc}")
    else:
        raise AssertionError("an object was taken as a session id")
    store.close()
    store.close()
    try:
        agent("hi", session_id="late")
    except UserError as exc:
        expect("closed" in str(exc), f"the error says {exc}")
    else:
        raise AssertionError("a closed store took a write")


def check_shared_sessions_move(spec: BackendSpec, workdir: Path) -> None:
    """Two ``shared=True`` store objects (two workers) taking turns on one session: nothing stale, nothing refused."""
    from ._backend_child import Transfer, _pay_model

    with opened(spec, shared=True) as one, opened(spec, shared=True) as two:
        expect(one.shared and two.shared, "the store does not say it is shared")
        workers = [one.attach(_agent()), two.attach(_agent())]
        for turn in range(6):  # worker 0, 1, 0, 1...: each holds the session, and each copy goes old in turn
            reply = workers[turn % 2](f"t{turn}", session_id="moving")
            expect(reply.content == f"{2 * turn + 1}:t{turn}", f"turn {turn} saw another history: {reply.content}")
        want = [text for turn in range(6) for text in (f"t{turn}", f"{2 * turn + 1}:t{turn}")]
        stored = _contents(one.read("memory", "moving"))
        expect(stored == want, f"stored {stored}")
        held = [m.content for m in workers[0].memory.get_memory("moving")]
        expect(held[-2:] == want[-4:-2], "the first worker's copy changed without a call")  # read back at its call

        counter = workdir / "transfers"
        pay = [
            store.attach(FunctionCallingAgent(FunctionLLM(_pay_model), [Transfer(str(counter), False)]))
            for store in (one, two)
        ]
        paused = pay[0]("pay bob", session_id="pay")
        expect(paused.stream_state == AgentStatusCode.INTERRUPTED, f"the run did not pause: {paused.content}")
        (call,) = paused.content
        done = pay[1].resume({call.id: True}, session_id="pay")
        expect(done.content == "done: sent 5 to bob", f"resumed on the second worker: {done.content}")
        try:
            pay[0].resume({call.id: True}, session_id="pay")
        except ResumeError:
            pass
        else:
            raise AssertionError("the first worker resumed a run the second had finished")
        expect(counter.read_text("utf-8").count("ran") == 1, "the approved tool did not run exactly once")
        again = pay[0]("pay bob", session_id="pay")
        expect(again.stream_state == AgentStatusCode.INTERRUPTED, "the first worker did not start a new run")
        expect(len(pay[0].memory.get_memory("pay")) == 6, "the first worker's next call did not see the resumed run")


CHECKS: dict[str, Check] = {
    "round_trip": check_round_trip,
    "continue_in_a_fresh_store": check_continue_in_a_fresh_store,
    "failed_call_leaves_nothing": check_failed_call_leaves_nothing,
    "conflict_in_process": check_conflict_in_process,
    "two_writers_create_one_session": check_two_writers_create_one_session,
    "interrupted_turn": check_interrupted_turn,
    "delete_prune_sessions": check_delete_prune_sessions,
    "retention": check_retention,
    "closed_and_bad_ids": check_closed_and_bad_ids,
    "shared_sessions_move": check_shared_sessions_move,
    "kill_9_mid_turn": check_kill_9_mid_turn,
    "approval_resumed_in_another_process": check_approval_resumed_in_another_process,
    "two_processes_one_session": check_two_processes_one_session,
}
"""Every check by name, in the order `run_checks` runs them."""


def run_checks(make: Callable[[Path], BackendSpec], workdir: Path) -> None:
    """Run every check, each on the empty store ``make(folder)`` gives for a fresh scratch folder of its own.

    Raises:
        AssertionError: The first check the backend fails (named).
    """
    for name, check in CHECKS.items():
        folder = workdir / name
        folder.mkdir(parents=True, exist_ok=True)
        try:
            check(make(folder), folder)
        except AssertionError as exc:
            raise AssertionError(f"session backend check {name!r} failed: {exc}") from exc
