"""A lean HTTP/1.1 client for plain ``http://`` model servers: keep-alive connections on asyncio.

Local model servers (llama.cpp, vLLM, LMDeploy, Ollama on loopback or the LAN) answer in
a millisecond, so what the client itself spends per request shows: aiohttp spends about
165 µs of CPU on a chat request to a loopback server, this client about 70 µs (bench/README.md).
It does only what the chat transport needs: one origin, ``POST``/``GET`` with a body held
in memory, replies read whole or as they arrive (SSE), keep-alive connections pooled per
event loop up to a limit, and three time limits. The responses are parsed by llhttp
(``httptools``, the parser of Node.js and uvicorn). It runs on any asyncio event loop,
uvloop's included (Ray's workers install it as the default).

What it leaves to aiohttp (`plait.llms._http` picks): ``https://``, proxies (given or from
the environment) and URLs with credentials in them.

Failures are the builtin ones the transport classifies: `OSError` (`ConnectionError`) for
a server that cannot be reached or closed the connection, `TimeoutError` for a limit,
`IncompleteResponse` for a reply cut short or not valid HTTP.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import NamedTuple, cast
from urllib.parse import urlsplit

import httptools

from .._version import __version__

__all__ = [
    "IDLE_SECONDS",
    "MAX_BODY_BYTES",
    "Connections",
    "Headers",
    "IncompleteResponse",
    "Limits",
    "Response",
    "ResponseTooLong",
]

MAX_BODY_BYTES = 64 * 1024 * 1024
"""The longest reply body read whole (a chat completion takes kilobytes)."""

IDLE_SECONDS = 15.0
"""How long an idle keep-alive connection is kept for reuse."""

_PAUSE_AT = 1024 * 1024  # unread bytes of a streamed reply at which reading from the socket pauses


class IncompleteResponse(ConnectionError):
    """The server's reply was cut short, or is not valid HTTP/1.1."""


class ResponseTooLong(IncompleteResponse):
    """The reply's body is longer than the reader accepts."""


class _StaleConnection(ConnectionError):
    """A reused keep-alive connection was closed before any byte of the reply arrived."""


class Limits(NamedTuple):
    """Time limits of one exchange, in seconds (None: no limit)."""

    total: float | None
    """The whole exchange: connecting, sending and reading the whole reply."""
    connect: float | None = None
    """Opening the connection."""
    read: float | None = None
    """Each wait for more of the reply."""


class Headers(Mapping[str, str]):
    """A reply's headers; names are case-insensitive (a repeated header keeps its last value)."""

    __slots__ = ("_items",)

    def __init__(self, items: dict[str, str]) -> None:
        self._items = items

    def __getitem__(self, name: str) -> str:
        return self._items[name.lower()]

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return self._items.get(name.lower(), default)

    def __iter__(self) -> collections.abc.Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


class Response:
    """One reply: its status and headers once they arrived, its body read whole or in chunks.

    Use it as an async context manager: leaving it gives the connection back to the pool
    when the whole reply was read (and the server keeps connections alive), else closes it.
    """

    __slots__ = ("_conn", "_done", "_error", "_parts", "_size", "_timer", "_waiter", "_whole", "headers", "status")

    def __init__(self, conn: _Connection) -> None:
        self._conn = conn
        self.status = 0
        self.headers = Headers({})
        self._parts: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._done = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._whole = False  # read whole by `read`: bounded by its max_bytes, never paused

    # -- fed by the connection --

    def _feed(self, data: bytes) -> None:
        self._parts.append(data)
        self._size += len(data)
        if self._size > _PAUSE_AT and not self._whole:
            self._conn.pause()
        self._wake()

    def _finish(self) -> None:
        self._done = True
        self._wake()

    def _fail(self, exc: BaseException) -> None:
        if self._error is None and not self._done:
            self._error = exc
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    # -- read by the caller --

    async def _wait(self, read_limit: float | None) -> None:
        """Wait until something arrived (or failed): at most `read_limit` seconds."""
        if self._error is not None:
            raise self._error
        loop = self._conn.loop
        waiter = self._waiter = loop.create_future()
        timer = None if read_limit is None else loop.call_later(read_limit, self._fail, TimeoutError())
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
        if self._error is not None:
            raise self._error

    async def read(self, max_bytes: int | None = None) -> bytes:
        """The whole body.

        Args:
            max_bytes: The longest body read (None: `MAX_BODY_BYTES`).

        Raises:
            ResponseTooLong: It is longer than `max_bytes`.
            IncompleteResponse: It was cut short.
        """
        if max_bytes is None:
            max_bytes = MAX_BODY_BYTES
        self._whole = True  # no pause at _PAUSE_AT: nothing here would resume it
        self._conn.resume()
        while not self._done:
            if self._size > max_bytes:
                raise ResponseTooLong(f"the reply is longer than {max_bytes} bytes")
            await self._wait(self._conn.limits.read)
        if self._size > max_bytes:
            raise ResponseTooLong(f"the reply is longer than {max_bytes} bytes")
        body = b"".join(self._parts)
        self._parts.clear()
        self._size = 0
        return body

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives."""
        parts = self._parts
        while True:
            if parts:
                data = parts.popleft()
                self._size -= len(data)
                if self._size < _PAUSE_AT:
                    self._conn.resume()
                yield data
            elif self._done:
                return
            else:
                await self._wait(self._conn.limits.read)

    async def __aenter__(self) -> Response:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._conn.release(self._done and self._error is None and not self._parts)


class _Connection(asyncio.Protocol):
    """One keep-alive connection; the llhttp parser calls its ``on_*`` methods."""

    def __init__(self, pool: Connections) -> None:
        self.pool = pool
        self.loop = pool.loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.response: Response | None = None
        self.head: asyncio.Future[None] | None = None  # resolved when the status and headers arrived
        self.limits = Limits(None)
        self.received = False  # any byte of the current reply
        self.framed = False  # the current reply says where its body ends (length or chunks)
        self.interim = False  # the current message is a 1xx reply
        self.reusable = False
        self.reused = False  # it carried a whole exchange and went back to the pool: the server may have closed it
        self.closed = False
        self.idle_since = 0.0
        self.reads_paused = False
        self._header_items: dict[str, str] = {}

    # -- asyncio.Protocol --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # no isinstance check: uvloop's transports (the loop Ray's workers install) subclass none of asyncio's
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        response = self.response
        if response is None:  # bytes no request asked for: this connection cannot be trusted again
            self.close()
            return
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(IncompleteResponse(f"the server's reply is not valid HTTP/1.1: {exc}"))
            self.close()
        except httptools.HttpParserUpgrade:  # not an HttpParserError: a 101 reply
            self._fail(IncompleteResponse("the server switched to another protocol (HTTP 101)"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        response = self.response
        if response is not None and not response._done:
            if exc is None and self.head is None and not self.framed and not self.interim and self.received:
                response._finish()  # a body that ends where the connection does
            elif not self.received and self.reused:
                self._fail(_StaleConnection("the server closed a kept-alive connection"))
            else:
                reason = f": {exc}" if exc is not None else ""
                message = f"the server closed the connection before the reply was complete{reason}"
                self._fail(IncompleteResponse(message))
        self.pool.forget(self)

    # -- parser callbacks --

    def on_message_begin(self) -> None:
        response = self.response
        if response is not None and response._done:  # fails the parser: the connection is closed
            raise IncompleteResponse("the server sent a reply no request asked for")
        self._header_items = {}
        self.framed = self.interim = False

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        self._header_items[key] = text
        if key == "content-length" or (key == "transfer-encoding" and "chunked" in text.lower()):
            self.framed = True

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim reply (103 Early Hints): the real one follows
            self.interim = True
            return
        response = self.response
        head = self.head
        if response is None or head is None:
            return
        response.status = status
        response.headers = Headers(self._header_items)
        self._header_items = {}  # trailers of a chunked body (parsed as headers) must not join or replace them
        if status in (204, 304):
            self.framed = True
        self.head = None
        if not head.done():
            head.set_result(None)

    def on_body(self, body: bytes) -> None:
        response = self.response
        if response is not None:
            response._feed(body)

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False
            return
        self.reusable = self.parser.should_keep_alive()
        response = self.response
        if response is not None:
            response._finish()

    # -- used by the pool and the response --

    def _fail(self, exc: BaseException) -> None:
        head = self.head
        if head is not None:
            self.head = None
            if not head.done():
                head.set_exception(exc)
        if self.response is not None:
            self.response._fail(exc)

    def pause(self) -> None:
        if not self.reads_paused and self.transport is not None and not self.closed:
            self.reads_paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.reads_paused and self.transport is not None and not self.closed:
            self.reads_paused = False
            self.transport.resume_reading()

    def release(self, complete: bool) -> None:
        """The exchange is over: reuse the connection when its reply was read whole, else close it."""
        response = self.response
        self.response = None
        self.head = None
        if response is not None and response._timer is not None:
            response._timer.cancel()
        if complete and self.reusable and not self.closed:
            self.resume()
            self.idle_since = time.monotonic()
            self.pool.put_back(self)
        else:
            self.close()

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.close()
        self.pool.forget(self)


class Connections:
    """The keep-alive connections of one event loop to one ``http://`` origin.

    Args:
        url: Any URL of the origin (scheme ``http``).
        max_connections: The most connections open at once (0: no limit); a request that
            finds them all busy waits for one.
    """

    def __init__(self, url: str, max_connections: int = 1024) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or parts.username or parts.password:
            raise ValueError(f"the lean client serves plain http:// URLs without credentials, not {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.authority = parts.netloc
        self.max_connections = max_connections
        self.loop = asyncio.get_running_loop()
        self.closed = False
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        # identity: a reply is read as sent (nothing here decompresses; aiohttp asks for gzip and does)
        self._fixed = (
            f"\r\nHost: {self.authority}\r\nUser-Agent: plait/{__version__}\r\nAccept: */*\r\n"
            "Accept-Encoding: identity\r\n"
        )

    async def request(
        self, method: str, target: str, body: bytes, headers: Mapping[str, str], limits: Limits
    ) -> Response:
        """Send one request; returns once the reply's status and headers arrived.

        A request whose kept-alive connection turns out closed (reset, or at its end) before
        any byte of the reply is sent again, once, on a fresh connection: a server closes an
        idle connection between requests (uvicorn after 5 s), so it read nothing of this one
        (the reasoning of urllib3 and httpx). A fresh connection's failure is never retried
        here, and neither is a reply cut short after its first byte.
        """
        head = self._head(method, target, body, headers)
        deadline = None if limits.total is None else self.loop.time() + limits.total
        conn = self._idle_connection() or await self._acquire(limits, deadline)
        try:
            return await self._exchange(conn, head, body, limits, deadline)
        except _StaleConnection:
            pass  # out of the handler: a failure of the second try does not chain this one
        return await self._exchange(await self._acquire(limits, deadline, fresh=True), head, body, limits, deadline)

    def _head(self, method: str, target: str, body: bytes, headers: Mapping[str, str]) -> bytes:
        lines = [method, " ", target, " HTTP/1.1", self._fixed, "Content-Length: ", str(len(body)), "\r\n"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
                raise ValueError(f"the header {name.splitlines()[0][:40]!r} holds a line break or a colon")
            lines += (name, ": ", value, "\r\n")
        lines.append("\r\n")
        try:
            return "".join(lines).encode("latin-1")
        except UnicodeEncodeError:
            pass  # raised below, outside this block: the encoding error quotes the whole head, keys included
        raise ValueError("a header or the request target holds a character that is not latin-1")

    async def _exchange(
        self, conn: _Connection, head: bytes, body: bytes, limits: Limits, deadline: float | None
    ) -> Response:
        response = conn.response = Response(conn)
        ready = conn.head = self.loop.create_future()
        conn.limits = limits
        conn.received = False
        if deadline is not None:
            response._timer = self.loop.call_at(deadline, conn._fail, TimeoutError())
        # the wait for the status and headers is a read too
        read_timer = None if limits.read is None else self.loop.call_later(limits.read, conn._fail, TimeoutError())
        transport = conn.transport
        try:
            if conn.closed or transport is None:  # lost between being handed out and now
                if conn.reused:
                    raise _StaleConnection("the connection closed before the request was sent")
                raise ConnectionResetError("the server closed the connection before the request was sent")
            transport.write(head + body)
            await ready
        except BaseException:
            conn.release(False)
            raise
        finally:
            if read_timer is not None:
                read_timer.cancel()
        return response

    def _idle_connection(self) -> _Connection | None:
        """A kept-alive connection ready for reuse (the stale ones closed), if there is one."""
        if self.closed:
            raise ConnectionError("the client's connections were closed")
        if not self._idle:
            return None
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < IDLE_SECONDS:
                return conn
            conn.close()
        return None

    async def _acquire(self, limits: Limits, deadline: float | None, fresh: bool = False) -> _Connection:
        """A connection: an idle one, else a new one once the limit allows (waiting for a turn).

        Args:
            limits: The exchange's limits (``connect`` bounds opening a new connection).
            deadline: The exchange's end (loop time; None: none).
            fresh: A new connection, never an idle one (idle ones are closed to make room).
        """
        if not fresh:
            conn = self._idle_connection()
            if conn is not None:
                return conn
        while self.max_connections and len(self._open) >= self.max_connections:
            if fresh and self._idle:
                self._idle.pop(0).close()  # the oldest: its room is this connection's
                continue
            waiter = self.loop.create_future()
            self._waiters.append(waiter)
            timeout = None if deadline is None else max(0.0, deadline - self.loop.time())
            try:
                await asyncio.wait_for(waiter, timeout)
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken, but giving up (cancelled, timed out): pass the turn on
                raise
            finally:
                if not waiter.done():
                    waiter.cancel()
            if self._idle and not fresh:
                return await self._acquire(limits, deadline)
        conn = _Connection(self)
        self._open.add(conn)
        timeout = limits.connect
        if deadline is not None:
            remaining = max(0.0, deadline - self.loop.time())
            timeout = remaining if timeout is None else min(timeout, remaining)
        try:
            await asyncio.wait_for(self.loop.create_connection(lambda: conn, self.host, self.port), timeout)
        except OSError as exc:
            self.forget(conn)
            if isinstance(exc, TimeoutError):
                raise
            raise ConnectionError(f"cannot connect to {self.authority}: {exc}") from exc
        except BaseException:
            self.forget(conn)
            raise
        return conn

    def put_back(self, conn: _Connection) -> None:
        conn.reused = True
        if self.closed:
            conn.close()
            return
        self._idle.append(conn)
        self._wake_one()

    def forget(self, conn: _Connection) -> None:
        if conn in self._open:
            self._open.discard(conn)
            self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def close(self) -> None:
        """Close every connection; requests in flight fail."""
        self.closed = True
        for conn in list(self._open):
            conn.close()
        self._idle.clear()

    def __repr__(self) -> str:
        return f"Connections({self.authority!r}, open={len(self._open)}, idle={len(self._idle)})"
