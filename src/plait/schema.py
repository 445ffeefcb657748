"""The data that flows between agents, models and tools.

`AgentMessage` is the one message type agents exchange; `ActionReturn` is what a tool
call produces; the status enums are shared by models, agents and tools.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any

from pydantic import BaseModel, Field

__all__ = [
    "ActionReturn",
    "ActionStatusCode",
    "ActionValidCode",
    "AgentMessage",
    "AgentStatusCode",
    "FunctionCall",
    "ModelStatusCode",
    "PendingCall",
    "Reasoning",
    "ToolOutput",
    "dataclass2dict",
]


class ActionStatusCode(IntEnum):
    """Outcome of a tool call."""

    ING = 1
    SUCCESS = 0
    HTTP_ERROR = -1000  # the remote service could not be reached or answered an HTTP error
    ARGS_ERROR = -1001  # the arguments did not parse or did not fit the tool
    API_ERROR = -1002  # unknown API, or the tool raised


class ActionValidCode(IntEnum):
    """Whether a tool call was a real, valid call."""

    FINISH = 1
    OPEN = 0
    CLOSED = -1
    INVALID = -2
    ABSENT = -3  # no action was given


class ModelStatusCode(IntEnum):
    """State of a model response, the first item of every streamed tuple."""

    END = 0  # the response is complete
    STREAM_ING = 1  # more text will follow
    SERVER_ERR = -1
    SESSION_CLOSED = -2
    SESSION_OUT_OF_LIMIT = -3
    SESSION_INVALID_ARG = -4
    SESSION_READY = 2


class AgentStatusCode(IntEnum):
    """State of an agent message; extends `ModelStatusCode` with tool-call phases."""

    END = 0
    STREAM_ING = 1
    SERVER_ERR = -1
    SESSION_CLOSED = -2
    SESSION_OUT_OF_LIMIT = -3
    SESSION_INVALID_ARG = -4
    SESSION_READY = 2
    PLUGIN_START = 3  # the model started writing a plugin call
    PLUGIN_END = 4  # the plugin call is complete
    PLUGIN_RETURN = 5  # the plugin's result is available
    CODING = 6  # the model started writing interpreter code
    CODE_END = 7  # the code is complete
    CODE_RETURN = 8  # the interpreter's result is available
    INTERRUPTED = 9  # the run waits for a person to approve tool calls (content: the `PendingCall` list)


@dataclass
class FunctionCall:
    """A request to call a tool: its name and its arguments (a dict, or text for the tool's parser)."""

    name: str
    parameters: dict[str, Any] | str


@dataclass(frozen=True)
class PendingCall:
    """A tool call that waits for a person's decision (the content of an ``INTERRUPTED`` message).

    Attributes:
        id: The call's id: what `resume` decisions are keyed by.
        name: The tool (``Toolkit.api`` for a toolkit's API).
        arguments: The arguments the model wrote (a dict; text under ``'input'``).
        question: For a call that is running and asks a person something (an MCP server's
            elicitation): ``message``, ``requested_schema`` (a JSON Schema of flat fields) and
            ``server``. The decision is then the answer: ``{'action': 'accept', 'content':
            {...}}``, ``'decline'`` or ``'cancel'``. None for a call waiting for approval.
        external: Whether the call is to an external tool (``external_tools=``): the agent
            cannot run it, so its caller runs it and resumes with a `ToolOutput`.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    question: dict[str, Any] | None = None
    external: bool = False


@dataclass(frozen=True)
class ToolOutput:
    """A `resume` decision that answers a waiting call with its result: the call is not run.

    ``agent.resume({call_id: ToolOutput('22 C, sunny')})`` tells the model `text` as the call's
    result. It is how the caller answers a call to an external tool (see `PendingCall.external`),
    and it may also stand in for an approval-gated tool's run.

    Attributes:
        text: The call's result, as the model is told it.
    """

    text: str


@dataclass
class ActionReturn:
    """What a tool call produced.

    Attributes:
        args: The parsed arguments the tool was called with.
        url: A source URL, for tools that fetch one.
        type: The tool's name (``Toolkit.api`` for toolkit APIs).
        result: Output items ``{'type': 'text' | 'image' | ..., 'content': ...}``; None on error.
        errmsg: What went wrong, written for the model.
        state: The outcome.
        thought: The model's reasoning that led to the call, when known.
        valid: Whether this was a valid call.
    """

    args: dict[str, Any] | None = None
    url: str | None = None
    type: str | None = None
    result: list[dict[str, Any]] | None = None
    errmsg: str | None = None
    state: int = ActionStatusCode.SUCCESS
    thought: str | None = None
    valid: int = ActionValidCode.OPEN

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ActionReturn:
        """Rebuild what `dataclass2dict` wrote (status codes back as enum members)."""
        fields = dict(data)
        fields["state"] = ActionStatusCode(fields.get("state", ActionStatusCode.SUCCESS))
        fields["valid"] = ActionValidCode(fields.get("valid", ActionValidCode.OPEN))
        return cls(**fields)

    def format_result(self) -> str:
        """Render the result items as one text: text items verbatim, others as ``[type](content)``."""
        parts: list[str] = []
        for item in self.result or []:
            kind = item.get("type", "text")
            content = item.get("content", "")
            if kind == "text":
                parts.append(content if isinstance(content, str) else json.dumps(content, ensure_ascii=False))
            else:
                parts.append(f"[{kind}]({content})")
        return "\n".join(parts)


@dataclass(frozen=True)
class Reasoning:
    """A model's reasoning ("thinking") beside its answer: never part of `AgentMessage.content`.

    Reasoning models return it under many names (``reasoning_content``, ``reasoning``,
    ``thinking``, Anthropic ``thinking`` blocks, inline ``<think>`` tags); plait keeps it here
    whatever the server, and sends it back per the model's profile
    (`plait.llms.profiles.ModelProfile.reasoning_replay`).

    Attributes:
        text: The reasoning text (``''`` when the provider returned only an opaque payload).
        signature: The provider's signature over the text (Anthropic's ``thinking`` block
            ``signature``), sent back unchanged when the reasoning is replayed.
        redacted: An opaque, encrypted reasoning payload (Anthropic's ``redacted_thinking``
            ``data``), sent back unchanged.
        details: The provider's own reasoning items as JSON text (OpenRouter's
            ``reasoning_details`` array: ``reasoning.text``, ``reasoning.summary`` and
            ``reasoning.encrypted`` items), kept opaque and sent back unchanged.
    """

    text: str = ""
    signature: str | None = None
    redacted: str | None = None
    details: str | None = None

    def to_wire(self) -> dict[str, str]:
        """The JSON form carried in a chat message's ``reasoning`` key (None fields left out)."""
        out = {"text": self.text}
        if self.signature is not None:
            out["signature"] = self.signature
        if self.redacted is not None:
            out["redacted"] = self.redacted
        if self.details is not None:
            out["details"] = self.details
        return out

    @classmethod
    def from_wire(cls, value: object) -> Reasoning | None:
        """What `to_wire` wrote (or a bare string of text) back as a `Reasoning`; None for anything else."""
        if isinstance(value, Reasoning):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, Mapping):
            text = value.get("text", "")
            signature, redacted, details = (value.get(key) for key in ("signature", "redacted", "details"))
            return cls(
                text if isinstance(text, str) else "",
                signature if isinstance(signature, str) else None,
                redacted if isinstance(redacted, str) else None,
                details if isinstance(details, str) else None,
            )
        return None


def _enum_value(value: object) -> object:
    return value.value if isinstance(value, IntEnum) else value


def enum_dict_factory(items: list[tuple[str, object]]) -> dict[str, object]:
    """A `dataclasses.asdict` factory that turns enum members into their plain values."""
    return {key: _enum_value(value) for key, value in items}


def dataclass2dict(data: Any) -> dict[str, Any]:
    """`dataclasses.asdict` with enum members turned into plain ints (JSON-ready)."""
    return dataclasses.asdict(data, dict_factory=enum_dict_factory)


class AgentMessage(BaseModel):
    """A message between agents, tools and users.

    Attributes:
        content: The payload: text for model turns, a `FunctionCall` or dict for tool
            requests, an `ActionReturn` for tool results.
        sender: Who wrote it (an agent's name, ``'user'``, ``'ActionExecutor'``).
        formatted: What the agent's output parser extracted from `content`.
        extra_info: Anything else worth keeping with the message.
        type: A free-form kind label.
        receiver: The intended recipient, when there is one.
        stream_state: `AgentStatusCode.END` for a complete message, other codes while streaming.
        reasoning: The model's reasoning behind this message, kept apart from `content` (output
            parsers and typed outputs never see it); None when there is none, and then absent
            from `model_dump` and the repr, as in Lagent.

    Example:
        ```python
        msg = AgentMessage(sender='user', content='hello')
        print(msg)  # content='hello' sender='user' formatted=None ... stream_state=<AgentStatusCode.END: 0>
        ```
    """

    content: Any
    sender: str = "user"
    formatted: Any = None
    extra_info: Any = None
    type: str | None = None
    receiver: str | None = None
    stream_state: AgentStatusCode = AgentStatusCode.END
    reasoning: Reasoning | None = Field(default=None, exclude_if=lambda value: value is None)

    def __repr_args__(self) -> Any:
        """The repr's fields: `reasoning` only when there is some (Lagent's repr otherwise)."""
        return [(name, value) for name, value in super().__repr_args__() if name != "reasoning" or value is not None]

    def copy(
        self,
        *,
        include: Any = None,
        exclude: Any = None,
        update: Mapping[str, Any] | None = None,
        deep: bool = False,
    ) -> AgentMessage:
        """Copy the message (pydantic v1 spelling kept for seed code; same as `model_copy`)."""
        if include is not None or exclude is not None:
            data = self.model_dump(include=include, exclude=exclude)
            data.update(update or {})
            return AgentMessage(**data)
        return self.model_copy(update=dict(update) if update else None, deep=deep)


_ATOMS = frozenset({str, int, float, bool, bytes, type(None), Reasoning})  # Reasoning: frozen, of strings
_COPY_DEPTH = 64  # deeper data goes to `copy.deepcopy` (which also copes with cycles)


def _copied(value: Any, depth: int = 0) -> Any:
    """A copy of `value` that shares nothing mutable with it: plain data copied directly, the rest deep-copied."""
    kind = type(value)
    if kind in _ATOMS or isinstance(value, Enum):
        return value
    if depth < _COPY_DEPTH:
        if kind is dict:
            return {key: _copied(item, depth + 1) for key, item in value.items()}
        if kind is list:
            return [_copied(item, depth + 1) for item in value]
        if kind is ActionReturn:
            fields = {field.name: _copied(getattr(value, field.name), depth + 1) for field in _ACTION_RETURN_FIELDS}
            return ActionReturn(**fields)
    return copy.deepcopy(value)


_ACTION_RETURN_FIELDS = dataclasses.fields(ActionReturn)


def owned_copy(message: AgentMessage) -> AgentMessage:
    """A copy of `message` that shares nothing mutable with it, as ``model_copy(deep=True)`` makes.

    Plain values (text, numbers, dicts and lists of them, `ActionReturn`) are copied
    directly instead of through `copy.deepcopy`, which costs several times more.
    """
    if message.__pydantic_extra__ or message.__pydantic_private__:
        return message.model_copy(deep=True)
    copied = shallow_copy(message)
    fields = copied.__dict__
    for name, value in fields.items():
        if type(value) not in _ATOMS:
            fields[name] = _copied(value)
    return copied


def shallow_copy(message: AgentMessage) -> AgentMessage:
    """``message.model_copy()``: a new message with the same field values, made without pydantic's generic copy."""
    if message.__pydantic_extra__ or message.__pydantic_private__:
        return message.model_copy()
    copied = _new_message(type(message))
    _set(copied, "__dict__", message.__dict__.copy())
    _set(copied, "__pydantic_fields_set__", message.__pydantic_fields_set__.copy())
    _set(copied, "__pydantic_extra__", message.__pydantic_extra__)
    _set(copied, "__pydantic_private__", message.__pydantic_private__)
    return copied


def replaced(message: AgentMessage, **changes: Any) -> AgentMessage:
    """``message.model_copy(update=changes)``: a shallow copy with some fields set (not validated)."""
    copied = shallow_copy(message)
    copied.__dict__.update(changes)
    copied.__pydantic_fields_set__.update(changes)
    return copied


_new_message = object.__new__
_set = object.__setattr__
