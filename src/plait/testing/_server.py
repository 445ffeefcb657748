"""`BackgroundServer`: an aiohttp app on ``127.0.0.1`` (a free port), served from a daemon thread.

The start/stop lifecycle shared by the fake servers (`FakeHTTPServer`, `FakeOpenAIServer`):
a subclass builds its `aiohttp.web.Application` in `_make_app`; this base binds the port,
runs the loop on its own thread, reports start-up failures to the caller of `start`, and
cleans up on `stop` (idempotent) or when a ``with`` block ends.
"""

from __future__ import annotations

import abc
import asyncio
import socket
import threading
from typing import TypeVar

from aiohttp import web

__all__ = ["BackgroundServer"]

_S = TypeVar("_S", bound="BackgroundServer")


class BackgroundServer(abc.ABC):
    """Serves `_make_app()` on ``127.0.0.1`` from a background thread.

    Attributes:
        port: The bound port (0 until started).
        errors: Problems the server hit (the subclass adds its own; a failed cleanup lands here).
    """

    thread_name = "fake-server"
    shutdown_timeout = 0.2
    backlog = 128

    def __init__(self) -> None:
        self.port = 0
        self.errors: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @abc.abstractmethod
    def _make_app(self) -> web.Application:
        """The application to serve (built on the server's loop)."""

    def start(self: _S) -> _S:
        """Bind a free port and serve from a background thread; returns self."""
        if self._thread is not None:
            return self
        started = threading.Event()
        failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._serve, args=(started, failure), name=self.thread_name, daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    def _serve(self, started: threading.Event, failure: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            loop.run_until_complete(self._start_app())
        except BaseException as exc:  # reported to start()'s caller
            failure.append(exc)
            started.set()
            loop.close()
            return
        started.set()
        loop.run_forever()
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    async def _start_app(self) -> None:
        runner = web.AppRunner(
            self._make_app(), access_log=None, handler_cancellation=True, shutdown_timeout=self.shutdown_timeout
        )
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(runner, sock, backlog=self.backlog).start()
        self._runner = runner

    def stop(self) -> None:
        """Stop serving and join the thread (idempotent)."""
        loop, thread, runner = self._loop, self._thread, self._runner
        if loop is None or thread is None:
            return
        if runner is not None:
            try:
                asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
            except Exception as exc:  # still stop the loop; report what went wrong
                self.errors.append(f"cleanup failed: {exc!r}")
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._loop = self._thread = self._runner = None

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
