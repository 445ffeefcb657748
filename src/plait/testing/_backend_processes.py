"""The conformance checks that need real processes: kill -9 mid-turn, an approval resumed elsewhere, two writers.

Part of `plait.testing.session_backends` (which lists every check); the children run
``plait.testing._backend_child``.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

from ..schema import AgentStatusCode
from ._backend_spec import BackendSpec, child, opened

__all__ = ["check_approval_resumed_in_another_process", "check_kill_9_mid_turn", "check_two_processes_one_session"]

_TURN = ["user", "FunctionCallingAgent", "ActionExecutor", "FunctionCallingAgent"]  # a whole tool-using turn


def expect(condition: object, message: str) -> None:
    """Fail the check with `message` unless `condition` holds (checks run outside pytest too)."""
    if not condition:
        raise AssertionError(message)


def check_kill_9_mid_turn(spec: BackendSpec, workdir: Path, kills: int = 8, seed: int = 20261125) -> None:
    """Processes killed with SIGKILL at random moments of tool-using turns lose no acknowledged turn.

    Four processes at a time write a session each on the one store; each reports a turn once its
    call returned, and is killed at a random moment. Read back in a fresh store object, every
    session holds at least the acknowledged turns, each one whole (question, tool call, result,
    answer), and no half turn; some kills must have landed mid-turn (an interrupted turn found).
    """
    rng = random.Random(seed)
    checked, interrupted = 0, 0
    for batch in range(0, kills, 4):
        children = []
        for i in range(batch, min(batch + 4, kills)):
            process = child(spec, "turns", f"kill-{i}")
            children.append((process, f"kill-{i}", rng.uniform(0.05, 0.8)))
        for process, _, _ in children:
            assert process.stdout is not None
            expect(process.stdout.readline().strip() == "0", "a child's first turn did not return")
        started = time.monotonic()
        for process, _, after in sorted(children, key=lambda c: c[2]):
            time.sleep(max(0.0, started + after - time.monotonic()))
            process.kill()  # SIGKILL: no exit handler, no flush
        for process, session, _ in children:
            acknowledged = 1 + len(process.communicate(timeout=120)[0].split())
            with opened(spec) as store:
                stored = store.load("memory", session)
            interrupted += stored.journal.interrupted is not None
            users = [m["content"] for m in stored.messages if m["sender"] == "user"]
            expect(len(users) >= acknowledged, f"{session}: {acknowledged} turns acknowledged, {len(users)} stored")
            expect(users == [f"turn {n}" for n in range(len(users))], f"{session}: turns out of order: {users[-3:]}")
            senders = [m["sender"] for m in stored.messages]
            expect(senders == _TURN * len(users), f"{session}: a half turn was read back: {senders[-5:]}")
            expect(all(m["content"] == "the answer" for m in stored.messages[3::4]), f"{session}: an answer is wrong")
            checked += len(users)
    expect(checked > kills, f"only {checked} turns over {kills} kills")
    expect(interrupted > 0, "no kill landed mid-turn (no interrupted turn was found): nothing was checked")


def _approval(spec: BackendSpec, counter: Path, step: str, crash: bool = False) -> dict[str, Any]:
    process = child(spec, "approval", "pay", step, str(counter), *(["crash"] if crash else []))
    out, _ = process.communicate(timeout=120)
    if crash:
        expect(process.returncode == 9, f"the child did not die in the tool (exit {process.returncode})")
        return {}
    expect(process.returncode == 0, f"the approval child failed (exit {process.returncode})")
    return dict(json.loads(out.strip().splitlines()[-1]))


def check_approval_resumed_in_another_process(spec: BackendSpec, workdir: Path) -> None:
    """A run paused for approval in one process is resumed in another, exactly once.

    The tool that needed approval runs once; a second resume, in a third process, is refused.
    Then a process that dies inside the approved tool: the process after it finishes the run
    without running the tool again.
    """
    counter = workdir / "transfers"
    paused = _approval(spec, counter, "pause")
    waiting = paused["state"] == AgentStatusCode.INTERRUPTED and len(paused["ids"]) == 1
    expect(waiting, f"the run did not pause: {paused}")
    expect(not counter.exists(), "the tool ran before it was approved")
    decisions = json.dumps({paused["ids"][0]: True})
    resumed = _approval(spec, counter, decisions)
    expect(resumed == {"content": "done: sent 5 to bob"}, f"the resumed run answered {resumed}")
    again = _approval(spec, counter, decisions)
    expect("no paused run" in again.get("error", ""), f"a second resume was not refused: {again}")
    expect(counter.read_text("utf-8").count("ran") == 1, "the approved tool did not run exactly once")
    with opened(spec) as store:
        expect(store.read_run("memory", "pay") is None, "the finished run is still stored as paused")

    counter.unlink()
    with opened(spec) as store:
        store.delete("pay")
    (call,) = _approval(spec, counter, "pause")["ids"]
    _approval(spec, counter, json.dumps({call: True}), crash=True)  # dies inside the transfer
    reply = _approval(spec, counter, "{}")  # the run goes on in the next process
    expect(counter.read_text("utf-8").count("ran") == 1, "a tool that ran before a crash ran again")
    expect("it was not run again" in reply.get("content", ""), f"the run after the crash answered {reply}")


def check_two_processes_one_session(spec: BackendSpec, workdir: Path, turns: int = 100) -> None:
    """Two processes writing one session: `SessionConflictError` in one of them, and 0 acknowledged turns lost.

    Every turn a call acknowledged is stored, only those, each whole; the refused ones failed
    with `SessionConflictError` naming the session.
    """
    children = [child(spec, "writer", "shared", name, str(turns)) for name in ("A", "B")]
    for process in children:
        assert process.stdout is not None
        expect(process.stdout.readline().strip() == "ready", "a writer did not start")
    for process in children:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    results = []
    for process in children:
        out, _ = process.communicate(timeout=300)
        expect(process.returncode == 0, f"a writer failed (exit {process.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    acked = [text for result in results for text in result["acked"]]
    errors: dict[str, int] = {}
    for result in results:
        for kind, count in result["errors"].items():
            errors[kind] = errors.get(kind, 0) + count
    with opened(spec) as store:
        stored = store.read("memory", "shared") or []
    users = [str(m["content"]) for m in stored if m["sender"] == "user"]
    lost = set(acked) - set(users)
    expect(not lost, f"{len(lost)} acknowledged turns lost: {sorted(lost)[:5]}")
    expect(sorted(users) == sorted(acked), "a refused turn left messages behind")
    expect([m["content"] for m in stored] == [x for t in users for x in (t, f"re: {t}")], "a turn is not whole")
    expect(set(errors) == {"SessionConflictError"}, f"the writers met {errors}, not only SessionConflictError")
    expect(len(acked) + errors["SessionConflictError"] == 2 * turns, "a turn neither succeeded nor failed")
    message = next(result["message"] for result in results if result["message"])
    expect("'shared'" in message, f"the conflict does not name the session: {message}")
