"""The lean HTTP/1.1 client against the standard library's ``ThreadingHTTPServer``: event loops, Ray, idle closes.

The server speaks HTTP/1.1 with keep-alive, as ``http.server`` does with ``protocol_version
'HTTP/1.1'``, and may close a connection that stays idle for a while (uvicorn, under vLLM,
closes them after 5 s). Each case runs on asyncio's own event loop and on uvloop's, the loop
Ray's workers install as the default (`ray._private.async_compat.try_install_uvloop`) and
that users install themselves.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from plait.exceptions import LLMConnectionError
from plait.llms import GPTAPI, AsyncGPTAPI


class _Handler(http.server.BaseHTTPRequestHandler):
    """Answers a chat completion with what its last message asked; ``cut`` answers with a head's first bytes only."""

    protocol_version = "HTTP/1.1"
    server: ChatServer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        asked = str(json.loads(body)["messages"][-1]["content"])
        with self.server.lock:
            self.server.requests.append((self.client_address[1], asked))
        if asked == "cut":
            self.wfile.write(b"HTTP/1.1 2")  # a reply's first bytes, then the connection closes
            self.close_connection = True
            return
        message = {"role": "assistant", "content": asked}
        reply = json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:
        pass  # "Request timed out" when it closes an idle connection is the point, not news


class ChatServer(http.server.ThreadingHTTPServer):
    """A chat-completion server on 127.0.0.1 that closes a connection idle for `idle` seconds (None: never)."""

    daemon_threads = True

    def __init__(self, idle: float | None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.idle = idle
        self.lock = threading.Lock()
        self.requests: list[tuple[int, str]] = []
        """(the client's port, which names the connection; what the request asked), in arrival order."""
        self.closed = 0
        """Connections the server closed (after their socket was)."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def finish_request(self, request: socket.socket | tuple[bytes, socket.socket], client_address: object) -> None:
        assert isinstance(request, socket.socket)
        request.settimeout(self.idle)  # a wait for the next request longer than that ends the connection
        super().finish_request(request, client_address)

    def shutdown_request(self, request: socket.socket | tuple[bytes, socket.socket]) -> None:
        super().shutdown_request(request)
        with self.lock:
            self.closed += 1

    def asked(self) -> list[str]:
        with self.lock:
            return [text for _port, text in self.requests]

    def connections(self) -> list[int]:
        """The index of the connection each request came on, 0 for the first."""
        with self.lock:
            ports = [port for port, _text in self.requests]
        return [list(dict.fromkeys(ports)).index(port) for port in ports]


@contextmanager
def chat_server(idle: float | None = None) -> Iterator[ChatServer]:
    server = ChatServer(idle)
    thread = threading.Thread(target=server.serve_forever, name="stdlib-http-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Poll `predicate` with ``time.sleep`` (an event loop on this thread does not run meanwhile)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


# -- the client on both event loops -------------------------------------------------------------


@pytest.mark.parametrize("client", ["sync", "async", "async, its loop busy"])
def test_two_calls_further_apart_than_the_servers_idle_limit_are_each_sent_once(
    event_loop_kind: str, client: str
) -> None:
    with chat_server(idle=1.0) as server:

        def closed_the_first() -> bool:
            return server.closed == 1

        if client == "sync":
            with GPTAPI("m", api_base=server.base_url, key="sk-x", retry=1, timeout=10.0) as llm:
                answers = [llm.chat("one")]
                wait_until(closed_the_first, "the server closed the idle connection")
                answers.append(llm.chat("two"))
        else:

            async def run() -> list[str]:
                llm = AsyncGPTAPI("m", api_base=server.base_url, key="sk-x", retry=1, timeout=10.0)
                first = await llm.chat("one")
                if client == "async":
                    # the loop runs meanwhile: the client sees the close while the connection is idle
                    await asyncio.to_thread(wait_until, closed_the_first, "the server closed the idle connection")
                else:  # the loop blocked: the request goes out on the closed connection, then the close is seen
                    wait_until(closed_the_first, "the server closed the idle connection")
                second = await llm.chat("two")
                await llm.aclose()
                return [first, second]

            answers = asyncio.run(run())
    assert answers == ["one", "two"]
    assert server.asked() == ["one", "two"]  # each call reached the server once
    assert server.connections() == [0, 1]  # the second on a new connection


def test_a_kept_alive_connection_cut_after_the_replys_first_byte_is_not_resent(event_loop_kind: str) -> None:
    with chat_server() as server:

        async def run() -> None:
            llm = AsyncGPTAPI("m", api_base=server.base_url, key="sk-x", retry=1, timeout=10.0)
            assert await llm.chat("one") == "one"
            with pytest.raises(LLMConnectionError, match="broke before the response was complete") as info:
                await llm.chat("cut")
            assert info.value.attempts == 1
            await llm.aclose()

        asyncio.run(run())
    assert server.asked() == ["one", "cut"]  # the server may have acted on it: sent once
    assert server.connections() == [0, 0]


# -- inside a Ray worker ------------------------------------------------------------------------


def _chat_in_a_worker(base_url: str) -> tuple[str, str]:
    """A Ray task's body: the sync client's answer, and the module of the worker's event loop policy."""
    policy = type(asyncio.get_event_loop_policy()).__module__
    llm = GPTAPI(model_type="m", key="sk-x", api_base=f"{base_url}/chat/completions", retry=1, timeout=30.0)
    with llm:
        return llm.chat("from a worker"), policy


@pytest.mark.slow
def test_the_sync_client_in_a_ray_task_talks_to_a_stdlib_http11_server() -> None:
    ray = pytest.importorskip("ray", reason="the Ray tests need the 'ray' extra (test extra)")
    paths = [p for p in sys.path if p and os.path.isdir(p)]  # the worker imports what this process does
    with chat_server() as server:
        ray.init(
            num_cpus=1,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}},
        )
        try:
            answer, policy = ray.get(ray.remote(_chat_in_a_worker).remote(server.base_url), timeout=120)
        finally:
            ray.shutdown()
    assert answer == "from a worker"
    assert server.asked() == ["from a worker"]
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return
    assert policy.startswith("uvloop")  # what made the difference: Ray's workers run uvloop where it is installed
