"""A2A 1.0 tasks of a served agent: their JSON shapes and the table that keeps them (private).

The shapes are A2A 1.0's JSON-RPC binding, the protobuf JSON form of ``a2a.proto`` (field
names in camelCase, enums by name: ``TASK_STATE_COMPLETED``, ``ROLE_AGENT``), as the official
``a2a-sdk`` reads and writes them. A task is one request of a client's (a message) and the
agent's work on it; its context (``contextId``) is the agent's session, so the tasks of one
context share a conversation.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ...schema import PendingCall
from ...types import JSONValue, SessionId
from .openai_route import _APPROVE as APPROVE_WORDS, _REFUSE as REFUSE_WORDS  # one vocabulary for both routes

__all__ = [
    "CANCELED",
    "COMPLETED",
    "FAILED",
    "INPUT_REQUIRED",
    "SUBMITTED",
    "TERMINAL",
    "WORKING",
    "A2AError",
    "A2ATask",
    "TaskTable",
    "agent_message",
    "data_part",
    "decisions_in",
    "pending_message",
    "text_part",
    "user_text",
]

SUBMITTED = "TASK_STATE_SUBMITTED"
WORKING = "TASK_STATE_WORKING"
COMPLETED = "TASK_STATE_COMPLETED"
FAILED = "TASK_STATE_FAILED"
CANCELED = "TASK_STATE_CANCELED"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
REJECTED = "TASK_STATE_REJECTED"
TERMINAL = frozenset({COMPLETED, FAILED, CANCELED, REJECTED})
"""States a task never leaves: a message to such a task is refused (A2A 1.0, CORE-SEND-002)."""


class A2AError(Exception):
    """An A2A JSON-RPC error: its code and message go back to the client.

    Codes (A2A 1.0): -32001 task not found, -32002 task not cancelable, -32004 unsupported
    operation, -32005 content type not supported, -32009 version not supported, and
    JSON-RPC's own -32700 parse error, -32600 invalid request, -32601 method not found,
    -32602 invalid params.
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def response(self, request_id: JSONValue) -> dict[str, JSONValue]:
        """The JSON-RPC error response."""
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": self.code, "message": self.message}}


def _now() -> str:
    """An RFC 3339 UTC timestamp (protobuf JSON's ``Timestamp``)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def text_part(text: str) -> dict[str, JSONValue]:
    """A text part."""
    return {"text": text}


def data_part(data: JSONValue) -> dict[str, JSONValue]:
    """A structured-data part (JSON)."""
    return {"data": data, "mediaType": "application/json"}


def agent_message(task_id: str, context_id: str, parts: list[JSONValue]) -> dict[str, JSONValue]:
    """A message from the agent in a task."""
    return {
        "messageId": uuid.uuid4().hex,
        "contextId": context_id,
        "taskId": task_id,
        "role": "ROLE_AGENT",
        "parts": parts,
    }


def pending_message(task_id: str, context_id: str, calls: Sequence[PendingCall]) -> dict[str, JSONValue]:
    """The agent's message of an ``input-required`` task: which tool calls wait, and how to answer."""
    listed = "; ".join(f"{call.name}({json.dumps(call.arguments, ensure_ascii=False)})" for call in calls)
    text = (
        f"Waiting for approval of: {listed}. Reply 'approve' or 'reject' (any other text refuses and is "
        'what the model is told), or send a data part {"decisions": {call id: true | false | reason}}.'
    )
    pending: list[JSONValue] = [{"id": c.id, "name": c.name, "arguments": dict(c.arguments)} for c in calls]
    return agent_message(task_id, context_id, [text_part(text), data_part({"pendingCalls": pending})])


@dataclass
class A2ATask:
    """One task: its state, history and artifacts, and the run working on it.

    Attributes:
        id: The task's id (the server's).
        context_id: Its context: the agent's session, in the client's words.
        tenant: The tenant whose token created it (another tenant never sees it).
        session: The agent's session id (`context_id` in the tenant's namespace).
        state: The ``TaskState`` name.
        message: The status message (the pending calls of an ``input-required`` task, an error).
        history: The messages of the task, the client's and the agent's, oldest first.
        artifacts: What the agent produced (its answer).
        call: What the next run calls: the agent (or its ``resume``) and its inputs.
        runner: The asyncio task running the agent now (None between runs).
        listeners: Queues of the streams following the task (each gets every event; None ends them).
    """

    id: str
    context_id: str
    tenant: str
    session: SessionId
    state: str = SUBMITTED
    message: dict[str, JSONValue] | None = None
    timestamp: str = field(default_factory=_now)
    history: list[JSONValue] = field(default_factory=list)
    artifacts: list[JSONValue] = field(default_factory=list)
    call: tuple[Any, list[Any]] | None = None
    runner: asyncio.Task[None] | None = None
    listeners: list[asyncio.Queue[dict[str, JSONValue] | None]] = field(default_factory=list)
    touched: float = field(default_factory=time.monotonic)

    def status(self) -> dict[str, JSONValue]:
        """The ``TaskStatus``."""
        status: dict[str, JSONValue] = {"state": self.state, "timestamp": self.timestamp}
        if self.message is not None:
            status["message"] = self.message
        return status

    def to_json(self, history_length: int | None = None) -> dict[str, JSONValue]:
        """The ``Task``; `history_length` keeps the latest messages only (0: none)."""
        history = self.history if history_length is None else self.history[len(self.history) - history_length :]
        task: dict[str, JSONValue] = {"id": self.id, "contextId": self.context_id, "status": self.status()}
        if self.artifacts:
            task["artifacts"] = list(self.artifacts)
        if history and history_length != 0:
            task["history"] = list(history)
        return task

    def set_state(self, state: str, message: dict[str, JSONValue] | None = None) -> None:
        """Move to `state` (with its status message) and tell the listeners."""
        self.state, self.message, self.timestamp = state, message, _now()
        self.touched = time.monotonic()
        self.emit({"statusUpdate": {"taskId": self.id, "contextId": self.context_id, "status": self.status()}})

    def emit(self, event: dict[str, JSONValue]) -> None:
        """Send a ``StreamResponse`` to every stream following the task."""
        for queue in self.listeners:
            queue.put_nowait(event)

    def close_streams(self) -> None:
        """End every stream following the task."""
        for queue in self.listeners:
            queue.put_nowait(None)
        self.listeners.clear()


class TaskTable:
    """The tasks a server keeps, per tenant; the oldest finished ones go beyond `capacity`.

    Args:
        capacity: How many tasks are kept; beyond it the least recently touched task that is
            not running is forgotten (a later ``GetTask`` for it: task not found).
    """

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._tasks: OrderedDict[str, A2ATask] = OrderedDict()

    def __len__(self) -> int:
        return len(self._tasks)

    def new(self, tenant: str, context_id: str, session: SessionId) -> A2ATask:
        """A new task in `context_id` of `tenant`."""
        task = A2ATask(id=uuid.uuid4().hex, context_id=context_id, tenant=tenant, session=session)
        self._tasks[task.id] = task
        while len(self._tasks) > self.capacity:
            idle = next((t for t in self._tasks.values() if t.runner is None and t is not task), None)
            if idle is None:
                break
            del self._tasks[idle.id]
        return task

    def get(self, tenant: str, task_id: object) -> A2ATask:
        """The tenant's task `task_id`.

        Raises:
            A2AError: -32001, no such task for this tenant (another tenant's task is not found either).
        """
        task = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None or task.tenant != tenant:
            raise A2AError(-32001, f"task {task_id!r} not found")
        self._tasks.move_to_end(task.id)
        return task

    def running(self) -> list[A2ATask]:
        """The tasks whose agent runs now."""
        return [task for task in self._tasks.values() if task.runner is not None]


def user_text(message: Mapping[str, Any]) -> str:
    """The text of a client's message: its text parts, and its data parts as JSON, one per line.

    Raises:
        A2AError: -32005 for a file part (raw bytes or a URL): the agent takes text and data.
    """
    texts: list[str] = []
    for part in message["parts"]:
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif "data" in part:
            texts.append(json.dumps(part["data"], ensure_ascii=False))
        else:
            raise A2AError(-32005, "this agent takes text and data parts only (no files)")
    return "\n".join(texts)


def decisions_in(message: Mapping[str, Any], waiting: Sequence[str]) -> dict[str, bool | str]:
    """The decisions a client's message gives on the `waiting` tool calls of a paused task.

    A data part ``{"decisions": {call id: true | false | reason}}`` decides call by call;
    otherwise the text decides all of them: ``approve`` (yes, ok...) runs them, ``reject``
    (no...) refuses them, any other text refuses them and is what the model is told.

    Raises:
        A2AError: -32602 for decisions that are not an object of booleans and strings.
    """
    for part in message["parts"]:
        data = part.get("data")
        if isinstance(data, Mapping) and "decisions" in data:
            decisions = data["decisions"]
            if not isinstance(decisions, Mapping) or not all(isinstance(v, (bool, str)) for v in decisions.values()):
                raise A2AError(-32602, "'decisions' must map call ids to true, false or a reason")
            return {str(k): v for k, v in decisions.items()}
    text = user_text(message).strip()
    word = text.lower().rstrip(".!")
    decision: bool | str = True if word in APPROVE_WORDS else False if word in REFUSE_WORDS else text
    return dict.fromkeys(waiting, decision)
