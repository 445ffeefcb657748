"""``plait serve --workers N``: worker processes sharing one port and one PostgreSQL store (real processes).

The load goes through the official ``openai`` client with a new connection per request, so the
kernel spreads each session's turns over the workers; the model is a scripted server whose
answer shows the history it was sent (``echo <message> after <n> earlier``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from openai import AsyncOpenAI

from _support import wait_for_http
from plait.memory import PostgresSessionStore
from plait.testing.fake_openai import FakeOpenAIServer

SRC = str(Path(__file__).resolve().parents[2] / "src")
LOAD_S = 900  # 2,560 turns through real processes: ~1 min idle, several under load
RAY_S = 900  # starting a local Ray runtime and Serve: a minute here under load, more when busier
_SERVED = re.compile(r"\[worker (\d+)\] .*session=(\S+) .*-> 200")


class Workers:
    """A running ``plait serve --workers N``: its port, and what its workers logged so far."""

    def __init__(self, process: subprocess.Popen[str], port: int) -> None:
        self.process, self.port = process, port
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    def served(self) -> dict[str, set[int]]:
        """Each session's workers (pids) that answered a turn of it."""
        found: dict[str, set[int]] = defaultdict(set)
        for line in list(self.lines):
            match = _SERVED.search(line)
            if match:
                found[match.group(2)].add(int(match.group(1)))
        return found


@contextlib.contextmanager
def plait_workers(*args: str, workers: int = 2, start_s: float = 300, announced: str = "workers") -> Iterator[Workers]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = [sys.executable, "-m", "plait.cli", "-v", "serve", "--port", str(port), "--workers", str(workers), *args]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    running = Workers(process, port)
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()  # printed once every worker serves
        assert line.endswith(f"({workers} {announced})"), "\n".join(running.lines[-30:])
        wait_for_http(f"http://127.0.0.1:{port}/health_check", process, timeout=start_s)
        yield running
    finally:
        process.terminate()
        process.communicate(timeout=start_s)
        running.reader.join(timeout=10)
    assert process.returncode == 0, "\n".join(running.lines[-30:])  # SIGTERM stops the workers, then the supervisor


def load(
    port: int, sessions: int, turns: int, concurrency: int = 32, after_ack: Callable[[int], None] | None = None
) -> dict[str, list[tuple[str, str]]]:
    """`sessions` conversations of `turns` turns each, `concurrency` at a time; each session's (question, answer)."""
    acked: dict[str, list[tuple[str, str]]] = {f"s{i}": [] for i in range(sessions)}
    count = 0

    async def run() -> None:
        nonlocal count
        limits = httpx.Limits(max_keepalive_connections=0, max_connections=concurrency)  # a connection per turn
        async with httpx.AsyncClient(limits=limits, timeout=120) as http:
            client = AsyncOpenAI(
                base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", http_client=http, max_retries=8
            )
            gate = asyncio.Semaphore(concurrency)

            async def converse(session: str) -> None:
                async with gate:
                    for turn in range(turns):
                        question = f"{session} t{turn}"
                        reply = await client.chat.completions.create(
                            model="plait",
                            messages=[{"role": "user", "content": question}],
                            extra_headers={"X-Session-Id": session},
                        )
                        acked[session].append((question, str(reply.choices[0].message.content)))
                        nonlocal count
                        count += 1
                        if after_ack is not None:
                            after_ack(count)

            await asyncio.gather(*(converse(session) for session in acked))

    asyncio.run(run())
    return acked


def stored(dsn: str, session: str) -> list[str]:
    store = PostgresSessionStore(dsn)
    try:
        return [str(message["content"]) for message in store.read("memory", session) or []]
    finally:
        store.close()


@pytest.mark.timeout(LOAD_S)
def test_workers_over_postgres_spread_each_session_and_keep_every_turn(
    model: FakeOpenAIServer, postgres_dsn: str
) -> None:
    sessions, turns = 256, 10
    with plait_workers("--api-base", model.base_url, "--store", postgres_dsn) as workers:
        acked = load(workers.port, sessions, turns)
        served = workers.served()
    assert sum(len(turns_) for turns_ in acked.values()) == sessions * turns  # 2,560 of 2,560
    for session, exchanges in acked.items():  # each answer saw exactly its session's earlier turns: no cross-talk
        assert exchanges == [(f"{session} t{t}", f"echo {session} t{t} after {t} earlier") for t in range(turns)]
    moved = [session for session, pids in served.items() if len(pids) == 2]
    assert len(served) == sessions and len(moved) > sessions // 2, f"{len(moved)} sessions used both workers"
    for session in ("s0", "s17", f"s{sessions - 1}"):  # the store holds each history exactly
        assert stored(postgres_dsn, session) == [text for exchange in acked[session] for text in exchange]


@pytest.mark.timeout(LOAD_S)
def test_a_worker_killed_mid_run_loses_no_acknowledged_turn(model: FakeOpenAIServer, postgres_dsn: str) -> None:
    sessions, turns = 64, 10
    with plait_workers("--api-base", model.base_url, "--store", postgres_dsn) as workers:
        killed: list[int] = []

        def kill_one(count: int) -> None:
            if count == sessions * turns // 3 and not killed:  # a third of the way: one worker dies mid-turns
                victim = next(iter(next(iter(workers.served().values()))))
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)

        acked = load(workers.port, sessions, turns, after_ack=kill_one)
        deadline = time.monotonic() + 60
        while not any("exited (signal 9); starting another" in line for line in workers.lines):
            assert time.monotonic() < deadline, "the supervisor did not replace the killed worker"
            time.sleep(0.1)
    assert killed
    assert all(len(exchanges) == turns for exchanges in acked.values())  # every turn answered (retried if cut)
    duplicates = 0
    for session, exchanges in acked.items():
        history = stored(postgres_dsn, session)
        pairs = list(zip(history[::2], history[1::2], strict=True))
        assert all(question.startswith(f"{session} ") for question, _ in pairs)  # no cross-talk
        position = 0
        for question, answer in exchanges:  # every acknowledged turn is stored, in order
            while pairs[position] != (question, answer):
                position += 1  # a turn stored twice (its answer was cut after the commit, and retried)
                duplicates += 1
            position += 1
        assert position == len(pairs), f"{session}: {len(pairs) - position} turn(s) stored after the last answer"
    assert duplicates <= 32, f"{duplicates} turns stored twice"  # at most the requests in flight at the kill


def test_workers_need_a_shared_store(model: FakeOpenAIServer) -> None:
    env = {**os.environ, "PYTHONPATH": SRC, "PLAIT_STORE": ""}
    command = [sys.executable, "-m", "plait.cli", "serve", "--workers", "2", "--api-base", model.base_url]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "--workers needs --store" in result.stderr


@pytest.mark.parametrize("store", ["postgresql://ada:s3cret@127.0.0.1:5/db"])
def test_a_store_password_stays_off_the_command_line(model: FakeOpenAIServer, store: str) -> None:
    env = {**os.environ, "PYTHONPATH": SRC}
    command = [sys.executable, "-m", "plait.cli", "serve", "--store", store, "--api-base", model.base_url]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "keep the database password out of the command line" in result.stderr and "s3cret" not in result.stderr


@pytest.mark.slow
@pytest.mark.timeout(2 * RAY_S)  # Ray's start alone passed the suite's 300 s beside two busy loops
def test_ray_serve_replicas_over_postgres_keep_every_turn(model: FakeOpenAIServer, postgres_dsn: str) -> None:
    """The same load through ``plait serve --ray``: Ray Serve's proxy spreads the requests over two replicas."""
    sessions, turns = 256, 10
    ray = ("--ray", "--api-base", model.base_url, "--store", postgres_dsn)
    with plait_workers(*ray, start_s=RAY_S, announced="Ray Serve replicas") as served:
        acked = load(served.port, sessions, turns)
    assert sum(len(turns_) for turns_ in acked.values()) == sessions * turns
    for session, exchanges in acked.items():
        assert exchanges == [(f"{session} t{t}", f"echo {session} t{t} after {t} earlier") for t in range(turns)]
    for session in ("s0", f"s{sessions - 1}"):
        assert stored(postgres_dsn, session) == [text for exchange in acked[session] for text in exchange]
