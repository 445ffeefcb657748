"""`plait serve` under pressure: a client hoarding connections, and many sessions.

* **Hoarding**: one client address opens 600 connections and drips partial headers; the
  health check (from the hoarder's address and from another) and another client's chat are
  sampled every 0.5 s for ``--hold`` seconds.
* **Sessions**: 20,000 one-turn chats, each in a new session; the server's RSS before, after
  them, and after the idle sessions' time to live has passed (``--session-ttl``; 0: the
  server keeps every session, as before sessions could leave memory).

Both run `plait serve` in its own process (``python -m plait.cli serve --tools ''``) against
the fake OpenAI-compatible server in this one, so they measure older checkouts too
(``--src`` another tree's ``src``; the session flags only where the server has them).

    PYTHONPATH=src .venv/bin/python bench/serve_pressure.py hoard
    PYTHONPATH=src .venv/bin/python bench/serve_pressure.py sessions --session-ttl 0
    PYTHONPATH=src .venv/bin/python bench/serve_pressure.py sessions --session-ttl 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from plait.testing.fake_openai import FakeOpenAIServer, Reply

HOARDER, OTHER = "127.0.0.2", "127.0.0.1"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def plait_serve(src: str, model_url: str, *flags: str) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    port = free_port()
    # a test run's end stops the plait servers it did not tag as another run's (tests/conftest.py): tag this one
    env = {**os.environ, "PYTHONPATH": src, "PYTHONFAULTHANDLER": "1", "PLAIT_TEST_RUN": f"bench-{os.getpid()}"}
    command = [sys.executable, "-m", "plait.cli", "-q", "serve", "--port", str(port), "--api-base", model_url]
    process = subprocess.Popen([*command, "--tools", "", *flags], env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while status_of(f"http://127.0.0.1:{port}/health_check", OTHER) != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("plait serve did not start")
            time.sleep(0.2)
        yield port, process
    finally:
        if process.poll() is not None:
            print(f"plait serve exited by itself, status {process.returncode}", file=sys.stderr)
        process.terminate()
        process.wait(30)


def status_of(url: str, source: str, body: object = None) -> int | str:
    """The status of one request from `source` (an address of this machine), or what went wrong."""
    data = None if body is None else json.dumps(body).encode()
    try:
        with socket.socket() as probe:  # urllib cannot bind a source address: a raw request
            probe.settimeout(10)
            probe.bind((source, 0))
            host, port = url.split("//")[1].split("/")[0].split(":")
            probe.connect((host, int(port)))
            path = "/" + url.split("//")[1].split("/", 1)[1]
            method = "POST" if data else "GET"
            head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
            probe.sendall(f"{head}Content-Length: {len(data or b'')}\r\n\r\n".encode() + (data or b""))
            answer = probe.recv(64)
            return int(answer.split()[1]) if answer else "closed"
    except OSError as exc:
        return type(exc).__name__


def hoard(args: argparse.Namespace) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    with (
        FakeOpenAIServer(handler=lambda body: Reply("ok")) as model,
        plait_serve(args.src, model.base_url) as (port, _),
    ):
        url = f"http://127.0.0.1:{port}"
        sockets = []
        for _ in range(args.connections):
            sock = socket.socket()
            sock.bind((HOARDER, 0))
            sock.connect(("127.0.0.1", port))
            sock.sendall(b"POST /chat_completion HTTP/1.1\r\nHost: x\r\n")
            sockets.append(sock)
        print(f"{args.connections} connections from {HOARDER}, dripping a header byte every 0.5 s")
        print("| t (s) | health from the hoarder's address | health from another | chat from another |")
        print("|---|---|---|---|")
        started = time.monotonic()
        while time.monotonic() - started < args.hold:
            for sock in sockets:
                with contextlib.suppress(OSError):
                    sock.send(b"X")
            same = status_of(url + "/health_check", HOARDER)
            other = status_of(url + "/health_check", OTHER)
            chat = status_of(url + "/chat_completion", OTHER, {"message": "hi", "session_id": "other"})
            print(f"| {time.monotonic() - started:4.1f} | {same} | {other} | {chat} |", flush=True)
            time.sleep(0.5)
        for sock in sockets:
            sock.close()


async def chats(port: int, count: int, concurrency: int) -> None:
    import aiohttp

    queue = iter(range(count))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def worker() -> None:
            for n in queue:
                body = {"message": f"hello number {n}, remember me", "session_id": f"s{n}"}
                async with session.post(f"http://127.0.0.1:{port}/chat_completion", json=body) as response:
                    assert response.status == 200, await response.text()
                    await response.read()

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def sessions(args: argparse.Namespace) -> None:
    flags = [] if args.session_ttl is None else ["--session-ttl", str(args.session_ttl)]
    model = FakeOpenAIServer(handler=lambda body: Reply("Noted, I will remember that."))
    with model, plait_serve(args.src, model.base_url, *flags) as (port, process):
        asyncio.run(chats(port, 50, 8))  # warm: imports, pools
        time.sleep(1)
        before = rss_kib(process.pid)
        started = time.monotonic()
        asyncio.run(chats(port, args.sessions, args.concurrency))
        took = time.monotonic() - started
        after = rss_kib(process.pid)
        ttl = args.session_ttl or 0
        if ttl:
            time.sleep(ttl + min(ttl / 2, 60) + 2)  # the ttl, a sweep, and slack
        later = rss_kib(process.pid)
        asyncio.run(chats(port, args.sessions, args.concurrency))  # again: is the memory reused?
        again = rss_kib(process.pid)
    label = f"--session-ttl {args.session_ttl}" if flags else "(no flag)"
    print(
        f"| {label} | {before / 1024:.0f} MB | {after / 1024:.0f} MB (+{(after - before) / 1024:.0f}) "
        f"| {later / 1024:.0f} MB | {again / 1024:.0f} MB | {args.sessions / took:.0f} chats/s |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["hoard", "sessions"])
    parser.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    parser.add_argument("--connections", type=int, default=600)
    parser.add_argument("--hold", type=float, default=20.0)
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--session-ttl", type=float, default=None)
    args: Any = parser.parse_args()
    if args.what == "hoard":
        hoard(args)
    else:
        sessions(args)


if __name__ == "__main__":
    main()
