"""What a SessionStore adds to an agent call: the same agent with and without one.

A sync `Agent` on a function-backed model answers 3000 calls spread over 100 sessions
(each call writes two messages); reported per call, plus the time `flush` then waits.

    PYTHONPATH=src .venv/bin/python bench/session_store.py
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from plait.agents import Agent
from plait.memory import SessionStore
from plait.testing import FunctionLLM

CALLS = 3000
SESSIONS = 100
ROUNDS = 3


def run(store: SessionStore | None) -> tuple[float, float]:
    agent = Agent(FunctionLLM(lambda messages, params: "ok"))
    if store is not None:
        store.attach(agent)
    start = time.perf_counter()
    for i in range(CALLS):
        agent("hello there", session_id=i % SESSIONS)
    per_call = (time.perf_counter() - start) / CALLS
    start = time.perf_counter()
    if store is not None:
        store.flush()
    return per_call * 1e6, (time.perf_counter() - start) * 1000


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="plait-bench-"))
    plain, stored, flushes = [], [], []
    for round_ in range(ROUNDS):
        plain.append(run(None)[0])
        with SessionStore(folder / f"round{round_}.db") as store:
            per_call, flush_ms = run(store)
        stored.append(per_call)
        flushes.append(flush_ms)
    print("| measurement | without store | with SessionStore |")
    print("|---|---|---|")
    print(f"| per agent call | {statistics.median(plain):.0f} us | {statistics.median(stored):.0f} us |")
    print(f"| flush after {CALLS} calls | | {statistics.median(flushes):.0f} ms |")


if __name__ == "__main__":
    main()
