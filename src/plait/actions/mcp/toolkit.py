"""`MCPToolkit`: the tools of a Model Context Protocol server as one plait toolkit.

```python
from plait.actions import ActionExecutor, MCPToolkit

files = MCPToolkit("npx", ["-y", "@modelcontextprotocol/server-filesystem", "/data"], name="files")  # stdio
search = MCPToolkit(url="http://127.0.0.1:8000/mcp", headers={"Authorization": "Bearer ..."})
executor = ActionExecutor([files, search])      # tools appear as `Toolkit.tool`, with their JSON Schemas
```

The server is started (or reached) and its tools listed when the toolkit is built; each
tool becomes an API of the toolkit, and its ``inputSchema`` is what native tool calling
sends to the model. Tool results come back as `ActionReturn` items (text; images and
audio saved as files under ``work_dir``); a result flagged ``isError``, a JSON-RPC error
or a broken connection is an error `ActionReturn` for the model, never an exception.

Lifecycle: the connection is owned by a private event loop on its own thread, so the
sync toolkit and its async twin share one implementation, and the toolkit can be used
from any thread, task or event loop (and closed from any of them) without cancel-scope
trouble. A server that died is restarted on the next call. ``close()`` (or ``with``)
ends it; it is also ended when the toolkit is garbage-collected or the interpreter exits.

One connection serves every ``session_id``: MCP servers that keep per-client state see
one client. Build a toolkit per session if your server's state must not be shared.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import mimetypes
import os
import re
import shlex
import tempfile
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from typing_extensions import Self

from ...exceptions import MCPError, ToolArgumentError, UserError
from ...schema import ActionReturn, ActionStatusCode
from ...types import JSONValue
from ...utils._aio import LoopThread
from .._types import ARRAY, BOOLEAN, FLOAT, NUMBER, OBJECT, STRING
from ..base_action import ActionCore, ApprovalRule, AsyncActionMixin, BaseAction
from ..parser import BaseParser, JsonParser
from ._session import ClientSession, RPCError, Transport, open_session
from ._transports import HTTPTransport, StdioTransport, safe_environment

__all__ = ["AsyncMCPToolkit", "MCPToolkit", "api_description", "result_items"]

_PLAIT_TYPES = {
    "string": STRING,
    "integer": NUMBER,
    "number": FLOAT,
    "boolean": BOOLEAN,
    "array": ARRAY,
    "object": OBJECT,
}
_INVALID_PARAMS = -32602


def _plait_type(schema: Mapping[str, JSONValue]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the first real type
        kind = next((k for k in kind if k != "null"), None)
    return _PLAIT_TYPES.get(str(kind), STRING)


def api_description(tool: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """A plait API description for one MCP tool (its JSON Schema kept per parameter)."""
    raw_schema = tool.get("inputSchema")
    schema: Mapping[str, JSONValue] = raw_schema if isinstance(raw_schema, Mapping) else {}
    raw_properties = schema.get("properties")
    properties: Mapping[str, JSONValue] = raw_properties if isinstance(raw_properties, Mapping) else {}
    parameters: list[JSONValue] = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, Mapping) else {}
        parameters.append(
            {
                "name": str(name),
                "type": _plait_type(prop),
                "description": str(prop.get("description") or ""),
                "json_schema": dict(prop),
            }
        )
    listed = schema.get("required")
    required: list[JSONValue] = [str(r) for r in (listed if isinstance(listed, list) else []) if r in properties]
    description = str(tool.get("description") or tool.get("title") or "")
    return {"name": str(tool["name"]), "description": description, "parameters": parameters, "required": required}


def result_items(result: Mapping[str, JSONValue], save: Callable[[str, str], str]) -> list[dict[str, JSONValue]]:
    """`ActionReturn` result items for a ``tools/call`` result.

    Args:
        result: The raw result (``content`` parts, maybe ``structuredContent``).
        save: ``save(base64_data, mime_type) -> path`` for images, audio and binary resources.
    """
    items: list[dict[str, JSONValue]] = []
    content = result.get("content")
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text":
            items.append({"type": "text", "content": str(part.get("text", ""))})
        elif kind in ("image", "audio"):
            items.append({"type": kind, "content": save(str(part.get("data", "")), str(part.get("mimeType", "")))})
        elif kind == "resource" and isinstance(resource := part.get("resource"), Mapping):
            if isinstance(text := resource.get("text"), str):
                items.append({"type": "text", "content": text})
            elif isinstance(blob := resource.get("blob"), str):
                path = save(blob, str(resource.get("mimeType", "")))
                items.append({"type": "file", "content": path})
        elif kind == "resource_link":
            label = part.get("title") or part.get("name") or "resource"
            items.append({"type": "text", "content": f"[{label}]({part.get('uri', '')})"})
        else:
            items.append({"type": "text", "content": json.dumps(dict(part), ensure_ascii=False)})
    structured = result.get("structuredContent")
    if not items and structured is not None:
        items.append({"type": "text", "content": json.dumps(structured, ensure_ascii=False)})
    return items


def _toolkit_name(server_info: Mapping[str, object]) -> str:
    name = re.sub(r"\W+", "_", str(server_info.get("name") or "")).strip("_")
    return name or "MCP"


class _Connection:
    """The session with one server, owned by a private loop thread; reopened when the server died."""

    def __init__(
        self, make_transport: Callable[[], Transport], timeout: float | None, connect_timeout: float | None
    ) -> None:
        self.make_transport = make_transport
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.loop = LoopThread(name="plait-mcp")
        self.session: ClientSession | None = None
        self._lock: asyncio.Lock | None = None

    async def current(self) -> ClientSession:
        """The open session (opening or reopening it when needed)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.session is None or self.session.closed:
                if self.session is not None:
                    await self.session.close()
                self.session = await open_session(self.make_transport(), self.timeout, self.connect_timeout)
            return self.session

    async def list_tools(self) -> tuple[ClientSession, list[dict[str, JSONValue]]]:
        session = await self.current()
        return session, await session.list_tools()

    async def call_tool(self, name: str, arguments: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
        return await (await self.current()).call_tool(name, arguments)

    async def aclose(self) -> None:
        session, self.session, self._lock = self.session, None, None
        if session is not None:
            await session.close()

    def close(self) -> None:
        """Close the session and stop the loop thread (safe from any thread, idempotent)."""
        self.loop.close(self.aclose)


class _MCPToolkitCore(ActionCore, register=False):
    """What `MCPToolkit` and `AsyncMCPToolkit` share (the arguments are `MCPToolkit`'s)."""

    def __init__(
        self,
        command: str | None = None,
        args: Sequence[str] = (),
        *,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = False,
        cwd: str | None = None,
        name: str | None = None,
        tools: Sequence[str] | None = None,
        timeout: float | None = 60.0,
        connect_timeout: float | None = 30.0,
        work_dir: str | None = None,
        parser: type[BaseParser] = JsonParser,
        enable: bool = True,
        requires_approval: ApprovalRule = False,
    ) -> None:
        if (command is None) == (url is None):
            raise UserError("MCPToolkit needs command= (a stdio server) or url= (a Streamable HTTP server), not both")
        if isinstance(args, str):
            raise UserError("args must be a list of arguments, not one string")
        if command is not None:
            environment = safe_environment(env, inherit_env)
            arguments = list(args)

            def make_transport() -> Transport:
                return StdioTransport(command, arguments, environment, cwd)

        else:
            endpoint, extra = str(url), dict(headers or {})

            def make_transport() -> Transport:
                return HTTPTransport(endpoint, extra, timeout)

        self._connection = _Connection(make_transport, timeout, connect_timeout)
        self._finalizer = weakref.finalize(self, self._connection.close)
        self._only = list(tools) if tools is not None else None
        self._name_override = name
        self._parser_cls = parser
        self._work_dir = work_dir
        try:
            description = self._load_description()
        except BaseException:
            self._finalizer()
            raise
        super().__init__(description, parser, enable, requires_approval=requires_approval)

    @classmethod
    def from_spec(cls, spec: str, **kwargs: Any) -> Self:
        """A toolkit for a server written as one string: an ``http(s)://`` URL, or a command line (stdio).

        ``MCPToolkit.from_spec("npx -y @modelcontextprotocol/server-filesystem .")``; other
        keyword arguments go to the constructor.

        Raises:
            UserError: `spec` is empty.
            MCPError: The server could not be started or reached.
        """
        spec = spec.strip()
        if spec.startswith(("http://", "https://")):
            return cls(url=spec, **kwargs)
        words = shlex.split(spec)
        if not words:
            raise UserError("an MCP server needs a command line or an http(s) URL")
        return cls(words[0], words[1:], **kwargs)

    # -- description -----------------------------------------------------------------------
    def _load_description(self) -> dict[str, JSONValue]:
        session, tools = self._connection.loop.run(self._connection.list_tools())
        if self._only is not None:
            offered = {str(t["name"]) for t in tools}
            missing = [name for name in self._only if name not in offered]
            if missing:
                raise MCPError(f"the MCP server has no tools {missing}; it offers {sorted(offered)}")
            tools = [t for t in tools if t["name"] in self._only]
        server = session.server_info
        return {
            "name": self._name_override or _toolkit_name(server),
            "description": session.instructions or str(server.get("title") or server.get("name") or "MCP server"),
            "api_list": [api_description(tool) for tool in tools],
        }

    def refresh(self) -> None:
        """List the server's tools again (after it announced a change) and rebuild the description."""
        self._description = self._load_description()
        self._name = str(self._description["name"])
        self._parser = self._bind_parser(self._parser_cls)

    @property
    def server_info(self) -> dict[str, JSONValue]:
        """The server's ``serverInfo`` from the handshake (``name``, ``version``...)."""
        session = self._connection.session
        return dict(session.server_info) if session is not None else {}

    # -- calling ----------------------------------------------------------------------------
    async def _call(self, api: str, arguments: dict[str, JSONValue]) -> ActionReturn:
        """One ``tools/call`` on the connection's loop, as an `ActionReturn`."""
        try:
            result = await self._connection.call_tool(api, arguments)
        except RPCError as exc:
            if exc.code == _INVALID_PARAMS:
                raise ToolArgumentError(str(exc), tool=api) from exc
            raise
        items = result_items(result, self._save)
        if result.get("isError"):
            text = "\n".join(str(i["content"]) for i in items if i["type"] == "text")
            return ActionReturn(errmsg=text or "the tool reported an error", state=ActionStatusCode.API_ERROR)
        return ActionReturn(result=items)

    def _save(self, data: str, mime_type: str) -> str:
        """Write base64 `data` to a new file under the work dir; returns its path."""
        if self._work_dir is None:
            self._work_dir = tempfile.mkdtemp(prefix="plait-mcp-")
        os.makedirs(self._work_dir, exist_ok=True)
        extension = mimetypes.guess_extension(mime_type.split(";")[0].strip()) or ".bin"
        path = os.path.join(self._work_dir, f"{uuid.uuid4().hex}{extension}")
        try:
            payload = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise MCPError(f"the MCP server sent {mime_type or 'binary'} data that is not base64: {exc}") from exc
        with open(path, "wb") as handle:
            handle.write(payload)
        return path

    # -- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the server (stdio) or end the session (HTTP); a later call reconnects."""
        self._connection.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class MCPToolkit(_MCPToolkitCore, BaseAction):
    """The tools of an MCP server (stdio or Streamable HTTP) as one toolkit.

    Args:
        command: The program that runs a stdio server (``"npx"``, ``sys.executable``...).
        args: Its arguments.
        url: The endpoint of a Streamable HTTP server instead (``http://host:port/mcp``).
        headers: HTTP headers sent with every request (HTTP servers).
        env: Environment variables for a stdio server, added to a minimal environment
            (``PATH``, ``HOME``, locale...). Secrets in plait's own environment are not
            passed on unless ``inherit_env=True``.
        inherit_env: Give a stdio server plait's whole environment.
        cwd: Working directory of a stdio server.
        name: The toolkit name (default: the server's name, e.g. ``weather_server``).
        tools: Offer only these tools of the server (default: all).
        timeout: Seconds each request (a tool call, the tool list) may take; a call that
            takes longer is cancelled and reported to the model.
        connect_timeout: Seconds the server may take to start and complete the handshake.
        work_dir: Where images, audio and binary resources from results are saved
            (default: a new temporary folder).
        parser: The argument parser class.
        enable: Whether executors offer this toolkit.
        requires_approval: The server's tools need a person's approval before each call:
            True, or a rule ``(tool name, arguments) -> bool`` (e.g. only ``"fs.write_file"``).

    Raises:
        UserError: Neither or both of `command` and `url` were given.
        MCPError: The server could not be started or reached, or failed the handshake.
    """

    def _api_callable(self, api: str) -> Callable[..., object] | None:
        if api not in self.api_names:
            return None

        def call(**arguments: JSONValue) -> ActionReturn:
            return self._connection.loop.run(self._call(api, arguments))

        return call


class AsyncMCPToolkit(AsyncActionMixin, _MCPToolkitCore, sibling_of=MCPToolkit):
    """The async twin of `MCPToolkit` (same arguments): ``await toolkit(inputs, name)``.

    Building it still waits for the server's tool list (it runs on the toolkit's own
    loop thread, so it works inside a running event loop too); calls are awaited without
    blocking the caller's loop.
    """

    def _api_callable(self, api: str) -> Callable[..., object] | None:
        if api not in self.api_names:
            return None

        async def call(**arguments: JSONValue) -> ActionReturn:
            loop = self._connection.loop.loop
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._call(api, arguments), loop))

        return call

    async def aclose(self) -> None:
        """`close` without blocking the running loop."""
        await asyncio.to_thread(self.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
