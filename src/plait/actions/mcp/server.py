"""`MCPServer`: plait tools (and agents) served to any MCP client, over stdio or Streamable HTTP.

```python
from plait.actions import Calculator
from plait.actions.mcp import MCPServer

server = MCPServer([Calculator()], name="calc")
server.run()                                             # stdio: for Claude Desktop, Cursor...
server.run(transport="streamable-http", port=8000)       # http://127.0.0.1:8000/mcp
```

Each API of a toolkit is its own MCP tool, named and described as plait describes it for
native tool calling (``Toolkit__api``, the same JSON Schema). An agent in the list is one
tool taking ``message`` and answering with its reply (`AgentTool`).

Calls go through one `ActionExecutor` flow (its hooks, the interceptors, the tools' own
argument parsing), run on the server's event loop (sync tools in worker threads). What a
tool returns becomes MCP content (text; images and audio saved as files are sent inline,
other files as ``resource_link`` parts); a tool whose return annotation is a pydantic
model, ``TypedDict`` or dataclass advertises an ``outputSchema`` and answers with
``structuredContent`` too. A failed call or bad arguments come back as ``isError``
results the model can read. A tool that requires a person's approval
(``requires_approval``) is not run: no one can approve over MCP, so the call comes back as
an ``isError`` result saying so. Protocol errors: malformed JSON-RPC (-32600), an unknown
method (-32601), and invalid params (-32602): a pagination cursor (this server lists every
tool at once) or a tool name ``tools/list`` did not give (plait's dotted ``Toolkit.api``
is not one). A request the client cancels (``notifications/cancelled``) stops.

Sessions: each MCP session (one per stdio process, one per ``Mcp-Session-Id`` over HTTP)
is its own plait ``session_id``, so stateful tools (interpreters, agents' memories) keep
one state per client; when a session ends, the tools' ``close_session`` and
``clear_session_state`` forget it. Over HTTP each tenant (named token) has a session cap
of its own, and ending a session to make room only ever ends the same tenant's
(`plait.actions.mcp._pool`).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import logging
import uuid
from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..._version import __version__
from ...agents.module import AgentModule
from ...driver import run_async
from ...exceptions import UserError
from ...interceptors import Interceptor
from ...schema import ActionReturn, ActionStatusCode, AgentMessage, FunctionCall
from ...types import JSONValue
from ..action_executor import ActionExecutorCore, AsyncActionExecutor
from ._agent_tool import AgentTool
from ._output import OutputTypes, structured_content
from ._protocol import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSIONS,
    answerable_id,
    content_items,
    error_message,
    result_message,
)

__all__ = ["MCPServer", "ServerSession"]

logger = logging.getLogger(__name__)


@dataclass
class ServerSession:
    """One MCP client's session.

    Attributes:
        id: The session's id (the ``Mcp-Session-Id`` over HTTP).
        plait_session: The ``session_id`` its tool calls run in.
        owner: Who opened it (the tenant, over HTTP with named tokens).
        protocol_version: The revision agreed at ``initialize``.
        calls: Requests in flight, by JSON-RPC id (``notifications/cancelled`` cancels them).
    """

    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    plait_session: Hashable = ""
    owner: str = ""
    protocol_version: str = PROTOCOL_VERSIONS[0]
    calls: dict[int | str, asyncio.Task[Any]] = field(default_factory=dict)


def _malformed(message: Mapping[str, JSONValue], request_id: int | str | None) -> str | None:
    """Why `message` (not a response) is no valid JSON-RPC 2.0 request or notification (None: it is one)."""
    if message.get("jsonrpc") != "2.0":
        return 'the message is not JSON-RPC 2.0 (it needs "jsonrpc": "2.0")'
    if "id" in message and request_id is None:
        return "a request's id must be a string or an integer"
    if not isinstance(message.get("method"), str):
        return "a request needs its method as a string" if "method" in message else "the message has no method"
    if not isinstance(message.get("params", {}), (Mapping, list)):
        return "params must be an object or an array"
    return None


def _unknown_tool(name: str, names: Sequence[str]) -> str:
    """The error message for a call of `name`, which is none of `names`: the closest one and all of them."""
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    listed = f" Available tools: {', '.join(names)}." if names else " This server has no tools."
    return f"There is no tool named {name[:100]!r}.{hint}{listed}"


class _Refusal(Exception):
    """A request the protocol rejects: answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class MCPServer:
    """Plait actions, toolkits and agents as the tools of an MCP server.

    Args:
        actions: Actions (instances, classes, config dicts, plain functions), agents, or an
            executor whose tools and hooks to serve (a sync `ActionExecutor` works too).
        name: The server's name, shown by clients.
        instructions: Text the server offers clients about how to use its tools.
        interceptors: Interceptors around every tool call (besides the global ones).

    Raises:
        UserError: Two tools share a name, or an item is not an action or agent.
    """

    def __init__(
        self,
        actions: ActionExecutorCore | Sequence[object] | object,
        name: str = "plait",
        instructions: str | None = None,
        *,
        interceptors: Sequence[Interceptor] = (),
    ) -> None:
        if isinstance(actions, ActionExecutorCore):
            self.executor: ActionExecutorCore = actions
        else:
            items: list[Any] = list(actions) if isinstance(actions, (list, tuple)) else [actions]
            self.executor = AsyncActionExecutor([AgentTool(a) if isinstance(a, AgentModule) else a for a in items])
        self.name = name
        self.instructions = instructions
        self.interceptors = tuple(interceptors)
        self._outputs: tuple[tuple[tuple[str, int], ...], OutputTypes] | None = None

    def __repr__(self) -> str:
        return f"MCPServer(name={self.name!r}, tools={[t['name'] for t in self.tools()]})"

    # -- the protocol ----------------------------------------------------------------------------
    def tools(self) -> list[dict[str, JSONValue]]:
        """The ``tools/list`` entries: name, description and JSON Schema of every enabled API.

        A tool whose return annotation is a pydantic model, ``TypedDict`` or dataclass has
        an ``outputSchema`` too (`plait.actions.mcp._output`).
        """
        outputs = self._output_types()
        listed: list[dict[str, JSONValue]] = []
        for tool in self.executor.openai_tools():
            name = tool["function"]["name"]
            entry: dict[str, JSONValue] = {
                "name": name,
                "description": tool["function"]["description"],
                "inputSchema": tool["function"]["parameters"],
            }
            schema = outputs.schema(self.executor.resolve_name(name))
            if schema is not None:
                entry["outputSchema"] = schema
            listed.append(entry)
        return listed

    def _output_types(self) -> OutputTypes:
        """The tools' structured return types, read again only when the set of tools changes."""
        key = tuple((name, id(action)) for name, action in self.executor.actions.items())
        if self._outputs is None or self._outputs[0] != key:
            self._outputs = (key, OutputTypes(self.executor.actions.values()))
        return self._outputs[1]

    async def handle(self, message: object, session: ServerSession) -> dict[str, JSONValue] | None:
        """The answer to one JSON-RPC message from a client (None for notifications and responses).

        Never raises for what the client sent: every request with an id gets exactly one
        answer, a notification none; a malformed message gets an invalid-request error
        (with its id when it has one an answer can carry). A request the client cancels
        (``notifications/cancelled``) stops, and gets no answer: None, as the spec asks.
        """
        if not isinstance(message, Mapping):
            what = "a JSON array (batches are not supported)" if isinstance(message, list) else "not a JSON object"
            return error_message(None, INVALID_REQUEST, f"the message is {what}")
        if "method" not in message and ("result" in message or "error" in message):
            return None  # a response to a request of ours: this server sends none
        request_id = answerable_id(message)
        problem = _malformed(message, request_id)
        if problem is not None:
            return error_message(request_id, INVALID_REQUEST, problem)
        method, params = str(message["method"]), message.get("params", {})  # a string: _malformed checked it
        if request_id is None:  # no id at all (a bad one was refused above): a notification
            self._notified(method, params, session)
            return None
        if not isinstance(params, Mapping):
            return error_message(request_id, INVALID_PARAMS, "params must be an object")
        # The request runs as a task of its own, so that ``notifications/cancelled`` stops it
        # and nothing else: over HTTP the current task is the request handler, which must live
        # on to end the request's response.
        work = asyncio.ensure_future(self._answer(method, params, session))
        session.calls[request_id] = work
        try:
            await asyncio.wait([work])
        except asyncio.CancelledError:  # the caller went away (the session ended, the server stops)
            work.cancel()
            raise
        finally:
            if session.calls.get(request_id) is work:
                del session.calls[request_id]
        if work.cancelled():
            return None  # cancelled by the client: the spec wants no answer (HTTP ends the request itself)
        try:
            return result_message(request_id, work.result())
        except _Refusal as refusal:
            return error_message(request_id, refusal.code, str(refusal))

    async def _answer(self, method: str, params: Mapping[str, JSONValue], session: ServerSession) -> JSONValue:
        if method == "initialize":
            return self._initialize(params, session)
        if method == "ping":
            return {}
        if method == "tools/list":
            if params.get("cursor") is not None:  # only a cursor this server gave is valid, and it gives none
                raise _Refusal(INVALID_PARAMS, "invalid cursor: this server lists every tool in one page")
            return {"tools": list(self.tools())}
        if method == "tools/call":
            return await self.call_tool(params.get("name"), params.get("arguments", {}), session)
        raise _Refusal(METHOD_NOT_FOUND, f"method not found: {method[:100]}")

    def _initialize(self, params: Mapping[str, JSONValue], session: ServerSession) -> JSONValue:
        asked = params.get("protocolVersion")
        session.protocol_version = (
            asked if isinstance(asked, str) and asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        )
        result: dict[str, JSONValue] = {
            "protocolVersion": session.protocol_version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": self.name, "version": __version__},
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    def _notified(self, method: object, params: object, session: ServerSession) -> None:
        """A client notification: ``notifications/cancelled`` stops the request it names; the rest need nothing."""
        if method == "notifications/cancelled" and isinstance(params, Mapping):
            request_id = params.get("requestId")
            task = session.calls.get(request_id) if isinstance(request_id, (int, str)) else None
            if task is not None:
                task.cancel()

    async def call_tool(self, name: object, arguments: object, session: ServerSession) -> dict[str, JSONValue]:
        """A ``tools/call`` result: the tool's content, or an ``isError`` result for the model.

        Only the names ``tools/list`` gives are tools (``Toolkit__api``, not plait's
        ``Toolkit.api``); a call must use one.

        Raises:
            _Refusal: `name` is not a string or names no tool, or `arguments` is not an
                object (invalid params).
        """
        if not isinstance(name, str):
            raise _Refusal(INVALID_PARAMS, "tools/call needs the tool's name as a string")
        if not isinstance(arguments, Mapping):
            raise _Refusal(INVALID_PARAMS, "tools/call arguments must be an object")
        executor = self.executor
        names = [tool["function"]["name"] for tool in executor.openai_tools()]
        if name not in names:
            raise _Refusal(INVALID_PARAMS, _unknown_tool(name, names))
        if executor.needs_approval(name, dict(arguments)):
            text = f"The tool {name!r} needs a person's approval before each call; this MCP server does not run it."
            return {"content": [{"type": "text", "text": text}], "isError": True}
        flat = executor.resolve_name(name)
        call = AgentMessage(sender="mcp", content=FunctionCall(flat, dict(arguments)))
        reply = await run_async(executor.call_flow(call, session_id=session.plait_session), self.interceptors)
        ret = reply.content if isinstance(reply, AgentMessage) else reply
        if not isinstance(ret, ActionReturn):
            return {"content": [{"type": "text", "text": str(ret)}], "isError": False}
        if ret.state != ActionStatusCode.SUCCESS:
            error = [{"type": "text", "text": ret.errmsg or "the tool failed"}]
            return {"content": [*error, *content_items(ret.result, session.protocol_version)], "isError": True}
        result: dict[str, JSONValue] = {
            "content": content_items(ret.result, session.protocol_version),
            "isError": False,
        }
        kind = self._output_types().types.get(flat)
        if kind is not None:
            structured, problem = structured_content(kind, ret.result)
            if problem is not None:
                return {"content": [{"type": "text", "text": problem}], "isError": True}
            result["structuredContent"] = structured
        return result

    # -- sessions --------------------------------------------------------------------------------
    def open_session(self, owner: str = "") -> ServerSession:
        """A new session (its plait ``session_id`` is ``owner/id``, or the id without an owner)."""
        session = ServerSession(owner=owner)
        session.plait_session = f"{owner}/{session.id}" if owner else session.id
        return session

    async def close_session(self, session: ServerSession) -> None:
        """End `session`: cancel its calls, and have every tool forget its state (in a worker thread)."""
        for task in list(session.calls.values()):
            task.cancel()
        actions = list(self.executor.actions.values())

        def forget() -> None:
            for action in actions:
                for cleanup in ("close_session", "clear_session_state"):
                    method = getattr(action, cleanup, None)
                    if callable(method):
                        try:
                            method(session.plait_session)
                        except Exception:  # one tool failing to clean up must not keep the others' state
                            logger.warning("%s.%s failed", action.name, cleanup, exc_info=True)

        await asyncio.to_thread(forget)

    # -- running ---------------------------------------------------------------------------------
    def run(
        self,
        transport: Literal["stdio", "streamable-http"] = "stdio",
        host: str = "127.0.0.1",
        port: int = 8000,
        token: str | Mapping[str, str] | None = None,
        *,
        insecure: bool = False,
        allowed_hosts: Sequence[str] | None = None,
    ) -> None:
        """Serve until stdin ends (stdio) or the process is interrupted (Ctrl-C, SIGTERM).

        Args:
            transport: ``"stdio"`` (JSON-RPC lines on stdin/stdout; anything the tools print
                goes to stderr) or ``"streamable-http"`` (``http://host:port/mcp``).
            host: The address to listen on (HTTP).
            port: The port (HTTP; 0 picks a free one, printed on stderr).
            token: The bearer token clients must send (HTTP): one, or ``{tenant: token}``.
            insecure: Serve a non-loopback `host` without a token.
            allowed_hosts: The ``Host`` and ``Origin`` names answered (HTTP), as in `serve_http`.

        Raises:
            UserError: An unknown transport, a non-loopback `host` without a token, or a
                malformed allowed host.
        """
        from ._serve import serve_forever, serve_stdio

        if transport == "stdio":
            asyncio.run(serve_stdio(self))
        elif transport == "streamable-http":
            asyncio.run(serve_forever(self, host, port, token, insecure, allowed_hosts))
        else:
            raise UserError(f"unknown MCP transport {transport!r}: use 'stdio' or 'streamable-http'")

    @contextlib.asynccontextmanager
    async def serve_http(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        token: str | Mapping[str, str] | None = None,
        insecure: bool = False,
        max_body_bytes: int = 4 * 1024 * 1024,
        max_sessions: int = 1000,
        max_connections: int = 512,
        max_sessions_per_tenant: int | None = None,
        allowed_hosts: Sequence[str] | None = None,
    ) -> AsyncIterator[str]:
        """Serve Streamable HTTP on the running loop for the duration of an ``async with``; yields the endpoint URL.

        ```python
        async with server.serve_http(port=0) as url:    # 'http://127.0.0.1:PORT/mcp'
            ...
        ```

        Args:
            host: The address to listen on.
            port: The port (0: a free one).
            token: The bearer token clients must send: one, or ``{tenant: token}`` (each
                tenant sees only its own sessions).
            insecure: Serve a non-loopback `host` without a token.
            max_body_bytes: The largest request body (larger ones get HTTP 413).
            max_sessions: Sessions kept at once, all tenants together.
            max_connections: Open connections at once; more are answered 503 and closed.
            max_sessions_per_tenant: Sessions one tenant (one named token; every client
                with one token or none) keeps at once; None: `max_sessions` split evenly
                between the tenants. A tenant at its cap ends its own least recently used
                idle session (no request in flight) to open another, never another
                tenant's; if all of its sessions are busy, ``initialize`` gets HTTP 429.
                If the caps add up to more than `max_sessions` and it is reached, a new
                session gets HTTP 503 rather than ending anyone's.
            allowed_hosts: The ``Host`` header values answered, and the hosts an ``Origin``
                header may name (DNS-rebinding protection; others get HTTP 403): ``name``
                (any port), ``name:port``, or ``"*"`` (no check). None: ``localhost``,
                ``127.0.0.1``, ``[::1]``, and `host` unless it is a wildcard address.

        Raises:
            UserError: A non-loopback `host` without a token (and without ``insecure``), a
                session cap under 1, `max_sessions_per_tenant` over `max_sessions`, or a
                malformed allowed host.
        """
        from ._serve import HTTPEndpoint

        endpoint = HTTPEndpoint(
            self, token, max_body_bytes, max_sessions, max_connections, max_sessions_per_tenant, allowed_hosts
        )
        url = await endpoint.start(host, port, insecure)
        try:
            yield url
        finally:
            await endpoint.stop()
