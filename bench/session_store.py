"""What a session backend adds to an agent call: the same agent with no store, SessionStore and PostgresSessionStore.

A sync `Agent` on a function-backed model answers 3000 calls spread over 100 sessions
(each call writes two messages); reported per call, plus the time `flush` then waits.

    PYTHONPATH=src .venv/bin/python bench/session_store.py

PostgreSQL: the database in ``$PLAIT_BENCH_POSTGRES_DSN`` (its tables go to a schema of their own,
dropped afterwards), or else a throwaway local server started from the machine's PostgreSQL
binaries (tests/_postgres.py: fsync off, like the tests). The DSN is read from the environment,
never the command line.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from plait.agents import Agent
from plait.memory import PostgresSessionStore, SessionStore
from plait.memory._sql_store import SqlSessionStore
from plait.testing import FunctionLLM

CALLS = 3000
SESSIONS = 100
ROUNDS = 3


def run(store: SqlSessionStore | None) -> tuple[float, float]:
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


@contextlib.contextmanager
def postgres_dsn() -> Iterator[str]:
    dsn = os.environ.get("PLAIT_BENCH_POSTGRES_DSN")
    if dsn:
        yield dsn
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from _postgres import PostgresServer

    with PostgresServer() as server:
        yield server.create_database("bench")


def drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as raw:
        raw.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="plait-bench-"))
    results: dict[str, list[tuple[float, float]]] = {"no store": [], "SessionStore": [], "PostgresSessionStore": []}
    with postgres_dsn() as dsn:
        stores: dict[str, Callable[[int], SqlSessionStore]] = {
            "SessionStore": lambda n: SessionStore(folder / f"round{n}.db"),
            "PostgresSessionStore": lambda n: PostgresSessionStore(dsn, schema=f"plait_bench_{n}"),
        }
        for round_ in range(ROUNDS):
            results["no store"].append(run(None))
            for name, make in stores.items():
                with make(round_) as store:
                    results[name].append(run(store))
            drop_schema(dsn, f"plait_bench_{round_}")
    calls = [f"{statistics.median(r[0] for r in rounds):.0f} us" for rounds in results.values()]
    flushes = [f"{statistics.median(r[1] for r in rounds):.0f} ms" for rounds in list(results.values())[1:]]
    print("| measurement | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    print("| per agent call | " + " | ".join(calls) + " |")
    print(f"| flush after {CALLS} calls | | " + " | ".join(flushes) + " |")


if __name__ == "__main__":
    main()
