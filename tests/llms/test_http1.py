"""The lean HTTP/1.1 client (`plait.llms._http1`) against real servers on 127.0.0.1 whose every byte the test writes.

Each server runs on its own thread and event loop (so a client may use ``asyncio.run`` as
often as it likes, or the sync client its private loop), reads requests itself, and
counts what a client cannot hide: accepted connections, connections open at once, the
requests it received and the headers they carried.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import json
import socket
import struct
import threading
import time
import warnings
import weakref
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import pytest

from plait.exceptions import LLMConnectionError, LLMResponseError, LLMTimeoutError, UserError
from plait.llms import GPTAPI, AsyncGPTAPI, _http1
from plait.llms._http import AiohttpClient, LeanClient, client_for
from plait.llms._http1 import Connections, Limits
from plait.utils._aio import PerLoop

JSON = {"Content-Type": "application/json"}
HI = [{"role": "user", "content": "hi"}]


# -- the server ---------------------------------------------------------------------------------


@dataclass
class Received:
    """One request as the server read it."""

    conn: int
    """The index of the connection it came on (0 for the first accepted)."""
    method: str
    target: str
    headers: dict[str, str]
    """Names lower-cased."""
    body: bytes


Handler = Callable[[Received, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]
"""Answers one request with raw bytes; returns whether to keep reading requests on the connection."""


async def read_request(reader: asyncio.StreamReader, conn: int) -> Received | None:
    """The next request on a connection (None: the client closed it)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    line, *lines = head.decode("latin-1").split("\r\n")
    method, target, _ = line.split(" ")
    headers: dict[str, str] = {}
    for item in lines:
        if item:
            name, _, value = item.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Received(conn, method, target, headers, body)


@dataclass
class RawServer:
    """A TCP server on 127.0.0.1, on its own thread and loop, that answers with `handler`."""

    handler: Handler
    accepts: int = 0
    open_now: int = 0
    max_open: int = 0
    ended: int = 0
    """Connections that are over (the client closed them, or the handler ended them)."""
    requests: list[Received] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _server: asyncio.Server | None = None
    _thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RawServer:
        self._thread = threading.Thread(target=self._loop.run_forever, name="raw-http-server", daemon=True)
        self._thread.start()
        started = asyncio.start_server(self._serve, "127.0.0.1", 0)
        self._server = asyncio.run_coroutine_threadsafe(started, self._loop).result(5)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = self.accepts
        self.accepts += 1
        self.open_now += 1
        self.max_open = max(self.max_open, self.open_now)
        try:
            while (request := await read_request(reader, conn)) is not None:
                self.requests.append(request)
                if not await self.handler(request, reader, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.open_now -= 1
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            self.ended += 1
            self._tasks.discard(task)

    def stop(self) -> None:
        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(5)
        self._loop.close()


@pytest.fixture
def raw_server() -> Iterator[Callable[[Handler], RawServer]]:
    """``raw_server(handler)``: a started `RawServer`, stopped after the test."""
    servers: list[RawServer] = []

    def start(handler: Handler) -> RawServer:
        server = RawServer(handler).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


# -- replies ------------------------------------------------------------------------------------


def completion(text: str) -> bytes:
    """A chat-completion body whose answer is `text`."""
    message = {"role": "assistant", "content": text}
    return json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}).encode()


def http_reply(body: bytes, *, status: str = "200 OK", headers: str = "Content-Type: application/json\r\n") -> bytes:
    """A whole reply with a Content-Length."""
    return f"HTTP/1.1 {status}\r\n{headers}Content-Length: {len(body)}\r\n\r\n".encode() + body


def chunked(*pieces: bytes) -> bytes:
    """`pieces` as a chunked body, with its last chunk."""
    return b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in pieces if p) + b"0\r\n\r\n"


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def sse(*texts: str) -> bytes:
    """A streamed chat completion of `texts`, ending with a finish reason and ``[DONE]``."""
    events = [{"choices": [{"index": 0, "delta": {"content": text}}]} for text in texts]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(b"data: " + json.dumps(event).encode() + b"\n\n" for event in events) + b"data: [DONE]\n\n"


def asked(request: Received) -> str:
    """What a request asks: the last message of a chat request, else its body."""
    try:
        return str(json.loads(request.body)["messages"][-1]["content"])
    except (ValueError, KeyError, TypeError):
        return request.body.decode()


async def send(writer: asyncio.StreamWriter, data: bytes, *, step: int = 0, pause: float = 0.0) -> None:
    """Write `data` in pieces of `step` bytes (0: at once), waiting `pause` seconds after each."""
    pieces = [data[i : i + step] for i in range(0, len(data), step)] if step else [data]
    for piece in pieces:
        writer.write(piece)
        await writer.drain()
        if pause:
            await asyncio.sleep(pause)


def echo(delay: float = 0.0) -> Handler:
    """Answers each request with what it asked, after `delay` seconds, keeping the connection."""

    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(delay)
        await send(writer, http_reply(completion(asked(request))))
        return True

    return handle


async def until_eof(reader: asyncio.StreamReader) -> bool:
    """Wait until the client closes the connection (a server that never answers)."""
    await reader.read()
    return False


# -- clients ------------------------------------------------------------------------------------


def llm_for(
    server: RawServer,
    *,
    key: str | None = None,
    retry: int = 1,
    timeout: float = 30.0,
    stream_timeout: float | None = None,
    max_connections: int = 1024,
) -> AsyncGPTAPI:
    """An async chat client of `server`: no key, one attempt, short limits."""
    return AsyncGPTAPI(
        "m",
        api_base=server.base_url,
        key=key,
        retry=retry,
        timeout=timeout,
        stream_timeout=stream_timeout,
        max_connections=max_connections,
        backoff_base=0.01,
    )


def lean_pools(llm: AsyncGPTAPI | GPTAPI) -> PerLoop[Connections]:
    http = llm._transport.http
    assert isinstance(http, LeanClient)
    return http.pool


HANG_BOUND = Limits(30.0)
"""The limit of requests that must succeed: a bound for a hang only, never reached on a crowded machine."""


async def fetch(pool: Connections, body: bytes = b"{}", limits: Limits = HANG_BOUND) -> tuple[int, bytes]:
    """One ``POST /`` through `pool`: the status and the whole body."""
    async with await pool.request("POST", "/", body, JSON, limits) as response:
        return response.status, await response.read()


async def stream_text(llm: AsyncGPTAPI) -> str:
    """The text of a streamed answer, as its last item has it."""
    items = [text async for _status, text, _final in llm.stream_chat(HI)]
    return items[-1]


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


async def until(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.005)


@pytest.fixture
def deliveries(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of each piece of the reply the client's connections were handed by the socket."""
    sizes: list[int] = []
    original = _http1._Connection.data_received

    def counting(self: _http1._Connection, data: bytes) -> None:
        sizes.append(len(data))
        original(self, data)

    monkeypatch.setattr(_http1._Connection, "data_received", counting)
    return sizes


# -- 1, 2: keep-alive and the connection limit --------------------------------------------------


def test_sequential_requests_share_one_connection(raw_server: Callable[[Handler], RawServer]) -> None:
    server = raw_server(echo())
    llm = llm_for(server)

    async def run() -> list[str]:
        return [await llm.chat(f"q{i}") for i in range(6)]

    assert asyncio.run(run()) == [f"q{i}" for i in range(6)]
    assert server.accepts == 1
    assert [request.conn for request in server.requests] == [0] * 6


def test_concurrent_requests_open_several_connections_and_reuse_them(
    raw_server: Callable[[Handler], RawServer],
) -> None:
    server = raw_server(echo(delay=0.05))
    llm = llm_for(server)

    async def run() -> tuple[list[str], int, list[str]]:
        first = await asyncio.gather(*(llm.chat(f"a{i}") for i in range(4)))
        opened = server.accepts
        second = await asyncio.gather(*(llm.chat(f"b{i}") for i in range(4)))
        return list(first), opened, list(second)

    first, opened, second = asyncio.run(run())
    assert first == [f"a{i}" for i in range(4)] and second == [f"b{i}" for i in range(4)]
    assert opened == 4  # four at once: four connections
    assert server.accepts == 4  # and the second round reused all of them
    assert {request.conn for request in server.requests[4:]} == {0, 1, 2, 3}


@pytest.mark.parametrize("k", [1, 3])
def test_max_connections_caps_the_connections_open_at_once(raw_server: Callable[[Handler], RawServer], k: int) -> None:
    server = raw_server(echo(delay=0.03))
    llm = llm_for(server, max_connections=k)

    async def run() -> list[str]:
        return list(await asyncio.gather(*(llm.chat(f"q{i}") for i in range(3 * k))))

    assert asyncio.run(run()) == [f"q{i}" for i in range(3 * k)]
    assert server.max_open <= k
    assert server.accepts == k  # the waiting requests took the freed connections
    assert len(server.requests) == 3 * k


def test_waiting_for_a_free_connection_counts_against_the_deadline(
    raw_server: Callable[[Handler], RawServer],
) -> None:
    server = raw_server(echo(delay=3.0))

    async def run() -> float:
        pool = Connections(server.origin, max_connections=1)
        slow = asyncio.create_task(fetch(pool, b"slow"))
        await until(lambda: server.accepts == 1, "the slow request holds the only connection")
        start = time.perf_counter()
        with pytest.raises(TimeoutError):
            await fetch(pool, b"late", Limits(0.2))
        waited = time.perf_counter() - start
        assert not slow.done()  # it gave up while the connection was still held: the wait counted
        assert await slow == (200, completion("slow"))
        await pool.close()
        return waited

    assert asyncio.run(run()) > 0.15
    assert server.accepts == 1 and [asked(r) for r in server.requests] == ["slow"]


def test_a_waiter_cancelled_as_it_is_woken_passes_the_connection_on(
    raw_server: Callable[[Handler], RawServer],
) -> None:
    server = raw_server(echo())

    async def run() -> tuple[int, bytes]:
        pool = Connections(server.origin, max_connections=1)
        holder = await pool.request("POST", "/", b"first", JSON, HANG_BOUND)
        await holder.read()
        woken = asyncio.create_task(fetch(pool, b"cancelled", Limits(None)))
        other = asyncio.create_task(fetch(pool, b"other", Limits(None)))
        await asyncio.sleep(0.05)  # both wait for the one connection
        await holder.__aexit__(None, None, None)  # gives it back: wakes `woken`...
        woken.cancel()  # ...which gives up before it could take it
        try:
            return await asyncio.wait_for(other, 30.0)  # a bound for a hang: the connection was passed on
        finally:
            await pool.close()

    assert asyncio.run(run()) == (200, completion("other"))
    assert [asked(r) for r in server.requests] == ["first", "other"]


# -- 3: a kept-alive connection the server closed -----------------------------------------------


@pytest.mark.parametrize("when", ["while idle", "as the next request arrives"])
def test_a_kept_alive_connection_the_server_closed_is_replaced(
    raw_server: Callable[[Handler], RawServer], when: str
) -> None:
    dropped: list[int] = []

    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await send(writer, http_reply(completion(asked(request))))  # keep-alive: no Connection: close
        if when == "as the next request arrives" and request.conn == 0:
            dropped.append(len(await reader.read(1)))  # the next request came: close without reading it
        return False

    server = raw_server(handle)
    llm = llm_for(server)

    async def run() -> list[str]:
        first = await llm.chat("one")
        if when == "while idle":
            await until(lambda: server.ended == 1, "the server closed the connection")
            await asyncio.sleep(0.02)
        return [first, await llm.chat("two")]

    assert asyncio.run(run()) == ["one", "two"]
    assert [asked(r) for r in server.requests] == ["one", "two"]  # each received exactly once
    assert [r.conn for r in server.requests] == [0, 1]
    assert server.accepts == 2
    assert dropped == ([1] if when == "as the next request arrives" else [])


def test_a_request_that_meets_a_stale_connection_is_resent_once_on_a_fresh_one(
    raw_server: Callable[[Handler], RawServer],
) -> None:
    stale: list[int] = []  # the connections the next request reached before the server closed them

    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await send(writer, http_reply(completion(asked(request))))  # keep-alive: no Connection: close
        if asked(request).startswith("warm"):
            if await reader.read(1):  # the next request came: close without reading it
                stale.append(request.conn)
            return False
        return True

    server = raw_server(handle)
    llm = llm_for(server)

    async def run() -> list[str]:
        warm = await asyncio.gather(*(llm.chat(f"warm{i}") for i in range(3)))  # three connections kept alive
        return [*warm, await llm.chat("next")]

    assert asyncio.run(run()) == ["warm0", "warm1", "warm2", "next"]
    assert len(stale) == 1  # one stale connection tried, not every idle one
    assert server.accepts == 4 and server.requests[-1].conn == 3  # then a fresh one
    assert [asked(r) for r in server.requests] == ["warm0", "warm1", "warm2", "next"]


def test_a_fresh_connection_closed_without_a_reply_is_not_resent(raw_server: Callable[[Handler], RawServer]) -> None:
    async def hang_up(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        return False

    server = raw_server(hang_up)
    with pytest.raises(LLMConnectionError, match="broke before the response was complete") as info:
        asyncio.run(llm_for(server).chat(HI))
    assert info.value.attempts == 1
    assert server.accepts == 1 and len(server.requests) == 1


def test_an_idle_connection_older_than_idle_seconds_is_not_reused(
    raw_server: Callable[[Handler], RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_http1, "IDLE_SECONDS", 0.05)
    server = raw_server(echo())
    llm = llm_for(server)

    async def run() -> list[str]:
        answers = [await llm.chat("a"), await llm.chat("b")]
        await asyncio.sleep(0.1)
        answers.append(await llm.chat("c"))
        return answers

    assert asyncio.run(run()) == ["a", "b", "c"]
    assert [r.conn for r in server.requests] == [0, 0, 1]
    wait_until(lambda: server.ended == 2, "both connections are closed")


# -- 4: framing ---------------------------------------------------------------------------------


def test_a_chunked_reply_split_everywhere_is_read_whole(
    raw_server: Callable[[Handler], RawServer], deliveries: list[int]
) -> None:
    body = bytes(range(256)) * 3 + b"end"
    # chunk-size lines of several hex digits (upper and lower case), a chunk extension, trailers
    wire = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"1A\r\n"
        + body[:26]
        + b"\r\n"
        + f"{len(body) - 26:x};name=value\r\n".encode()
        + body[26:]
        + b"\r\n"
        + b"0\r\nX-Trailer: 1\r\nContent-Type: text/evil\r\n\r\n"
    )

    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await send(writer, wire, step=3, pause=0.0005)  # 3-byte pieces: every line is cut somewhere
        return True

    server = raw_server(handle)

    async def run() -> list[tuple[int, bytes, str | None, str | None]]:
        pool = Connections(server.origin)
        seen = []
        for _ in range(2):
            async with await pool.request("POST", "/", b"{}", JSON, HANG_BOUND) as response:
                got = await response.read()
                seen.append(
                    (response.status, got, response.headers.get("content-type"), response.headers.get("x-trailer"))
                )
        await pool.close()
        return seen

    # trailers are not headers: they neither show up among them nor replace one
    assert asyncio.run(run()) == [(200, body, "text/plain", None)] * 2
    assert server.accepts == 1  # read to its last chunk: the connection was reused
    assert len(deliveries) > 40  # the reply really came in many pieces


def test_a_content_length_reply_sent_byte_by_byte_is_read_whole(
    raw_server: Callable[[Handler], RawServer], deliveries: list[int]
) -> None:
    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await send(writer, http_reply(completion(asked(request))), step=1, pause=0.0005)
        return True

    server = raw_server(handle)
    llm = llm_for(server)

    async def run() -> list[str]:
        return [await llm.chat("byte by byte"), await llm.chat("again")]

    assert asyncio.run(run()) == ["byte by byte", "again"]
    assert server.accepts == 1
    assert len(deliveries) > 40


def test_a_close_delimited_reply_is_read_whole_and_its_connection_not_reused(
    raw_server: Callable[[Handler], RawServer],
) -> None:
    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await send(writer, b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        await send(writer, completion(asked(request)), step=7, pause=0.001)
        return False  # the end of the body is the end of the connection

    server = raw_server(handle)
    llm = llm_for(server)

    async def run() -> list[str]:
        return [await llm.chat("until the end"), await llm.chat("again")]

    assert asyncio.run(run()) == ["until the end", "again"]
    assert server.accepts == 2


def test_a_http10_reply_without_keep_alive_is_not_reused(raw_server: Callable[[Handler], RawServer]) -> None:
    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        body = completion(asked(request))
        await send(writer, f"HTTP/1.0 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        return True  # the server would take another, but HTTP/1.0 without keep-alive says it will not

    server = raw_server(handle)
    llm = llm_for(server)

    async def run() -> list[str]:
        return [await llm.chat("one"), await llm.chat("two")]

    assert asyncio.run(run()) == ["one", "two"]
    assert server.accepts == 2


@pytest.mark.parametrize("interim", ["103 Early Hints\r\nLink: </style.css>; rel=preload", "100 Continue"])
def test_interim_replies_before_the_real_one_are_skipped(
    raw_server: Callable[[Handler], RawServer], interim: str
) -> None:
    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await send(writer, f"HTTP/1.1 {interim}\r\n\r\n".encode())
        await asyncio.sleep(0.01)
        await send(writer, http_reply(b"real", headers="X-Real: yes\r\n"))
        return True

    server = raw_server(handle)

    async def run() -> list[tuple[int, str | None, str | None, bytes]]:
        pool = Connections(server.origin)
        seen = []
        for _ in range(2):
            async with await pool.request("POST", "/", b"{}", JSON, HANG_BOUND) as response:
                body = await response.read()
                seen.append((response.status, response.headers.get("x-real"), response.headers.get("link"), body))
        await pool.close()
        return seen

    assert asyncio.run(run()) == [(200, "yes", None, b"real")] * 2
    assert server.accepts == 1


def test_a_close_delimited_reply_cut_by_a_reset_is_an_error(raw_server: Callable[[Handler], RawServer]) -> None:
    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await send(writer, b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"x" * 100)
        await asyncio.sleep(0.05)  # the client has read it
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # an abortive close: RST, not FIN
        return False

    server = raw_server(handle)

    async def run() -> None:
        pool = Connections(server.origin)
        try:
            with pytest.raises(ConnectionError):
                await fetch(pool)
        finally:
            await pool.close()

    asyncio.run(run())
    assert server.accepts == 1


# -- 5: broken replies through the chat client -------------------------------------------------


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_reply_cut_mid_body_is_a_connection_error(raw_server: Callable[[Handler], RawServer], framing: str) -> None:
    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        if framing == "content-length":
            await send(writer, b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + completion("cut")[:20])
        else:
            await send(writer, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + completion("cut")[:20])
        return False

    server = raw_server(handle)
    with pytest.raises(LLMConnectionError, match="connection broke before the response was complete") as info:
        asyncio.run(llm_for(server, retry=1).chat(HI))
    assert info.value.attempts == 1
    assert server.accepts == 1


@pytest.mark.parametrize(
    "garbage",
    [b"SSH-2.0-OpenSSH_9.6\r\n", b"HTTP/1.1 abc nonsense\r\n\r\n", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"],
)
def test_garbage_instead_of_http_is_a_connection_error(
    raw_server: Callable[[Handler], RawServer], garbage: bytes
) -> None:
    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await send(writer, garbage)
        return await until_eof(reader)  # the client must give up by itself

    server = raw_server(handle)
    with pytest.raises(LLMConnectionError, match="broke before the response was complete"):
        asyncio.run(llm_for(server, retry=1, timeout=30.0).chat(HI))
    wait_until(lambda: server.ended == 1, "the client closed the connection")


def test_a_protocol_switch_is_a_connection_error_and_nothing_is_logged(
    raw_server: Callable[[Handler], RawServer],
) -> None:
    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await send(writer, b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nxx")
        return await until_eof(reader)

    server = raw_server(handle)
    problems: list[dict[str, object]] = []

    async def run() -> str:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: problems.append(context))
        return await llm_for(server, retry=1).chat(HI)

    with pytest.raises(LLMConnectionError):
        asyncio.run(run())
    assert problems == []  # no "protocol.data_received() call failed" from the event loop


def test_a_closed_port_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once it is closed
    llm = AsyncGPTAPI("m", api_base=f"http://127.0.0.1:{port}/v1", key=None, retry=1, timeout=30.0)
    with pytest.raises(LLMConnectionError, match="could not reach the server") as info:
        asyncio.run(llm.chat(HI))
    assert info.value.attempts == 1


# -- 6: time limits -----------------------------------------------------------------------------


def test_a_server_that_never_answers_times_out_within_the_timeout(raw_server: Callable[[Handler], RawServer]) -> None:
    async def silent(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        return await until_eof(reader)

    server = raw_server(silent)
    start = time.perf_counter()
    with pytest.raises(LLMTimeoutError, match="timed out") as info:
        asyncio.run(llm_for(server, timeout=0.3).chat(HI))
    # only the time limit can end it (the server never answers): not before it, one attempt
    assert time.perf_counter() - start > 0.25 and info.value.attempts == 1
    wait_until(lambda: server.ended == 1, "the client closed the connection")


def test_a_body_that_trickles_in_hits_the_whole_exchange_limit(raw_server: Callable[[Handler], RawServer]) -> None:
    async def trickle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await send(writer, b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        with contextlib.suppress(ConnectionError):
            await send(writer, b" " * 3000, step=1, pause=0.02)  # a byte every 20 ms for 60 s: no read waits long
        return False

    server = raw_server(trickle)
    start = time.perf_counter()
    with pytest.raises(LLMTimeoutError):
        asyncio.run(llm_for(server, timeout=0.3).chat(HI))
    # the 0.3 s limit of the whole exchange ended it, long before the 60 s trickle could (per-read limits never would)
    assert 0.25 < time.perf_counter() - start < 30


def test_a_stalled_stream_times_out_per_read_and_its_connection_is_dropped(
    raw_server: Callable[[Handler], RawServer],
) -> None:
    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        if request.conn == 0:  # headers and a first event, then nothing
            await send(writer, CHUNKED_HEAD + f"{len(sse('x')[:60]):x}\r\n".encode() + sse("x")[:60] + b"\r\n")
            return await until_eof(reader)
        await send(writer, CHUNKED_HEAD + chunked(sse("fine")))
        return True

    server = raw_server(handle)
    llm = llm_for(server, timeout=0.2, stream_timeout=60)  # only the per-read limit can end it soon

    async def run() -> tuple[float, str]:
        start = time.perf_counter()
        with pytest.raises(LLMTimeoutError, match="timed out") as info:
            await stream_text(llm)
        waited = time.perf_counter() - start
        assert "deadline" not in str(info.value)  # the per-read limit, not the attempt's deadline
        await until(lambda: server.ended == 1, "the client closed the stalled connection")
        return waited, await stream_text(llm)

    waited, text = asyncio.run(run())
    assert 0.15 < waited < 30
    assert text == "fine"
    assert [r.conn for r in server.requests] == [0, 1]  # the stalled connection was not reused


def test_a_stream_whose_server_never_answers_times_out_per_read(raw_server: Callable[[Handler], RawServer]) -> None:
    async def silent(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        return await until_eof(reader)

    server = raw_server(silent)
    start = time.perf_counter()
    with pytest.raises(LLMTimeoutError, match="timed out") as info:
        asyncio.run(stream_text(llm_for(server, timeout=0.2, stream_timeout=60)))
    # the wait for the headers is a read: the 0.2 s per-read limit ends it, not the 60 s deadline
    assert "deadline" not in str(info.value) and time.perf_counter() - start < 30


def test_a_stream_kept_open_by_comments_ends_at_its_deadline(raw_server: Callable[[Handler], RawServer]) -> None:
    async def pings(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await send(writer, CHUNKED_HEAD)
        with contextlib.suppress(ConnectionError):
            for _ in range(200):
                await send(writer, chunked(b": ping\n\n")[:-5])  # one chunk, not the last
                await asyncio.sleep(0.05)
        return False

    server = raw_server(pings)
    start = time.perf_counter()
    with pytest.raises(LLMTimeoutError, match=r"did not finish within its 0\.5 s deadline"):
        asyncio.run(stream_text(llm_for(server, timeout=0.2, stream_timeout=0.5)))  # pings for 10 s otherwise
    assert time.perf_counter() - start > 0.45


# -- 7: big replies -----------------------------------------------------------------------------


def test_a_body_over_max_body_bytes_is_refused_without_reading_it_all(
    raw_server: Callable[[Handler], RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_http1, "MAX_BODY_BYTES", 64 * 1024)
    declared = 64 * 1024 * 1024
    sent: list[int] = [0]

    async def flood(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        piece = b"x" * 65536
        await send(writer, f"HTTP/1.1 200 OK\r\nContent-Length: {declared}\r\n\r\n".encode())
        with contextlib.suppress(ConnectionError):
            while sent[0] < declared:
                writer.write(piece)
                await writer.drain()
                sent[0] += len(piece)
        return False

    server = raw_server(flood)
    with pytest.raises(LLMResponseError, match="too long: the reply is longer than 65536 bytes"):
        asyncio.run(llm_for(server, timeout=30.0).chat(HI))
    wait_until(lambda: server.ended == 1, "the client closed the connection")
    assert sent[0] < declared // 2  # the client stopped reading long before the end


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A small pause threshold; records each time a connection pauses and resumes reading."""
    monkeypatch.setattr(_http1, "_PAUSE_AT", 2048)
    events: list[str] = []
    pause, resume = _http1._Connection.pause, _http1._Connection.resume

    def pausing(self: _http1._Connection) -> None:
        was = self.reads_paused
        pause(self)
        if self.reads_paused and not was:
            events.append("pause")

    def resuming(self: _http1._Connection) -> None:
        was = self.reads_paused
        resume(self)
        if was and not self.reads_paused:
            events.append("resume")

    monkeypatch.setattr(_http1._Connection, "pause", pausing)
    monkeypatch.setattr(_http1._Connection, "resume", resuming)
    return events


BIG = hashlib.sha256(b"seed").digest() * 32768  # 1 MiB that is not all one byte


def big_reply(framing: str) -> bytes:
    if framing == "chunked":
        pieces = [BIG[i : i + 10000] for i in range(0, len(BIG), 10000)]
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(*pieces)
    return http_reply(BIG, headers="")


def big_body_server(raw_server: Callable[[Handler], RawServer], framing: str) -> RawServer:
    """A server that answers every request with the 1 MiB `BIG` body, sent in 64 KiB writes."""

    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await send(writer, big_reply(framing), step=65536)
        return True

    return raw_server(handle)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_streamed_body_far_over_the_pause_threshold_arrives_intact(
    raw_server: Callable[[Handler], RawServer], pauses: list[str], framing: str
) -> None:
    server = big_body_server(raw_server, framing)

    async def run() -> tuple[bytes, int, bytes]:
        pool = Connections(server.origin)
        got = bytearray()
        async with await pool.request("GET", "/", b"", {}, HANG_BOUND) as response:
            async for piece in response.chunks():
                got += piece
                if len(got) % 7 == 0:
                    await asyncio.sleep(0)  # a consumer that is sometimes slow
        after = await fetch(pool)  # the connection is still in step
        await pool.close()
        return bytes(got), after[0], after[1]

    got, status, body = asyncio.run(run())
    assert got == BIG
    assert status == 200 and body == BIG
    assert "pause" in pauses and "resume" in pauses  # the threshold was crossed and reading went on
    assert server.accepts == 1


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_read_whole_may_exceed_the_pause_threshold(
    raw_server: Callable[[Handler], RawServer], pauses: list[str], framing: str
) -> None:
    server = big_body_server(raw_server, framing)

    async def run() -> list[tuple[int, bytes]]:
        pool = Connections(server.origin)
        try:
            return [await fetch(pool, limits=HANG_BOUND), await fetch(pool, limits=HANG_BOUND)]
        finally:
            await pool.close()

    assert asyncio.run(run()) == [(200, BIG), (200, BIG)]
    assert server.accepts == 1


def test_a_long_sse_stream_through_stream_chat_with_pauses(
    raw_server: Callable[[Handler], RawServer], pauses: list[str]
) -> None:
    words = [f"w{i} " for i in range(3000)]

    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        events = sse(*words)
        pieces = [events[i : i + 5000] for i in range(0, len(events), 5000)]
        await send(writer, CHUNKED_HEAD + chunked(*pieces), step=32768)
        return True

    server = raw_server(handle)
    assert asyncio.run(stream_text(llm_for(server))) == "".join(words)
    assert "pause" in pauses and "resume" in pauses


# -- 8: header injection ------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["sk-secret-42\r\nX-Injected: yes", "sk-secret-42\nX", "sk-secret-42\u20ac"])
def test_a_key_that_would_break_the_request_head_is_refused_unsent(
    raw_server: Callable[[Handler], RawServer], key: str
) -> None:
    server = raw_server(echo())
    with pytest.raises(UserError, match="API key 1 holds") as info:
        asyncio.run(llm_for(server, key=key).chat(HI))
    shown = [str(info.value), repr(info.value), *map(repr, info.value.args)]
    cause = info.value.__cause__ or info.value.__context__
    if cause is not None:
        shown += [str(cause), repr(cause)]
    assert not any("secret-42" in text for text in shown), shown
    assert server.accepts == 0  # refused before a connection was even opened


def test_a_header_name_with_a_line_break_is_refused_unsent(raw_server: Callable[[Handler], RawServer]) -> None:
    server = raw_server(echo())

    async def run() -> None:
        pool = Connections(server.origin)
        for headers in ({"X-A\r\nX-Injected": "1"}, {"X-A: 1\r\nX": "1"}, {"X-A": "1\r\n\r\nGET / HTTP/1.1"}):
            with pytest.raises(ValueError, match="line break or a colon"):
                await pool.request("POST", "/", b"{}", headers, Limits(1.0))
        await pool.close()

    asyncio.run(run())
    assert server.accepts == 0


# -- 9: bytes nobody asked for ------------------------------------------------------------------


def test_bytes_sent_on_an_idle_connection_retire_it(raw_server: Callable[[Handler], RawServer]) -> None:
    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await send(writer, http_reply(completion(asked(request))))
        if request.conn == 0:
            await asyncio.sleep(0.02)
            await send(writer, http_reply(completion("unsolicited")))
        return True

    server = raw_server(handle)
    llm = llm_for(server)

    async def run() -> list[str]:
        first = await llm.chat("one")
        # the unsolicited reply arrives while the connection is idle: the client closes it
        await until(lambda: server.ended == 1, "the client closed the first connection")
        return [first, await llm.chat("two")]

    assert asyncio.run(run()) == ["one", "two"]
    assert [r.conn for r in server.requests] == [0, 1]


def test_a_second_reply_right_behind_the_first_is_not_read_as_its_body(
    raw_server: Callable[[Handler], RawServer],
) -> None:
    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        extra = http_reply(b"smuggled") if request.conn == 0 else b""
        await send(writer, http_reply(b"real") + extra)  # one write: both replies arrive together
        return True

    server = raw_server(handle)

    async def run() -> list[tuple[int, bytes]]:
        pool = Connections(server.origin)
        try:
            return [await fetch(pool), await fetch(pool)]
        finally:
            await pool.close()

    assert asyncio.run(run()) == [(200, b"real"), (200, b"real")]
    assert [r.conn for r in server.requests] == [0, 1]  # the connection that said too much was dropped


# -- 10: lifecycle ------------------------------------------------------------------------------


def test_one_async_client_over_two_event_loops_closes_each_loops_connections(
    raw_server: Callable[[Handler], RawServer],
) -> None:
    server = raw_server(echo())
    llm = llm_for(server)
    pools: list[weakref.ref[Connections]] = []

    async def run(text: str) -> str:
        answer = await llm.chat(text)
        pools.append(weakref.ref(await lean_pools(llm).get()))
        return answer

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert asyncio.run(run("first loop")) == "first loop"
        first = pools[0]()
        assert first is not None and first.closed and not first._open and not first._idle
        del first
        wait_until(lambda: server.ended == 1, "the first loop's connection is closed")
        assert asyncio.run(run("second loop")) == "second loop"
        assert server.accepts == 2  # a pool per loop
        wait_until(lambda: server.ended == 2, "the second loop's connection is closed")
        gc.collect()
    assert pools[0]() is None  # the closed loop's pool was let go
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_aclose_closes_the_connections_and_a_later_call_opens_new_ones(
    raw_server: Callable[[Handler], RawServer],
) -> None:
    server = raw_server(echo())

    async def run() -> list[str]:
        async with llm_for(server) as llm:
            answers = list(await asyncio.gather(llm.chat("a"), llm.chat("b")))
            pool = await lean_pools(llm).get()
            await llm.aclose()
            assert pool.closed and not pool._open
            await until(lambda: server.ended == 2, "the server saw both connections close")
            answers.append(await llm.chat("c"))
        await until(lambda: server.ended == 3, "the context manager closed the last one")
        return answers

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert asyncio.run(run()) == ["a", "b", "c"]
        gc.collect()
    assert server.accepts == 3
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_the_sync_client_reuses_connections_and_closes_them(raw_server: Callable[[Handler], RawServer]) -> None:
    async def handle(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        if json.loads(request.body).get("stream"):
            await send(writer, CHUNKED_HEAD + chunked(sse("streamed ", "too")), step=16, pause=0.001)
        else:
            await send(writer, http_reply(completion(asked(request))))
        return True

    server = raw_server(handle)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with GPTAPI("m", api_base=server.base_url, key=None, retry=1, timeout=30.0) as llm:
            assert [llm.chat(f"q{i}") for i in range(3)] == ["q0", "q1", "q2"]
            assert list(llm.stream_chat(HI))[-1][1] == "streamed too"
            assert server.accepts == 1
        wait_until(lambda: server.ended == 1, "close() closed the connection")
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_the_sync_client_maps_failures_too(raw_server: Callable[[Handler], RawServer]) -> None:
    async def cut(request: Received, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await send(writer, b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{")
        return False

    server = raw_server(cut)
    llm = GPTAPI("m", api_base=server.base_url, key=None, retry=2, backoff_base=0.01, timeout=30.0)
    with llm, pytest.raises(LLMConnectionError, match="broke before the response was complete") as info:
        llm.chat(HI)
    assert info.value.attempts == 2 and server.accepts == 2


# -- 11: the request head -----------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, "sk-test-123"])
def test_the_request_carries_the_expected_headers(raw_server: Callable[[Handler], RawServer], key: str | None) -> None:
    server = raw_server(echo())
    assert asyncio.run(llm_for(server, key=key).chat("héllo ✓")) == "héllo ✓"
    (request,) = server.requests
    assert request.method == "POST" and request.target == "/v1/chat/completions"
    assert request.headers["host"] == f"127.0.0.1:{server.port}"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["content-length"] == str(len(request.body))
    assert request.headers["accept-encoding"] == "identity"  # nothing here would decompress a reply
    assert json.loads(request.body)["messages"] == [{"role": "user", "content": "héllo ✓"}]
    if key is None:
        assert "authorization" not in request.headers
    else:
        assert request.headers["authorization"] == f"Bearer {key}"
    assert "transfer-encoding" not in request.headers


def test_the_lean_client_serves_plain_http_only() -> None:
    assert isinstance(
        client_for("http://127.0.0.1:8000/v1", proxy=None, trust_env=False, max_connections=4), LeanClient
    )
    for url, proxy, trust_env in [
        ("https://127.0.0.1:8000/v1", None, False),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:3128", False),
        ("http://127.0.0.1:8000/v1", None, True),
        ("http://user:pw@127.0.0.1:8000/v1", None, False),
    ]:
        assert isinstance(client_for(url, proxy=proxy, trust_env=trust_env, max_connections=4), AiohttpClient)
