"""What a session backend adds to an agent call: the same agent with no store, SessionStore and PostgresSessionStore.

A sync `Agent` and an `AsyncAgent` on a function-backed model each answer 3000 calls spread over
100 sessions (each call writes two messages), one at a time; reported per call, median of 3 rounds.
``shared=True`` stores add the check each call makes that no other worker changed its session.

    PYTHONPATH=src .venv/bin/python bench/session_store.py

PostgreSQL: the database in ``$PLAIT_BENCH_POSTGRES_DSN`` (its tables go to a schema of their own,
dropped afterwards), or else a throwaway local server started from the machine's PostgreSQL
binaries (tests/_postgres.py: fsync off, like the tests). The DSN is read from the environment,
never the command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from plait.agents import Agent, AsyncAgent
from plait.memory import PostgresSessionStore, SessionStore
from plait.memory._sql_store import SqlSessionStore
from plait.testing import AsyncFunctionLLM, FunctionLLM

CALLS = 3000
SESSIONS = 100
ROUNDS = 3


def run(store: SqlSessionStore | None) -> float:
    """Microseconds per call of a sync `Agent`."""
    agent = Agent(FunctionLLM(lambda messages, params: "ok"))
    if store is not None:
        store.attach(agent)
    start = time.perf_counter()
    for i in range(CALLS):
        agent("hello there", session_id=i % SESSIONS)
    per_call = (time.perf_counter() - start) / CALLS
    if store is not None:
        store.flush()
    return per_call * 1e6


def run_async(store: SqlSessionStore | None) -> float:
    """Microseconds per call of an `AsyncAgent`, one call at a time."""
    agent = AsyncAgent(AsyncFunctionLLM(lambda messages, params: "ok"))
    if store is not None:
        store.attach(agent)

    async def calls() -> float:
        start = time.perf_counter()
        for i in range(CALLS):
            await agent("hello there", session_id=i % SESSIONS)
        return (time.perf_counter() - start) / CALLS

    per_call = asyncio.run(calls())
    if store is not None:
        store.flush()
    return per_call * 1e6


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
    with postgres_dsn() as dsn:
        stores: dict[str, Callable[[str], SqlSessionStore] | None] = {
            "no store": None,
            "SessionStore": lambda tag: SessionStore(folder / f"{tag}.db"),
            "SessionStore(shared=True)": lambda tag: SessionStore(folder / f"{tag}.db", shared=True),
            "PostgresSessionStore": lambda tag: PostgresSessionStore(dsn, schema=f"plait_bench_{tag}"),
            "PostgresSessionStore(shared=True)": lambda tag: PostgresSessionStore(
                dsn, schema=f"plait_bench_{tag}", shared=True
            ),
        }
        results: dict[str, dict[str, list[float]]] = {name: {"sync": [], "async": []} for name in stores}
        for round_ in range(ROUNDS):
            for name, make in stores.items():
                for mode, measure in (("sync", run), ("async", run_async)):
                    tag = f"{round_}_{mode}_{len(results[name][mode])}_{abs(hash(name)) % 10_000}"
                    if make is None:
                        results[name][mode].append(measure(None))
                        continue
                    with make(tag) as store:
                        results[name][mode].append(measure(store))
                    if name.startswith("Postgres"):
                        drop_schema(dsn, f"plait_bench_{tag}")
    print("| backend | sync agent, per call | async agent, per call |")
    print("|---|---|---|")
    for name, modes in results.items():
        sync, async_ = (statistics.median(modes[mode]) for mode in ("sync", "async"))
        print(f"| {name} | {sync:.0f} us | {async_:.0f} us |")


if __name__ == "__main__":
    main()
