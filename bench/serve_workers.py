"""``plait serve`` turns/s at 1, 2 and 4 workers over PostgreSQL, against one worker with no store.

256 sessions take 4 turns each through the OpenAI route (``X-Session-Id``), 64 at a time, over
keep-alive connections (aiohttp client: lighter than the openai SDK, so the load generator takes
less of the machine). The model is the fake OpenAI-compatible server in its own process, answering
at once (what is measured is plait's own cost per turn: the agent, the HTTP server, the store).

    PYTHONPATH=src .venv/bin/python bench/serve_workers.py

PostgreSQL: ``$PLAIT_BENCH_POSTGRES_DSN``, or a throwaway local server (tests/_postgres.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agent_overhead import Server
from session_store import postgres_dsn

SESSIONS = 256
TURNS = 4
CONCURRENCY = 64
SRC = str(Path(__file__).resolve().parents[1] / "src")


def echo(body: dict[str, Any]) -> Any:
    from plait.testing.fake_openai import Reply

    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return Reply(f"echo {users[-1]} after {len(users) - 1} earlier")


@contextlib.contextmanager
def serving(model_url: str, workers: int, store: str | None) -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    command = [sys.executable, "-m", "plait.cli", "-q", "serve", "--port", str(port), "--api-base", model_url]
    command += ["--workers", str(workers)] + (["--store", store] if store else [])
    env = {**os.environ, "PYTHONPATH": SRC, "PLAIT_TEST_RUN": "manual"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health_check", timeout=5).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"plait serve did not start (exit {process.poll()})") from None
                time.sleep(0.2)
        time.sleep(1.0 if workers > 1 else 0.0)  # every worker listening, not only the first
        yield port
    finally:
        process.terminate()
        process.wait(timeout=60)


async def load(port: int, tag: str) -> float:
    """Turns per second of SESSIONS x TURNS turns, CONCURRENCY sessions at a time."""
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    gate = asyncio.Semaphore(CONCURRENCY)
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def converse(session: str) -> None:
            async with gate:
                for turn in range(TURNS):
                    body = {"model": "plait", "messages": [{"role": "user", "content": f"{session} t{turn}"}]}
                    async with http.post(url, json=body, headers={"X-Session-Id": session}) as response:
                        answer = (await response.json())["choices"][0]["message"]["content"]
                    if answer != f"echo {session} t{turn} after {turn} earlier":
                        raise RuntimeError(f"{session} turn {turn}: {answer!r}")

        start = time.perf_counter()
        await asyncio.gather(*(converse(f"{tag}-{i}") for i in range(SESSIONS)))
        return SESSIONS * TURNS / (time.perf_counter() - start)


def main() -> None:
    model = Server(0.0, handler=echo)
    rows: list[tuple[str, float]] = []
    try:
        with postgres_dsn() as dsn:
            for label, workers, store in (
                ("1 worker, no store", 1, None),
                ("1 worker, PostgreSQL", 1, dsn),
                ("2 workers, PostgreSQL (shared)", 2, dsn),
                ("4 workers, PostgreSQL (shared)", 4, dsn),
            ):
                with serving(model.base_url, workers, store) as port:
                    asyncio.run(load(port, f"warm{workers}{bool(store)}"))  # connections, first sessions
                    rate = asyncio.run(load(port, f"run{workers}{bool(store)}"))
                rows.append((label, rate))
                print(f"{label}: {rate:.0f} turns/s", flush=True)
    finally:
        model.close()
    base = rows[0][1]
    print(f"\n{SESSIONS} sessions x {TURNS} turns, {CONCURRENCY} at a time; load average {os.getloadavg()[0]:.1f}")
    print("| server | turns/s | vs 1 worker, no store |")
    print("|---|---|---|")
    for label, rate in rows:
        print(f"| {label} | {rate:.0f} | {rate / base:.2f}x |")


if __name__ == "__main__":
    main()
