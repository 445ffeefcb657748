"""A2A 1.0 for a served agent: any A2A client (the official ``a2a-sdk``, Google ADK...) can call it.

Routes, beside the server's own (``AgentAPIServer(..., a2a=True)``, ``plait serve --a2a``):

* ``GET /.well-known/agent-card.json``: the Agent Card, built from the agent's name,
  description, tools (one skill each) and output type (``application/json`` output, its schema
  in the skill's description); one interface, JSON-RPC at ``/a2a``, protocol version 1.0.
* ``POST /a2a``: JSON-RPC 2.0 with A2A 1.0's methods: ``SendMessage``,
  ``SendStreamingMessage`` (Server-Sent Events, one JSON-RPC response per event),
  ``GetTask``, ``CancelTask`` and ``SubscribeToTask``. Push notifications, ``ListTasks``
  and the extended card are answered with A2A's "unsupported" errors.

A message starts a task; its ``contextId`` is the agent's session (the tasks of one context
share the conversation; a message without one starts a new context). The agent's answer is
the task's artifact ``answer`` (a text part, and a data part with the typed value when the
agent has an output type). When the agent pauses for a person's approval of a tool call, the
task's state is ``TASK_STATE_INPUT_REQUIRED`` and its status message lists the waiting calls
(text, and a data part ``{"pendingCalls": [...]}``); the next message on that task (its
``taskId``) answers them: ``approve`` or ``reject`` (any other text refuses and is what the
model is told), or a data part ``{"decisions": {call id: true | false | reason}}``.
``CancelTask`` stops a working task's agent (its turn rolls back) or drops a paused run.

Tasks outlive the request that started them: a client that leaves a stream (or sends with
``returnImmediately``) reads the task later with ``GetTask``. Tokens and tenants are the
server's (``Authorization: Bearer``, on the card too): a tenant's tasks and contexts are its
own, another tenant's task is not found. A request with an ``A2A-Version`` header other than
1.x is refused (-32009); one without the header is read as 1.0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from ...exceptions import UserError
from ...hooks.tool_log import ToolLog
from ...hooks.usage import UsageMeter
from ...types import JSONValue, SessionId
from ...untrusted import loads
from ...utils._json import json_default
from ._calls import agent_chunks
from .a2a_tasks import (
    CANCELED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    TERMINAL,
    WORKING,
    A2AError,
    A2ATask,
    TaskTable,
    agent_message,
    data_part,
    decisions_in,
    pending_message,
    text_part,
    user_text,
)
from .access import AccessControl
from .openai_route import _reply_text, _waiting
from .requests import session_of

__all__ = ["CARD_PATH", "RPC_PATH", "A2ARoute"]

logger = logging.getLogger("plait.serve")

CARD_PATH = "/.well-known/agent-card.json"
"""Where the Agent Card is (A2A 1.0's well-known path)."""

RPC_PATH = "/a2a"
"""The JSON-RPC endpoint."""

_SSE = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
_UNSUPPORTED = {
    "ListTasks": (-32004, "ListTasks is not supported by this agent"),
    "CreateTaskPushNotificationConfig": (-32003, "push notifications are not supported"),
    "GetTaskPushNotificationConfig": (-32003, "push notifications are not supported"),
    "ListTaskPushNotificationConfigs": (-32003, "push notifications are not supported"),
    "DeleteTaskPushNotificationConfig": (-32003, "push notifications are not supported"),
    "GetExtendedAgentCard": (-32007, "this agent has no extended card"),
}

Using = Callable[[str, SessionId], contextlib.AbstractContextManager[None]]


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=json_default)


def _result(request_id: JSONValue, result: JSONValue) -> dict[str, JSONValue]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _check_version(request: web.Request) -> None:
    """Refuse a protocol version other than 1.x (A2A's ``A2A-Version`` header; none: 1.0)."""
    version = request.headers.get("A2A-Version", "").strip()
    if version and version.split(".")[0] != "1":
        raise A2AError(-32009, f"A2A version {version!r} is not supported: this agent speaks 1.0")


def _checked_message(params: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``message`` of a send request, checked.

    Raises:
        A2AError: -32602 for a missing or malformed message.
    """
    message = params.get("message")
    if not isinstance(message, Mapping):
        raise A2AError(-32602, "params.message must be a Message object")
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts or not all(isinstance(p, Mapping) for p in parts):
        raise A2AError(-32602, "message.parts must be a non-empty list of Part objects")
    if not isinstance(message.get("messageId"), str) or not message["messageId"]:
        raise A2AError(-32602, "message.messageId is required")
    if message.get("role", "ROLE_USER") not in ("ROLE_USER", 1):
        raise A2AError(-32602, "a client's message has role ROLE_USER")
    for key in ("taskId", "contextId"):
        if not isinstance(message.get(key, ""), str):
            raise A2AError(-32602, f"message.{key} must be a string")
    return message


def _history_length(params: Mapping[str, Any]) -> int | None:
    value = params.get("historyLength")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise A2AError(-32602, "historyLength must be a non-negative integer")
    return value


def _drop_pause(agent: Any, session: SessionId) -> None:
    """Forget a session's paused run: its waiting calls never run, its turn leaves memory."""
    run = agent.run_state(session)
    if run is None:
        return
    agent.set_run_state(None, session)
    memory = getattr(agent, "memory", None)
    if run.turn_start is not None and memory is not None:
        memory.truncate(session, run.turn_start)


class A2ARoute:
    """The A2A routes of one served agent, and the tasks they keep.

    Args:
        get_agent: The served agent.
        using: A run's use of a session of a tenant (the server's `SessionTable` keeps it in memory meanwhile).
        meter: The `UsageMeter` registered on the agent (emptied after each run).
        tool_log: The `ToolLog` registered on the agent (emptied after each run).
        secured: Whether the server needs a bearer token (the card says so).
        max_tasks: How many tasks are kept (`TaskTable`).
    """

    def __init__(
        self,
        get_agent: Callable[[], Any],
        using: Using,
        meter: UsageMeter,
        tool_log: ToolLog,
        *,
        secured: bool = False,
        max_tasks: int = 10_000,
    ) -> None:
        self.get_agent = get_agent
        self.using = using
        self.meter = meter
        self.tool_log = tool_log
        self.secured = secured
        self.tasks = TaskTable(max_tasks)
        self._methods: dict[str, Callable[[web.Request, Mapping[str, Any]], Awaitable[JSONValue]]] = {
            "SendMessage": self._send,
            "GetTask": self._get,
            "CancelTask": self._cancel,
        }

    def routes(self) -> list[web.RouteDef]:
        """``GET`` the card, ``POST`` JSON-RPC."""
        return [web.get(CARD_PATH, self.card), web.post(RPC_PATH, self.rpc)]

    async def close(self) -> None:
        """Stop every running task (they end canceled)."""
        runners = [task.runner for task in self.tasks.running() if task.runner is not None]
        for runner in runners:
            runner.cancel()
        if runners:
            await asyncio.wait(runners)

    # -- the card ------------------------------------------------------------------------------
    async def card(self, request: web.Request) -> web.Response:
        """The Agent Card (A2A 1.0)."""
        from ... import __version__

        agent = self.get_agent()
        name = str(getattr(agent, "name", None) or type(agent).__name__)
        description = str(getattr(agent, "description", None) or f"The plait agent {name}.")
        output_type = getattr(agent, "output_type", None)
        outputs = ["text/plain", *(["application/json"] if output_type is not None else [])]
        skills: list[JSONValue] = []
        executor = getattr(agent, "executor", None)
        for tool in executor.description() if executor is not None else []:
            about = str(tool.get("description") or tool["name"])
            skills.append({"id": tool["name"], "name": tool["name"], "description": about, "tags": ["tool"]})
        if output_type is not None:
            schema = _dump(output_type.response_format()["json_schema"]["schema"])
            about = f"Answers as JSON that matches this JSON Schema: {schema}"
            answer: dict[str, JSONValue] = {"id": "answer", "name": "answer", "description": about}
            skills.append({**answer, "tags": ["output"], "outputModes": ["application/json"]})
        if not skills:
            skills.append({"id": "chat", "name": name, "description": description, "tags": ["chat"]})
        card: dict[str, JSONValue] = {
            "name": name,
            "description": description,
            "version": __version__,
            "supportedInterfaces": [
                {
                    "url": f"{request.scheme}://{request.host}{RPC_PATH}",
                    "protocolBinding": "JSONRPC",
                    "protocolVersion": "1.0",
                }
            ],
            "capabilities": {"streaming": True, "pushNotifications": False},
            "defaultInputModes": ["text/plain", "application/json"],
            "defaultOutputModes": outputs,
            "skills": skills,
        }
        if self.secured:
            card["securitySchemes"] = {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
            card["securityRequirements"] = [{"schemes": {"bearer": {"list": []}}}]
        return web.Response(text=_dump(card), content_type="application/json")

    # -- JSON-RPC ------------------------------------------------------------------------------
    async def rpc(self, request: web.Request) -> web.StreamResponse:
        """One JSON-RPC request (no batches); every error is a JSON-RPC error with status 200."""
        request_id: JSONValue = None
        try:
            try:
                body = loads(await request.read())
            except ValueError as exc:
                raise A2AError(-32700, f"parse error: {exc}") from None
            if not isinstance(body, dict):
                raise A2AError(-32600, "a request must be one JSON-RPC object (batches are not supported)")
            raw_id = body.get("id")
            if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool):
                request_id = raw_id
            method, params = body.get("method"), body.get("params", {})
            if body.get("jsonrpc") != "2.0" or not isinstance(method, str) or not method:
                raise A2AError(-32600, "a JSON-RPC 2.0 request needs 'jsonrpc': '2.0' and a method")
            if not isinstance(params, Mapping):
                raise A2AError(-32602, "params must be an object")
            _check_version(request)
            if method in _UNSUPPORTED:
                raise A2AError(*_UNSUPPORTED[method])
            if method in ("SendStreamingMessage", "SubscribeToTask"):
                return await self._stream(request, request_id, method, params)
            handler = self._methods.get(method)
            if handler is None:
                raise A2AError(-32601, f"method {method!r} not found")
            result = await handler(request, params)
            logger.info("POST %s %s -> ok", RPC_PATH, method)
        except A2AError as exc:
            logger.info("POST %s -> error %d: %s", RPC_PATH, exc.code, exc.message)
            return web.Response(text=_dump(exc.response(request_id)), content_type="application/json")
        return web.Response(text=_dump(_result(request_id, result)), content_type="application/json")

    async def _send(self, request: web.Request, params: Mapping[str, Any]) -> JSONValue:
        config = params.get("configuration") or {}
        if not isinstance(config, Mapping):
            raise A2AError(-32602, "params.configuration must be an object")
        history_length = _history_length(config)
        task = self._begin(request, params)
        if not config.get("returnImmediately"):
            assert task.runner is not None
            await asyncio.wait([task.runner])  # the run goes on if this request goes away
        return {"task": task.to_json(history_length)}

    async def _get(self, request: web.Request, params: Mapping[str, Any]) -> JSONValue:
        task = self.tasks.get(AccessControl.tenant_of(request), params.get("id"))
        return task.to_json(_history_length(params))

    async def _cancel(self, request: web.Request, params: Mapping[str, Any]) -> JSONValue:
        task = self.tasks.get(AccessControl.tenant_of(request), params.get("id"))
        if task.state in TERMINAL:
            raise A2AError(-32002, f"task {task.id!r} is {task.state}: it cannot be canceled")
        if task.runner is not None:
            runner = task.runner
            runner.cancel()
            await asyncio.wait([runner])  # the run rolls its turn back and sets the state
        else:  # paused for approval (or not started): its waiting calls never run
            _drop_pause(self.get_agent(), task.session)
            task.set_state(CANCELED, agent_message(task.id, task.context_id, [text_part("canceled by the client")]))
            task.close_streams()
        logger.info("A2A task %s canceled", task.id)
        return task.to_json()

    async def _stream(
        self, request: web.Request, request_id: JSONValue, method: str, params: Mapping[str, Any]
    ) -> web.StreamResponse:
        """SSE: the task first, then its status and artifact updates until it stops working."""
        tenant = AccessControl.tenant_of(request)
        if method == "SubscribeToTask":
            task = self.tasks.get(tenant, params.get("id"))
            if task.state in TERMINAL:
                raise A2AError(-32004, f"task {task.id!r} is {task.state}: there is nothing to follow")
        else:
            task = self._begin(request, params, start=False)
        queue: asyncio.Queue[dict[str, JSONValue] | None] = asyncio.Queue()
        task.listeners.append(queue)
        response = web.StreamResponse(headers=_SSE)
        try:
            await response.prepare(request)
            await response.write(f"data: {_dump(_result(request_id, {'task': task.to_json()}))}\n\n".encode())
            if method == "SendStreamingMessage":
                self._start(task)
            elif task.runner is None:  # a subscription to a paused task: nothing more comes
                task.listeners.remove(queue)
                queue.put_nowait(None)
            while (event := await queue.get()) is not None:
                await response.write(f"data: {_dump(_result(request_id, event))}\n\n".encode())
        finally:
            with contextlib.suppress(ValueError):
                task.listeners.remove(queue)
        await response.write_eof()
        return response

    # -- running the agent ---------------------------------------------------------------------
    def _begin(self, request: web.Request, params: Mapping[str, Any], start: bool = True) -> A2ATask:
        """The task a message starts (or, on a paused task, answers), started unless `start` is False.

        Raises:
            A2AError: A malformed message, an unknown task, or one that takes no message now.
        """
        message = _checked_message(params)
        tenant = AccessControl.tenant_of(request)
        agent = self.get_agent()
        if message.get("taskId"):
            task = self.tasks.get(tenant, message["taskId"])
            if task.state in TERMINAL:
                raise A2AError(-32004, f"task {task.id!r} is {task.state}: send the message as a new task")
            if task.state != INPUT_REQUIRED or task.runner is not None:
                raise A2AError(-32004, f"task {task.id!r} is working: it takes no message until it asks for one")
            if message.get("contextId", task.context_id) != task.context_id:
                raise A2AError(-32602, f"task {task.id!r} belongs to context {task.context_id!r}")
            run = agent.run_state(task.session) if callable(getattr(agent, "run_state", None)) else None
            decisions = decisions_in(message, list(run.waiting) if run is not None else [])
            task.call = (agent.resume, [decisions])
        else:
            text = user_text(message)
            context_id = message.get("contextId") or uuid.uuid4().hex
            try:
                session = AccessControl.scope(request, session_of(context_id))
            except UserError as exc:
                raise A2AError(-32602, f"message.contextId: {exc}") from None
            task = self.tasks.new(tenant, context_id, session)
            task.call = (agent, [text])
        task.history.append({**message, "taskId": task.id, "contextId": task.context_id})
        if start:
            self._start(task)
        return task

    def _start(self, task: A2ATask) -> None:
        task.set_state(WORKING)
        task.runner = asyncio.create_task(self._run(task))

    async def _run(self, task: A2ATask) -> None:
        """Run the agent (or its resume) on the task; the task's state follows, whatever happens."""
        assert task.call is not None
        call, inputs = task.call
        artifact_id, sent, last = uuid.uuid4().hex, "", None
        try:
            with self.using(task.tenant, task.session):
                async for chunk in agent_chunks(call, inputs, {"session_id": task.session}):
                    last = chunk
                    if task.listeners and not _waiting(chunk):
                        sent = self._emit_delta(task, artifact_id, sent, _reply_text(chunk))
            if last is None:
                raise RuntimeError("the agent replied with no message")
            self._finish(task, last, artifact_id)
        except asyncio.CancelledError:
            task.set_state(CANCELED, agent_message(task.id, task.context_id, [text_part("canceled")]))
            raise
        except Exception as exc:  # the task fails; the server keeps serving
            logger.warning("A2A task %s failed: %s", task.id, exc)
            text = f"{type(exc).__name__}: {exc}"
            task.set_state(FAILED, agent_message(task.id, task.context_id, [text_part(text)]))
        finally:
            task.runner = None
            task.close_streams()
            self.meter.take(task.session)
            self.tool_log.take(task.session)

    @staticmethod
    def _emit_delta(task: A2ATask, artifact_id: str, sent: str, text: str) -> str:
        """Stream the answer's new text as an artifact update (a text that does not extend the last replaces it)."""
        extends = text.startswith(sent)
        delta = text[len(sent) :] if extends else text
        if delta:
            artifact: dict[str, JSONValue] = {"artifactId": artifact_id, "name": "answer", "parts": [text_part(delta)]}
            update: dict[str, JSONValue] = {"taskId": task.id, "contextId": task.context_id, "artifact": artifact}
            task.emit({"artifactUpdate": {**update, "append": bool(sent) and extends, "lastChunk": False}})
        return text

    @staticmethod
    def _finish(task: A2ATask, reply: Any, artifact_id: str) -> None:
        waiting = _waiting(reply)
        if waiting:
            asking = pending_message(task.id, task.context_id, waiting)
            task.history.append(asking)
            task.set_state(INPUT_REQUIRED, asking)
            return
        parts: list[JSONValue] = [text_part(_reply_text(reply))]
        formatted = getattr(reply, "formatted", None)
        if formatted is not None:
            parts.append(data_part(json.loads(_dump(formatted))))
        artifact: dict[str, JSONValue] = {"artifactId": artifact_id, "name": "answer", "parts": parts}
        task.artifacts.append(artifact)
        update: dict[str, JSONValue] = {"taskId": task.id, "contextId": task.context_id, "artifact": artifact}
        task.emit({"artifactUpdate": {**update, "append": False, "lastChunk": True}})
        task.history.append(agent_message(task.id, task.context_id, parts))
        task.set_state(COMPLETED)
