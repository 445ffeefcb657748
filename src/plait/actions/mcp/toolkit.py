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

Tools that can only run as tasks (``execution.taskSupport: "required"``, spec 2025-11-25)
are not offered to the model (a warning names them): plait does not request tasks.

Beyond tools, the server's resources and prompts can be read: `list_resources`,
`read_resource`, `list_prompts`, `get_prompt` (awaited on `AsyncMCPToolkit`); a server
whose capabilities do not announce resources (prompts) is not asked: its lists are ``[]``. A server
that announces ``notifications/tools/list_changed`` has its tools listed again before the
toolkit's description is next read (the next call, or the next request's tool list);
over Streamable HTTP the announcement is seen when it travels in a request's answer.

Lifecycle: the connection is owned by a private event loop on its own thread, so the
sync toolkit and its async twin share one implementation, and the toolkit can be used
from any thread, task or event loop (and closed from any of them) without cancel-scope
trouble. A server that died is restarted on the next call. ``close()`` (or ``with``)
ends it; it is also ended when the toolkit is garbage-collected or the interpreter exits.

A server may ask back while a tool runs: ``elicit=`` answers its elicitation requests
(a person's answer to a form: ``"approval"`` pauses the agent's run until ``resume`` brings
the answer, a callable answers directly), ``sampling=Sampling(llm, max_requests, max_tokens)``
lets it use a model within a budget; both are refused unless given.

One connection serves every ``session_id``: MCP servers that keep per-client state see
one client. Build a toolkit per session if your server's state must not be shared.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import mimetypes
import os
import re
import shlex
import tempfile
import uuid
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Literal, TypeVar, cast

from typing_extensions import Self

from ...exceptions import MCPError, ToolArgumentError, UserError
from ...schema import ActionReturn, ActionStatusCode
from ...types import JSONValue
from ...utils._aio import LoopThread
from .._json_schema import api_description
from .._parked import park
from .._tool_api import ApprovalRule
from ..base_action import ActionCore, AsyncActionMixin, BaseAction, describe_exception
from ..parser import BaseParser, JsonParser
from ._asking import Asked, Questions
from ._client_requests import Elicit, Sampling, client_handlers, sampling_settings
from ._protocol import INVALID_PARAMS, result_items
from ._session import ClientSession, RPCError, Transport, open_session
from ._transports import HTTPTransport, StdioTransport, safe_environment

__all__ = ["AsyncMCPToolkit", "MCPToolkit", "api_description", "result_items"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


def _toolkit_name(server_info: Mapping[str, object]) -> str:
    name = re.sub(r"\W+", "_", str(server_info.get("name") or "")).strip("_")
    return name or "MCP"


def _task_only(tool: Mapping[str, JSONValue]) -> bool:
    """Whether `tool` must be called as a task (spec 2025-11-25: ``execution.taskSupport`` is ``'required'``)."""
    execution = tool.get("execution")
    return isinstance(execution, Mapping) and execution.get("taskSupport") == "required"


class _Connection:
    """The session with one server, owned by a private loop thread; reopened when the server died."""

    def __init__(
        self,
        make_transport: Callable[[], Transport],
        timeout: float | None,
        connect_timeout: float | None,
        elicit: Elicit | Literal["approval"] | None = None,
        sampling: Sampling | None = None,
    ) -> None:
        self.make_transport = make_transport
        self.questions = Questions(self._server_name) if elicit == "approval" else None
        answerer = self.questions.handler if self.questions is not None else cast("Elicit | None", elicit)
        self.handlers, self.capabilities = client_handlers(
            answerer, sampling, self._server_name, ask=self.questions is not None
        )
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.loop = LoopThread(name="plait-mcp")
        self.session: ClientSession | None = None
        self._lock: asyncio.Lock | None = None
        self._listed: tuple[ClientSession | None, int] = (None, 0)  # the session and tools_version last listed

    async def current(self) -> ClientSession:
        """The open session (opening or reopening it when needed)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.session is None or self.session.closed:
                if self.session is not None:
                    await self.session.close()
                self.session = await open_session(
                    self.make_transport(), self.timeout, self.connect_timeout, self.handlers, self.capabilities
                )
            return self.session

    async def list_tools(self) -> tuple[ClientSession, list[dict[str, JSONValue]]]:
        session = await self.current()
        version = session.tools_version  # a change announced while listing makes the list stale again
        tools = await session.list_tools()
        self._listed = (session, version)
        return session, tools

    def _server_name(self) -> str:
        return str(self.session.server_info.get("name") or "") if self.session is not None else ""

    def stale(self) -> bool:
        """Whether the live session announced a tool change (or replaced a dead one) since the tools were listed."""
        session = self.session
        if session is None or session.closed:
            return False  # the next call reconnects; the description is checked after that
        return self._listed != (session, session.tools_version)

    async def call_tool(self, name: str, arguments: Mapping[str, JSONValue]) -> dict[str, JSONValue] | Asked:
        """The call's result; with ``elicit="approval"``, the first question its server asks instead."""
        session = await self.current()
        if self.questions is None:
            return await session.call_tool(name, arguments)
        return await self.questions.outcome(
            self.questions.start(asyncio.ensure_future(session.call_tool(name, arguments)))
        )

    async def went_on(self, asked: Asked, answer: Mapping[str, Any]) -> dict[str, JSONValue] | Asked:
        """Send the person's `answer` to `asked`; the call's result, or its next question."""
        if not asked.answer.done():
            asked.answer.set_result(answer)
        assert self.questions is not None  # only asked with elicit="approval"
        return await self.questions.outcome(asked.call)

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
        elicit: Elicit | Literal["approval"] | None = None,
        sampling: Sampling | Mapping[str, Any] | None = None,
    ) -> None:
        if elicit is not None and elicit != "approval" and not callable(elicit):
            raise UserError(
                f"elicit is 'approval' or a callable that answers an Elicitation, got {elicit!r}"
                if isinstance(elicit, str)
                else f"elicit is 'approval' or a callable that answers an Elicitation, got {type(elicit).__name__}"
            )
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

        self._connection = _Connection(make_transport, timeout, connect_timeout, elicit, sampling_settings(sampling))
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
        session, listed = self._connection.loop.run(self._connection.list_tools())
        tools = [tool for tool in listed if not _task_only(tool)]
        hidden = sorted(str(tool["name"]) for tool in listed if _task_only(tool))
        if self._only is not None:
            offered = {str(t["name"]) for t in tools}
            missing = [name for name in self._only if name not in offered]
            if missing:
                needing_tasks = [name for name in missing if name in hidden]
                if needing_tasks:
                    raise MCPError(
                        f"the MCP server's tools {needing_tasks} can only run as tasks (execution.taskSupport "
                        "'required'), which plait does not request"
                    )
                raise MCPError(f"the MCP server has no tools {missing}; it offers {sorted(offered)}")
            tools = [t for t in tools if t["name"] in self._only]
        elif hidden:
            logger.warning(
                "MCP server %r: tools %s are not offered to the model: they can only run as tasks "
                "(execution.taskSupport 'required'), which plait does not request",
                session.server_info.get("name"),
                hidden,
            )
        server = session.server_info
        return {
            "name": self._name_override or _toolkit_name(server),
            "description": session.instructions or str(server.get("title") or server.get("name") or "MCP server"),
            "api_list": [api_description(tool) for tool in tools],
        }

    def refresh(self) -> None:
        """List the server's tools again and rebuild the description (automatic after a tools/list_changed)."""
        self._description = self._load_description()
        self._name = str(self._description["name"])
        self._parser = self._bind_parser(self._parser_cls)

    @property
    def _description(self) -> dict[str, Any]:
        """The description, listed again first when the server announced a tool change."""
        if "_connection" in self.__dict__ and self._connection.stale():
            try:
                self.refresh()
            except (MCPError, UserError) as exc:  # the server went away, or this is its own IO thread
                logger.debug("could not list the MCP server's changed tools: %s", exc)
        described: dict[str, Any] = self.__dict__["_described"]
        return described

    @_description.setter
    def _description(self, value: dict[str, Any]) -> None:
        self.__dict__["_described"] = value

    @property
    def server_info(self) -> dict[str, JSONValue]:
        """The server's ``serverInfo`` from the handshake (``name``, ``version``...)."""
        session = self._connection.session
        return dict(session.server_info) if session is not None else {}

    # -- calling ----------------------------------------------------------------------------
    async def _call(self, api: str, arguments: dict[str, JSONValue]) -> ActionReturn:
        """One ``tools/call`` on the connection's loop, as an `ActionReturn`."""
        try:
            return self._outcome(api, await self._connection.call_tool(api, arguments))
        except RPCError as exc:
            if exc.code == INVALID_PARAMS:
                raise ToolArgumentError(str(exc), tool=api) from exc
            raise

    def _outcome(self, api: str, result: dict[str, JSONValue] | Asked) -> ActionReturn:
        """A call's result as an `ActionReturn`; a question it asked: the call parked (`plait.actions._parked`)."""
        if isinstance(result, Asked):
            asked = result
            return park(asked.question, lambda answer: self._sync(self._went_on(api, asked, answer)))
        items = result_items(result, self._save)
        if result.get("isError"):
            text = "\n".join(str(i["content"]) for i in items if i["type"] == "text")
            return ActionReturn(errmsg=text or "the tool reported an error", state=ActionStatusCode.API_ERROR)
        return ActionReturn(result=items)

    async def _went_on(self, api: str, asked: Asked, answer: Mapping[str, Any]) -> ActionReturn:
        """A parked call given the person's answer: its result, its next question, or its error as a return."""
        try:
            return self._outcome(api, await self._connection.went_on(asked, answer))
        except Exception as exc:  # the tool's failure is the model's observation, as for any call
            invalid = isinstance(exc, RPCError) and exc.code == INVALID_PARAMS
            state = ActionStatusCode.ARGS_ERROR if invalid else ActionStatusCode.API_ERROR
            return ActionReturn(errmsg=describe_exception(exc), state=state)

    # -- resources and prompts (run on the connection's loop; the public methods are per mode) --
    async def _list_resources(self) -> list[dict[str, JSONValue]]:
        return await (await self._connection.current()).list_all("resources", key="uri")

    async def _read_resource(self, uri: str) -> list[dict[str, JSONValue]]:
        result = await (await self._connection.current()).fetch("resources/read", {"uri": uri})
        contents = result.get("contents")
        parts: list[JSONValue] = [
            {"type": "resource", "resource": dict(c)}
            for c in (contents if isinstance(contents, list) else [])
            if isinstance(c, Mapping)
        ]
        return result_items({"content": parts}, self._save)

    async def _list_prompts(self) -> list[dict[str, JSONValue]]:
        return await (await self._connection.current()).list_all("prompts")

    async def _get_prompt(self, name: str, arguments: Mapping[str, object] | None) -> list[dict[str, str]]:
        params: dict[str, JSONValue] = {
            "name": name,
            "arguments": {str(k): str(v) for k, v in (arguments or {}).items()},
        }
        result = await (await self._connection.current()).fetch("prompts/get", params)
        messages = result.get("messages")
        chat: list[dict[str, str]] = []
        for message in messages if isinstance(messages, list) else []:
            if isinstance(message, Mapping):
                items = result_items({"content": [message.get("content")]}, self._save)
                chat.append(
                    {"role": str(message.get("role") or "user"), "content": ActionReturn(result=items).format_result()}
                )
        return chat

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the connection's loop and wait for it (the sync toolkit's calls)."""
        return self._connection.loop.run(coro)

    async def _async(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` on the connection's loop without blocking the caller's (the async toolkit's calls)."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._connection.loop.loop))

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
        elicit: Who answers the server's ``elicitation/create`` requests (form mode) while a
            tool runs. ``"approval"``: the agent's person — the run pauses on the question
            (``AgentStatusCode.INTERRUPTED``, a `PendingCall` with its ``question``) and
            ``agent.resume({call_id: answer})`` sends the answer, after which the call goes
            on. A callable: called with an `Elicitation` (message, requested schema), it
            returns ``"decline"``, ``"cancel"`` or ``{"action": "accept", "content": {...}}``.
            Accepted content is checked against the schema. None: elicitation is not offered
            to the server.
        sampling: Lets the server ask a model for completions (``sampling/createMessage``):
            a `Sampling` (``llm``, ``max_requests``, ``max_tokens``, ``approve``) or a dict of
            its settings. None (the default): sampling requests are refused.

    Raises:
        UserError: Neither or both of `command` and `url` were given, or a misspelt
            `sampling` setting.
        MCPError: The server could not be started or reached, or failed the handshake.
    """

    def _api_callable(self, api: str) -> Callable[..., object] | None:
        if api not in self.api_names:
            return None

        def call(**arguments: JSONValue) -> ActionReturn:
            return self._sync(self._call(api, arguments))

        return call

    def list_resources(self) -> list[dict[str, JSONValue]]:
        """The server's resources, as it lists them (``uri``, ``name``, ``description``, ``mimeType``...).

        ``[]`` when the server does not announce the ``resources`` capability (it is not asked).

        Raises:
            MCPError: The server failed (``RPCError`` for its JSON-RPC errors).
        """
        return self._sync(self._list_resources())

    def read_resource(self, uri: str) -> list[dict[str, JSONValue]]:
        """The contents of the resource at `uri`, as result items: text, or a file saved under ``work_dir``.

        Raises:
            MCPError: The server failed, or has no such resource.
        """
        return self._sync(self._read_resource(uri))

    def list_prompts(self) -> list[dict[str, JSONValue]]:
        """The server's prompt templates, as it lists them (``name``, ``description``, ``arguments``).

        ``[]`` when the server does not announce the ``prompts`` capability (it is not asked).

        Raises:
            MCPError: The server failed.
        """
        return self._sync(self._list_prompts())

    def get_prompt(self, name: str, arguments: Mapping[str, object] | None = None) -> list[dict[str, str]]:
        """Prompt `name` filled with `arguments` (sent as strings), as chat messages ``{'role', 'content'}``.

        Non-text parts (images...) are saved under ``work_dir`` and named in the content.

        Raises:
            MCPError: The server failed, has no such prompt, or refused the arguments.
        """
        return self._sync(self._get_prompt(name, arguments))


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
            return await self._async(self._call(api, arguments))

        return call

    async def list_resources(self) -> list[dict[str, JSONValue]]:
        """`MCPToolkit.list_resources`, awaited."""
        return await self._async(self._list_resources())

    async def read_resource(self, uri: str) -> list[dict[str, JSONValue]]:
        """`MCPToolkit.read_resource`, awaited."""
        return await self._async(self._read_resource(uri))

    async def list_prompts(self) -> list[dict[str, JSONValue]]:
        """`MCPToolkit.list_prompts`, awaited."""
        return await self._async(self._list_prompts())

    async def get_prompt(self, name: str, arguments: Mapping[str, object] | None = None) -> list[dict[str, str]]:
        """`MCPToolkit.get_prompt`, awaited."""
        return await self._async(self._get_prompt(name, arguments))

    async def aclose(self) -> None:
        """`close` without blocking the running loop."""
        await asyncio.to_thread(self.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
