"""The client side of an MCP connection: JSON-RPC 2.0 over any transport (private).

`ClientSession` matches responses to requests by id, answers the server's own requests
(``ping``, and the `handlers` it is given: elicitation, sampling; anything else gets
"method not found"), performs the ``initialize`` handshake
and offers the calls plait needs: the ``tools``, ``resources`` and ``prompts`` lists (all
pages), ``tools/call``, ``resources/read`` and ``prompts/get``; resources and prompts only
of a server whose capabilities announce them. A server's
``notifications/tools/list_changed`` bumps `ClientSession.tools_version`.
A transport only moves JSON objects; see `plait.actions.mcp._transports`.

Everything here runs on one event loop (the toolkit's private loop thread).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol

from ..._version import __version__
from ...exceptions import MCPError
from ...types import JSONValue
from ._client_requests import ELICIT, Handler, RequestRefused
from ._protocol import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSIONS,
    error_message,
    notification_message,
    request_message,
    result_message,
)

__all__ = ["PROTOCOL_VERSIONS", "ClientSession", "RPCError", "Transport"]

logger = logging.getLogger(__name__)

TOOLS_CHANGED = "notifications/tools/list_changed"
#: What is asked of a server only when it announced the capability (tools are asked of every server).
UNLISTED_UNLESS_OFFERED = ("resources", "prompts")

Deliver = Callable[[JSONValue], None]
Closed = Callable[[str], None]


class Transport(Protocol):
    """Moves JSON-RPC messages between this client and one server."""

    async def start(self, deliver: Deliver, closed: Closed) -> None:
        """Connect; hand every message received to `deliver`, and a reason to `closed` when the link ends."""

    async def send(self, message: Mapping[str, JSONValue]) -> None:
        """Send one message (raises `MCPError` when it cannot be delivered)."""

    async def close(self) -> None:
        """Disconnect and release everything (idempotent)."""

    def set_protocol_version(self, version: str) -> None:
        """The version the handshake settled on (HTTP sends it as a header)."""


class RPCError(MCPError):
    """The server answered a request with a JSON-RPC error object.

    Attributes:
        code: The JSON-RPC error code (``-32602`` invalid params, ``-32601`` unknown method...).
        data: The error's ``data`` member, if any.
    """

    def __init__(self, message: str, code: int, data: JSONValue = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


class ClientSession:
    """One initialized MCP client session over `transport`.

    Args:
        transport: The connection to the server.
        timeout: Seconds a request may take before it is cancelled (``None``: no limit).
        connect_timeout: Seconds the server may take to start and answer ``initialize``.
        handlers: Answers to the server's own requests by method (``elicitation/create``...).
        client_capabilities: What the handshake announces (the capabilities of `handlers`).
    """

    def __init__(
        self,
        transport: Transport,
        timeout: float | None = 60.0,
        connect_timeout: float | None = 30.0,
        handlers: Mapping[str, Handler] | None = None,
        client_capabilities: Mapping[str, JSONValue] | None = None,
    ) -> None:
        self.transport = transport
        self.handlers = dict(handlers or {})
        self.client_capabilities = dict(client_capabilities or {})
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.server_info: dict[str, JSONValue] = {}
        self.capabilities: dict[str, JSONValue] = {}
        self.instructions = ""
        self.protocol_version = ""
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[JSONValue]] = {}
        self._closed_reason: str | None = None
        self.tools_version = 0  # bumped by each notifications/tools/list_changed
        self._holds = 0  # server requests waiting on a person: the requests' clocks are stopped
        self._held = 0.0  # seconds the clocks stood still, in spells that ended
        self._held_from = 0.0
        self._released = asyncio.Event()

    @property
    def closed(self) -> bool:
        """Whether the link to the server has ended."""
        return self._closed_reason is not None

    # -- lifecycle ----------------------------------------------------------------------------
    async def open(self) -> None:
        """Connect and run the ``initialize`` handshake.

        Raises:
            MCPError: The server could not be reached or refused the handshake.
        """
        await self.transport.start(self._receive, self._lost)
        params: dict[str, JSONValue] = {
            "protocolVersion": PROTOCOL_VERSIONS[0],
            "capabilities": dict(self.client_capabilities),
            "clientInfo": {"name": "plait", "version": __version__},
        }
        result = _members("initialize", await self._request("initialize", params, self.connect_timeout))
        version = str(result.get("protocolVersion", ""))
        if version not in PROTOCOL_VERSIONS:
            raise MCPError(f"the MCP server speaks protocol {version!r}; plait supports {', '.join(PROTOCOL_VERSIONS)}")
        self.protocol_version = version
        self.transport.set_protocol_version(version)
        capabilities = result.get("capabilities")
        self.capabilities = dict(capabilities) if isinstance(capabilities, Mapping) else {}
        server_info = result.get("serverInfo")
        self.server_info = dict(server_info) if isinstance(server_info, Mapping) else {}
        self.instructions = str(result.get("instructions") or "")
        await self.notify("notifications/initialized")

    async def close(self) -> None:
        """End the session: pending requests fail, the transport is closed."""
        self._lost("the MCP session was closed")
        await self.transport.close()

    # -- requests -----------------------------------------------------------------------------
    async def request(self, method: str, params: Mapping[str, JSONValue] | None = None) -> JSONValue:
        """Send a request and wait for its result (at most `timeout` seconds).

        The seconds the server's elicitation requests wait on a person do not count.

        Raises:
            RPCError: The server answered with an error.
            MCPError: The link broke, or the request timed out (it is then cancelled).
        """
        return await self._request(method, params, self.timeout)

    async def _request(self, method: str, params: Mapping[str, JSONValue] | None, limit: float | None) -> JSONValue:
        if self._closed_reason is not None:
            raise MCPError(self._closed_reason)
        request_id = next(self._ids)
        future: asyncio.Future[JSONValue] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        message = request_message(request_id, method, params)

        async def exchange() -> JSONValue:
            await self.transport.send(message)  # over HTTP the answer may arrive while this runs
            return await future

        try:
            return await self._within(exchange(), limit)
        except asyncio.TimeoutError:
            await self._cancel(request_id, f"no answer in {limit} s")
            raise MCPError(f"the MCP server did not answer {method} within {limit} s") from None
        finally:
            self._pending.pop(request_id, None)
            if future.done() and not future.cancelled():
                future.exception()  # failed by a lost link while the send failed too: seen, not "never retrieved"

    def _running(self) -> float:
        """The loop's clock, less the time a person was being asked (`_answer` of an elicitation)."""
        now = asyncio.get_running_loop().time()
        return now - self._held - (now - self._held_from if self._holds else 0.0)

    async def _within(self, work: Coroutine[Any, Any, JSONValue], limit: float | None) -> JSONValue:
        """`work`'s result within `limit` seconds, not counting the time a person was asked meanwhile.

        Raises:
            asyncio.TimeoutError: The time ran out (`work` is cancelled).
        """
        task = asyncio.ensure_future(work)
        if limit is None:
            return await task
        deadline = self._running() + limit
        try:
            while True:
                released = asyncio.ensure_future(self._released.wait()) if self._holds else None
                left = None if released is not None else deadline - self._running()
                if left is not None and left <= 0:
                    raise asyncio.TimeoutError
                done, _ = await asyncio.wait({task, *([released] if released else [])}, timeout=left)
                if released is not None:
                    released.cancel()
                if task in done:
                    return task.result()
        finally:
            if not task.done():
                task.cancel()

    def _hold(self, holding: bool) -> None:
        """Stop (True) or restart (False) the requests' clocks while a person is asked."""
        now = asyncio.get_running_loop().time()
        if holding:
            self._holds += 1
            if self._holds == 1:
                self._held_from = now
                self._released.clear()
        else:
            self._holds -= 1
            if self._holds == 0:
                self._held += now - self._held_from
                self._released.set()

    async def notify(self, method: str, params: Mapping[str, JSONValue] | None = None) -> None:
        """Send a notification (no answer expected)."""
        await self.transport.send(notification_message(method, params))

    def offers(self, kind: str) -> bool:
        """Whether the server announced capability `kind` (``resources``, ``prompts``...) in the handshake."""
        return isinstance(self.capabilities.get(kind), Mapping)

    async def list_all(self, kind: str, key: str = "name") -> list[dict[str, JSONValue]]:
        """Every item of ``{kind}/list`` (``tools``, ``resources``, ``prompts``), following ``nextCursor`` pages.

        Items without a `key` member are left out. Resources and prompts are asked only of a
        server that announced them (else ``[]``); tools are always asked for.
        """
        if kind in UNLISTED_UNLESS_OFFERED and not self.offers(kind):
            return []
        items: list[dict[str, JSONValue]] = []
        cursor: JSONValue = None
        method = f"{kind}/list"
        for _ in range(1000):  # a server that pages forever is a bug, not a reason to hang
            result = _members(method, await self.request(method, {"cursor": cursor} if cursor else None))
            listed = result.get(kind)
            if isinstance(listed, list):
                items.extend(dict(t) for t in listed if isinstance(t, Mapping) and t.get(key))
            cursor = result.get("nextCursor")
            if not cursor:
                break
        return items

    async def list_tools(self) -> list[dict[str, JSONValue]]:
        """Every tool the server offers (following ``nextCursor`` pages)."""
        return await self.list_all("tools")

    async def call_tool(self, name: str, arguments: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
        """The raw ``tools/call`` result (``content``, ``structuredContent``, ``isError``)."""
        result = await self.request("tools/call", {"name": name, "arguments": dict(arguments)})
        return dict(result) if isinstance(result, Mapping) else {"content": []}

    async def fetch(self, method: str, params: Mapping[str, JSONValue]) -> Mapping[str, JSONValue]:
        """A request whose result must be an object (``resources/read``, ``prompts/get``).

        Raises:
            MCPError: The server failed, answered with something else, or does not offer
                ``resources`` / ``prompts`` (it is then not asked).
        """
        kind = method.partition("/")[0]
        if kind in UNLISTED_UNLESS_OFFERED and not self.offers(kind):
            raise MCPError(f"the MCP server does not offer {kind} (its capabilities: {sorted(self.capabilities)})")
        return _members(method, await self.request(method, params))

    async def _cancel(self, request_id: int, reason: str) -> None:
        if self._closed_reason is None:
            try:
                await self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})
            except MCPError:
                logger.debug("could not tell the MCP server to cancel request %s", request_id)

    # -- incoming -----------------------------------------------------------------------------
    def _receive(self, message: JSONValue) -> None:
        """Handle one message from the server (a response, a request, or a notification)."""
        if not isinstance(message, Mapping):
            logger.debug("MCP: ignoring a message that is not an object: %r", message)
            return
        if "method" in message:
            if "id" in message:
                asyncio.get_running_loop().create_task(self._answer(message))
            elif message.get("method") == TOOLS_CHANGED:
                self.tools_version += 1
            else:
                logger.debug("MCP notification %s", message.get("method"))
            return
        request_id = message.get("id")
        future = self._pending.get(request_id) if isinstance(request_id, int) else None  # plait's ids are ints
        if future is None or future.done():
            logger.debug("MCP: a response to no pending request: %r", message.get("id"))
            return
        error = message.get("error")
        if isinstance(error, Mapping):
            text = str(error.get("message") or "error")
            code = error.get("code") or 0
            number = int(code) if isinstance(code, (int, float, str)) else 0
            future.set_exception(RPCError(text, number, error.get("data")))
        else:
            future.set_result(message.get("result") or {})

    async def _answer(self, request: Mapping[str, JSONValue]) -> None:
        """Answer a request the server sent: ``ping``, the methods of `handlers`; others are not offered."""
        method = str(request.get("method"))
        handler = self.handlers.get(method)
        params = request.get("params")
        reply: dict[str, JSONValue]
        if method == "ping":
            reply = result_message(request["id"], {})
        elif handler is None:
            reply = error_message(request["id"], METHOD_NOT_FOUND, f"method not supported by plait: {method}")
        else:
            asks_a_person = method == ELICIT
            if asks_a_person:
                self._hold(True)  # a person may take minutes: the tool call's clock stands still
            try:
                reply = result_message(request["id"], await handler(params if isinstance(params, Mapping) else {}))
            except RequestRefused as exc:
                reply = error_message(request["id"], exc.code, str(exc))
            except Exception as exc:  # a failing model or approver: the server gets an error, plait goes on
                logger.exception("answering the MCP server's %s request failed", method)
                reply = error_message(request["id"], INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
            finally:
                if asks_a_person:
                    self._hold(False)
        try:
            await self.transport.send(reply)
        except MCPError:
            logger.debug("could not answer the MCP server's %s request", request.get("method"))

    def _lost(self, reason: str) -> None:
        """The link ended: fail every pending request with `reason`."""
        if self._closed_reason is None:
            self._closed_reason = reason
        for future in self._pending.values():
            if not future.done():
                future.set_exception(MCPError(reason))


def _members(method: str, result: JSONValue) -> Mapping[str, JSONValue]:
    """The members of a result that must be a JSON object.

    Raises:
        MCPError: It is something else.
    """
    if not isinstance(result, Mapping):
        raise MCPError(f"the MCP server answered {method} with {type(result).__name__}, not an object")
    return result


async def open_session(
    transport: Transport,
    timeout: float | None,
    connect_timeout: float | None = 30.0,
    handlers: Mapping[str, Handler] | None = None,
    client_capabilities: Mapping[str, JSONValue] | None = None,
) -> ClientSession:
    """A `ClientSession` over `transport`, initialized; the transport is closed if that fails."""
    session = ClientSession(transport, timeout, connect_timeout, handlers, client_capabilities)
    try:
        await session.open()
    except BaseException:
        await session.close()
        raise
    return session
