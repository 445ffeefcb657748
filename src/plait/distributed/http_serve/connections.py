"""How much of a server one client can hold: connections per address, deadlines, a way in for health checks (private).

`ConnectionGate` admits every connection a server accepts, by the client's address
(`client_of`: an IPv4 address, or an IPv6 address's /64 network):

* **Caps.** At most ``max_connections`` open at once, and at most ``per_client`` of them
  from one client address: a client hoarding sockets holds its own share, nobody else's.
* **A reserved way in.** A connection over a cap takes one of ``reserved`` extra slots while
  one is free (at most `RESERVE_PER_CLIENT` per client address) and may send one request
  within `RESERVE_DEADLINE_S` (or the header timeout, if shorter): a health check
  (``health_paths``) is answered, anything else gets a 503, then it is closed. So an
  operator's health check is answered even while the caps are reached. Beyond the reserve a
  connection is answered at once, 503 (the server is full) or 429 (this client address holds
  its share), and closed once the client has read it (after at most `REFUSAL_LINGER_S`, and at
  once while more than ``max_connections`` refusals linger).
* **Deadlines.** A connection with no request in progress is closed after ``idle_timeout``
  seconds (before its first request too). Once the first byte of a request head has
  arrived, the head must be complete within ``header_timeout`` seconds, else the client gets
  a 408 and the connection is closed: a client dripping partial headers (slowloris) is cut,
  however often it sends a byte.

`listen` (`plait.distributed.http_serve.access`) puts a server behind a gate: its protocol
factory wraps each aiohttp `RequestHandler`, and its middleware (installed outermost) tells
the gate when a request's head was parsed and when its answer is done.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import Callable, Collection
from typing import Literal, cast

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from ...exceptions import UserError

__all__ = [
    "REFUSAL_LINGER_S",
    "RESERVE_DEADLINE_S",
    "RESERVE_PER_CLIENT",
    "ConnectionGate",
    "client_of",
    "raw_response",
]

RESERVE_PER_CLIENT = 2
"""Reserved slots one client address may hold at once."""

RESERVE_DEADLINE_S = 2.0
"""How long a connection in a reserved slot may take to send its one request (at most)."""

REFUSAL_LINGER_S = 1.0
"""How long a refused connection stays half-open for its client to read the refusal (closing a socket
with a request unread resets it, and the client would see a reset instead of the answer)."""

_State = Literal["idle", "head", "busy", "refused"]


def client_of(peer: object) -> str:
    """The client a connection's peer address counts for: the IPv4 address, the IPv6 /64, or ``''`` (no address)."""
    host = peer[0] if isinstance(peer, tuple) and peer else ""
    try:
        address = ipaddress.ip_address(str(host).split("%", 1)[0])
    except ValueError:
        return str(host)  # a Unix socket: one client
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network((address, 64), strict=False))
    return str(address)


def raw_response(status: int, reason: str, message: str, *, retry_after: int | None = None) -> bytes:
    """A complete HTTP/1.1 answer with a JSON error body that closes the connection."""
    kind = reason.replace(" ", "")
    body = json.dumps({"error": {"type": kind, "message": message}}).encode()
    retry = f"Retry-After: {retry_after}\r\n" if retry_after is not None else ""
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n{retry}\r\n"
    )
    return head.encode() + body


_FULL = raw_response(503, "Service Unavailable", "too many open connections; retry later", retry_after=1)
_SHARE = raw_response(
    429, "Too Many Requests", "too many open connections from this address; retry later", retry_after=1
)
_SLOW_HEAD = raw_response(408, "Request Timeout", "the request head did not arrive in time")


class _Connection(asyncio.Protocol):
    """One accepted connection: admitted (an aiohttp handler behind it) or refused, and its deadlines."""

    __slots__ = ("client", "gate", "inner", "reserved", "state", "timer", "transport")

    def __init__(self, gate: ConnectionGate) -> None:
        self.gate = gate
        self.inner: asyncio.Protocol | None = None
        self.transport: asyncio.Transport | None = None
        self.client = ""
        self.reserved = False
        self.state: _State = "idle"
        self.timer: asyncio.TimerHandle | None = None

    # -- asyncio's calls, passed on to the handler ------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # no isinstance check: uvloop's transports subclass none of asyncio's (Ray workers run uvloop)
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        self.client = client_of(transport.get_extra_info("peername"))
        refusal = self.gate.admit(self)
        if refusal is not None:
            self._refuse(transport, refusal)
            return
        self.inner = self.gate.handler()
        self.inner.connection_made(transport)
        self._arm(self.gate.reserve_deadline if self.reserved else self.gate.idle_timeout)

    def _refuse(self, transport: asyncio.Transport, refusal: bytes) -> None:
        """Answer, then close once the client has read it (its request is read and dropped meanwhile)."""
        transport.write(refusal)
        if len(self.gate.lingering) >= self.gate.max_connections or not transport.can_write_eof():
            transport.close()  # a flood of refusals is closed at once
            return
        try:
            transport.write_eof()
        except OSError:  # the client is gone already
            transport.abort()
            return
        self.state = "refused"
        self.gate.lingering.add(self)
        self._arm(REFUSAL_LINGER_S)

    def data_received(self, data: bytes) -> None:
        if self.inner is None:  # a refused connection: its request is dropped
            return
        if self.state == "idle":  # the first byte of a request head: its deadline starts
            self.state = "head"
            if not self.reserved:  # a reserved slot's deadline runs from its opening
                self._arm(self.gate.header_timeout)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self.state == "refused":
            self.gate.lingering.discard(self)
        if self.inner is not None:
            self.gate.release(self)
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    # -- requests (told by the gate's middleware) ---------------------------------------------------
    def began(self) -> None:
        """A request's head was parsed: no deadline while it is answered (a reserved slot keeps its own)."""
        self.state = "busy"
        if not self.reserved:
            self._disarm()

    def ended(self) -> None:
        """Its answer is done: the connection is idle until the next request's first byte."""
        self.state = "idle"
        if not self.reserved:
            self._arm(self.gate.idle_timeout)

    # -- deadlines ----------------------------------------------------------------------------------
    def _arm(self, seconds: float) -> None:
        self._disarm()
        self.timer = asyncio.get_running_loop().call_later(seconds, self._expire)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expire(self) -> None:
        self.timer = None
        transport = self.transport
        if transport is None or transport.is_closing() or (self.state == "busy" and not self.reserved):
            return
        if self.state == "refused":
            transport.abort()
            return
        if self.state == "idle" and transport.get_write_buffer_size():  # still sending its last answer
            self._arm(self.gate.idle_timeout)
            return
        if self.state == "head":
            self.gate.heads_cut += 1
            transport.write(_SLOW_HEAD)
        else:
            self.gate.idle_closed += 1
        transport.close()


class ConnectionGate:
    """Admits a server's connections (see the module docstring).

    Args:
        max_connections: Connections open at once (the reserved slots not counted).
        per_client: Connections open at once from one client address.
        reserved: Extra slots beyond the caps, for `health_paths` only (0: none).
        health_paths: The paths a reserved slot answers.
        header_timeout: Seconds from a request head's first byte until it must be complete.
        idle_timeout: Seconds a connection may wait for its next request's first byte.

    Raises:
        UserError: A cap below 1, a negative reserve, or a timeout that is not positive.
    """

    def __init__(
        self,
        max_connections: int = 512,
        per_client: int = 64,
        *,
        reserved: int = 0,
        health_paths: Collection[str] = (),
        header_timeout: float = 10.0,
        idle_timeout: float = 15.0,
    ) -> None:
        if max_connections < 1 or per_client < 1 or reserved < 0:
            raise UserError("max_connections and the per-client cap must be at least 1, reserved at least 0")
        if not (header_timeout > 0 and idle_timeout > 0):
            raise UserError("header_timeout and idle_timeout must be positive (seconds)")
        self.max_connections = max_connections
        self.per_client = per_client
        self.reserved = reserved
        self.health_paths = frozenset(health_paths)
        self.header_timeout = header_timeout
        self.idle_timeout = idle_timeout
        self.reserve_deadline = min(header_timeout, RESERVE_DEADLINE_S)
        self.open = 0
        self.open_reserved = 0
        self.lingering: set[_Connection] = set()
        self.admitted = 0
        self.refused = 0
        self.heads_cut = 0
        self.idle_closed = 0
        self._by_client: dict[str, int] = {}
        self._reserved_by: dict[str, int] = {}
        self._connections: dict[asyncio.BaseTransport, _Connection] = {}
        self._server: web.Server | None = None

    def __repr__(self) -> str:
        return (
            f"ConnectionGate(open={self.open}, reserved={self.open_reserved}, admitted={self.admitted}, "
            f"refused={self.refused}, "
            f"heads_cut={self.heads_cut})"
        )

    def close(self) -> None:
        """Close every connection still open (a server stopping: after its handlers shut down)."""
        for connection in [*self.lingering, *self._connections.values()]:
            if connection.transport is not None:
                connection.transport.abort()

    def held_by(self, client: str) -> int:
        """Connections open from a client address (`client_of`), its reserved slots included."""
        return self._by_client.get(client, 0) + self._reserved_by.get(client, 0)

    def factory(self, server: web.Server) -> Callable[[], asyncio.Protocol]:
        """The protocol factory for ``loop.create_server``: `server`'s handlers, behind this gate."""
        self._server = server
        return lambda: _Connection(self)

    def handler(self) -> asyncio.Protocol:
        """A new aiohttp handler of the gated server."""
        assert self._server is not None, "ConnectionGate.factory was not called"
        handler: asyncio.Protocol = self._server()
        return handler

    def admit(self, connection: _Connection) -> bytes | None:
        """Count a new connection in (its slot), or the answer that refuses it."""
        client = connection.client
        if self.open < self.max_connections and self._by_client.get(client, 0) < self.per_client:
            self.open += 1
            self._by_client[client] = self._by_client.get(client, 0) + 1
        elif self.open_reserved < self.reserved and self._reserved_by.get(client, 0) < RESERVE_PER_CLIENT:
            connection.reserved = True
            self.open_reserved += 1
            self._reserved_by[client] = self._reserved_by.get(client, 0) + 1
        else:
            self.refused += 1
            return _FULL if self.open >= self.max_connections else _SHARE
        self.admitted += 1
        assert connection.transport is not None
        self._connections[connection.transport] = connection
        return None

    def release(self, connection: _Connection) -> None:
        """Count an admitted connection out: it closed."""
        assert connection.transport is not None
        if self._connections.pop(connection.transport, None) is None:
            return
        client = connection.client
        counts = self._reserved_by if connection.reserved else self._by_client
        left = counts[client] - 1
        if left:
            counts[client] = left
        else:
            del counts[client]
        if connection.reserved:
            self.open_reserved -= 1
        else:
            self.open -= 1

    def middleware(self) -> Middleware:
        """The aiohttp middleware (outermost): requests start and end; a reserved slot answers only the health check."""

        @web.middleware
        async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
            transport = request.transport
            connection = self._connections.get(transport) if transport is not None else None
            if connection is None:
                return await handler(request)
            connection.began()
            try:
                if connection.reserved and request.path not in self.health_paths:
                    response: web.StreamResponse = web.json_response(
                        {"error": {"type": "ServiceUnavailable", "message": "too many open connections; retry later"}},
                        status=503,
                        headers={"Retry-After": "1"},
                    )
                else:
                    response = await handler(request)
                if connection.reserved:
                    response.force_close()  # one request per reserved slot
                return response
            finally:
                connection.ended()

        return gate
