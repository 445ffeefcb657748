"""How `MCPServer` meets its clients: stdio, and Streamable HTTP with aiohttp (private).

* `serve_stdio`: newline-delimited JSON-RPC on stdin/stdout, one session for the process.
  While it runs, file descriptor 1 points at stderr, so whatever the tools (or programs
  they start) print cannot corrupt the protocol; messages go to a private copy of the
  original stdout. Requests run concurrently; a line over the size limit or that is not
  JSON gets a parse error, and serving goes on.
* `HTTPEndpoint`: ``POST /mcp`` (each message; the answer is one JSON body),
  ``DELETE /mcp`` (end the session), ``GET /mcp`` 405 (this server never sends
  unprompted messages). ``initialize`` opens a session whose id the ``Mcp-Session-Id``
  header carries; other requests without a known one get 400/404, and a message whose id
  an answer cannot carry gets its JSON-RPC error with 400. Sessions are capped per tenant
  (one per named token) under an overall ceiling (`plait.actions.mcp._pool`): a tenant at
  its cap ends its own least recently used idle session, never another's; with no room,
  ``initialize`` gets 429 (the tenant's sessions are all busy) or 503 (the server is
  full). Bearer tokens, JSON error bodies and the loopback default come from
  `plait.distributed.http_serve.access`, as for ``plait serve``; a ``Host`` or ``Origin``
  off the allow-list (`plait.actions.mcp._hosts`: DNS rebinding, browsers' cross-site
  requests) gets 403, bodies over the limit 413. A request the client cancels
  (``notifications/cancelled``) stops, and its response ends with a -32800 error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Final

from aiohttp import web

from ...distributed.http_serve.access import AccessControl, listen
from ...distributed.http_serve.connections import ConnectionGate
from ...exceptions import ParseError
from ...types import JSONValue
from ...untrusted import clean, loads
from ._hosts import HostAllowList
from ._pool import NoRoom, SessionPool
from ._protocol import (
    INVALID_REQUEST,
    PARSE_ERROR,
    PROTOCOL_VERSIONS,
    REQUEST_CANCELLED,
    SERVER_BUSY,
    answerable_id,
    error_message,
)
from .server import MCPServer, ServerSession

__all__ = ["HTTPEndpoint", "serve_forever", "serve_stdio"]

logger = logging.getLogger(__name__)

MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""The longest JSON-RPC line read from stdin."""
_TOO_LONG: Final = b"\0too long"


def dumps(message: Mapping[str, JSONValue]) -> str:
    """One message as JSON text (lone surrogates replaced, so it always encodes as UTF-8)."""
    try:
        return json.dumps(clean(dict(message)), ensure_ascii=False)
    except (ParseError, TypeError, ValueError) as exc:  # a result nested absurdly deep, or not JSON
        failed = error_message(message.get("id"), -32603, f"the answer could not be encoded: {exc}")
        return json.dumps(failed, ensure_ascii=True)


# -- stdio ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def protected_stdout() -> Iterator[IO[bytes]]:
    """A private copy of stdout for the protocol, with fd 1 (and ``sys.stdout``) sent to stderr meanwhile."""
    sys.stdout.flush()
    saved = os.dup(1)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    previous, sys.stdout = sys.stdout, sys.stderr
    try:
        yield out
    finally:
        sys.stdout = previous
        os.dup2(saved, 1)
        os.close(saved)
        out.close()


def _read_lines(stream: IO[bytes], put: Callable[[bytes | None], None], limit: int) -> None:
    """Hand each line of `stream` to `put` (`_TOO_LONG` once for a line over `limit` bytes), then None."""
    skipping = False
    try:
        while line := stream.readline(limit + 1):
            if len(line) > limit:
                if not skipping:
                    put(_TOO_LONG)
                skipping = not line.endswith(b"\n")
            elif skipping:
                skipping = not line.endswith(b"\n")
            else:
                put(line)
    except (OSError, ValueError) as exc:  # stdin closed under us
        logger.debug("reading stdin failed: %s", exc)
    finally:
        put(None)


async def serve_stdio(
    server: MCPServer, stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None, limit: int = MAX_LINE_BYTES
) -> None:
    """Serve one client on stdin/stdout (or the given streams) until its input ends."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()

    def put(item: bytes | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is listening
            loop.call_soon_threadsafe(lines.put_nowait, item)

    source = stdin if stdin is not None else sys.stdin.buffer
    threading.Thread(target=_read_lines, args=(source, put, limit), name="plait-mcp-stdin", daemon=True).start()
    session = server.open_session()
    with contextlib.nullcontext(stdout) if stdout is not None else protected_stdout() as out:

        def write(message: Mapping[str, JSONValue]) -> None:
            with contextlib.suppress(OSError, ValueError):  # the client is gone; its input ends next
                out.write(dumps(message).encode("utf-8") + b"\n")
                out.flush()

        async def answer(message: object) -> None:
            reply = await server.handle(message, session)
            if reply is not None:
                write(reply)

        tasks: set[asyncio.Task[None]] = set()
        while (line := await lines.get()) is not None:
            if line == _TOO_LONG:
                write(error_message(None, PARSE_ERROR, f"a message over {limit} bytes"))
                continue
            if not line.strip():
                continue
            try:
                message = loads(line)
            except ParseError as exc:
                write(error_message(None, PARSE_ERROR, exc.err_msg))
                continue
            task = asyncio.create_task(answer(message))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks, return_exceptions=True)  # answer what was asked before the input ended
        await server.close_session(session)


# -- Streamable HTTP -----------------------------------------------------------------------------


def _rpc(
    body: Mapping[str, JSONValue], status: int = 200, session_id: str | None = None, retry: bool = False
) -> web.Response:
    headers = {"Mcp-Session-Id": session_id} if session_id else {}
    if retry:
        headers["Retry-After"] = "1"
    return web.Response(status=status, text=dumps(body), content_type="application/json", headers=headers)


class HTTPEndpoint:
    """`server` on ``/mcp`` of an aiohttp application (see the module docstring).

    Args:
        server: The server whose tools to serve.
        token: None, one bearer token, or ``{tenant: token}``.
        max_body_bytes: The largest request body.
        max_sessions: Sessions kept at once, all tenants together.
        max_connections: Open connections at once; more are answered 503 (429 beyond one
            client address's share, `ConnectionGate`'s default) and closed.
        max_sessions_per_tenant: Sessions one tenant keeps at once (None: `max_sessions`
            split evenly between the tenants).
        allowed_hosts: The ``Host`` (and ``Origin``) values answered, `HostAllowList`'s
            entries (None: the loopback names and the listening address).

    Raises:
        UserError: A cap under 1, a tenant's over `max_sessions`, or a malformed allowed host.
    """

    def __init__(
        self,
        server: MCPServer,
        token: str | Mapping[str, str] | None,
        max_body_bytes: int,
        max_sessions: int,
        max_connections: int = 512,
        max_sessions_per_tenant: int | None = None,
        allowed_hosts: Sequence[str] | None = None,
    ) -> None:
        self.server = server
        self.allowed_hosts = None if allowed_hosts is None else tuple(allowed_hosts)
        self.hosts = HostAllowList(self.allowed_hosts)
        self.access = AccessControl(token)
        self.max_connections = max_connections
        fair = max(1, max_sessions // len(self.access.tenants))
        self.sessions = SessionPool(max_sessions, fair if max_sessions_per_tenant is None else max_sessions_per_tenant)
        self.app = web.Application(client_max_size=max_body_bytes, middlewares=[self.access.middleware()])
        self.app.add_routes([web.post("/mcp", self.post), web.delete("/mcp", self.delete), web.get("/mcp", self.get)])
        self._runner: web.AppRunner | None = None
        self._listener: asyncio.Server | None = None
        self.gate = ConnectionGate(max_connections)

    async def start(self, host: str, port: int, insecure: bool) -> str:
        """Listen; returns the endpoint's URL.

        Raises:
            UserError: A non-loopback `host` without a token (and without `insecure`).
        """
        self.hosts = HostAllowList(self.allowed_hosts, host)
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=1.0)
        self._listener = await listen(
            self._runner,
            host,
            port,
            access=self.access,
            insecure=insecure,
            gate=self.gate,
            what="run its tools",
        )
        bound = self._listener.sockets[0].getsockname()[1] if self._listener.sockets else port
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{bound}/mcp"

    async def stop(self) -> None:
        """End every session and stop listening."""
        for session in self.sessions.drain():
            await self.server.close_session(session)
        if self._listener is not None:
            self._listener.close()
            await self._listener.wait_closed()
            self._listener = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.gate.close()

    def _check_hosts(self, request: web.Request) -> None:
        """Refuse a ``Host`` or ``Origin`` off the allow-list (DNS rebinding, a browser page of another site): 403."""
        problem = self.hosts.problem(request.headers.get("Host"), request.headers.get("Origin"))
        if problem is not None:
            raise web.HTTPForbidden(reason=problem)

    @staticmethod
    def _tenant(request: web.Request) -> str:
        """The caller's tenant (``''`` with one token or none)."""
        return str(AccessControl.scope(request, "")).rstrip("/")

    def _session(self, request: web.Request) -> ServerSession | None:
        """The caller's session named by ``Mcp-Session-Id`` (None: unknown, ended, or another tenant's)."""
        return self.sessions.get(self._tenant(request), request.headers.get("Mcp-Session-Id", ""))

    async def post(self, request: web.Request) -> web.Response:
        """One JSON-RPC message; its answer as JSON (202 when there is none)."""
        self._check_hosts(request)
        try:
            message = loads(await request.read())
        except ParseError as exc:
            return _rpc(error_message(None, PARSE_ERROR, exc.err_msg), 400)
        version = request.headers.get("MCP-Protocol-Version")
        if version is not None and version not in PROTOCOL_VERSIONS:
            text = (
                f"unsupported MCP-Protocol-Version {version[:40]!r}; this server speaks {', '.join(PROTOCOL_VERSIONS)}"
            )
            return _rpc(error_message(answerable_id(message), INVALID_REQUEST, text), 400)
        fresh = "Mcp-Session-Id" not in request.headers
        if fresh:
            if not (isinstance(message, Mapping) and message.get("method") == "initialize"):
                text = "no Mcp-Session-Id header: open a session with initialize first"
                return _rpc(error_message(answerable_id(message), INVALID_REQUEST, text), 400)
            session = self.server.open_session(self._tenant(request))
        else:
            found = self._session(request)
            if found is None:
                text = "unknown or ended MCP session: initialize a new one"
                return _rpc(error_message(answerable_id(message), INVALID_REQUEST, text), 404)
            session = found
        reply = await self.server.handle(message, session)
        if reply is None:
            request_id = answerable_id(message)
            if request_id is None or not isinstance(message, Mapping) or "method" not in message:
                return web.Response(status=202)  # a notification or a response
            # A request the client cancelled: its stream still ends with an answer for its id,
            # as the official SDK's server does on this revision of the protocol.
            return _rpc(error_message(request_id, REQUEST_CANCELLED, "Request cancelled"), session_id=session.id)
        if fresh and "result" in reply:
            try:
                evicted = self.sessions.admit(session)
            except NoRoom as full:
                return _rpc(error_message(reply["id"], SERVER_BUSY, str(full)), full.status, retry=True)
            if evicted is not None:
                await self.server.close_session(evicted)
        status = 400 if reply.get("id") is None else 200  # a message no answer can be matched to
        return _rpc(reply, status, session_id=session.id if "result" in reply or not fresh else None)

    async def delete(self, request: web.Request) -> web.Response:
        """End the caller's session (its tools forget it)."""
        self._check_hosts(request)
        session = self._session(request)
        if session is None:
            return _rpc(error_message(None, INVALID_REQUEST, "unknown or ended MCP session"), 404)
        self.sessions.remove(session)
        await self.server.close_session(session)
        return web.Response(status=204)

    async def get(self, request: web.Request) -> web.Response:
        """405: this server sends nothing unprompted, so it offers no event stream."""
        self._check_hosts(request)
        raise web.HTTPMethodNotAllowed("GET", ["POST", "DELETE"])


async def serve_forever(
    server: MCPServer,
    host: str,
    port: int,
    token: str | Mapping[str, str] | None,
    insecure: bool,
    allowed_hosts: Sequence[str] | None = None,
) -> None:
    """Serve Streamable HTTP until SIGINT or SIGTERM (the URL is printed on stderr)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not on every platform/thread
            loop.add_signal_handler(signum, stop.set)
    async with server.serve_http(host, port, token=token, insecure=insecure, allowed_hosts=allowed_hosts) as url:
        sys.stderr.write(f"plait MCP server {server.name!r} on {url}\n")
        sys.stderr.flush()
        await stop.wait()
