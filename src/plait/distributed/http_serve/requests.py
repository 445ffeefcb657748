"""What an HTTP client may ask of a served agent: request bodies checked against a schema (private).

A request body is untrusted. Only its documented fields are read; anything else is refused
with a 400 naming the allowed fields (``/chat_completion``; ``/v1`` checks its OpenAI fields
in `openai_request`) — it is never forwarded to the agent or its model. A client may adjust
generation only through `GENERATION_FIELDS`, each checked for type and range, with
``max_new_tokens`` capped by the server (`ServerLimits`). ``timeout``, ``extra_body``,
``model`` and every other model parameter stay the server's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Union

from ...exceptions import UserError
from ...memory.base_memory import MessageLike
from ...schema import AgentMessage
from ...types import SessionId
from ...untrusted import clean

__all__ = [
    "GENERATION_FIELDS",
    "ChatRequest",
    "ResumeRequest",
    "ServerLimits",
    "generation_overrides",
    "parse_chat_request",
    "parse_resume_request",
    "session_of",
]

GENERATION_FIELDS = ("temperature", "top_p", "top_k", "max_new_tokens", "repetition_penalty", "stop_words")
"""The generation parameters a client may set per request (Lagent's names)."""

_CHAT_FIELDS = ("message", "session_id", "stream", *GENERATION_FIELDS)
_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "top_k": (1, 1000),
    "repetition_penalty": (0.5, 2.0),
}
_MAX_SESSION_ID = 256
_MAX_STOP_WORDS, _MAX_STOP_LEN = 8, 64


@dataclass(frozen=True)
class ServerLimits:
    """What one client may use of a served agent.

    Attributes:
        max_body_bytes: Largest request body (413 beyond).
        max_messages: Most messages in one ``/chat_completion`` request.
        max_new_tokens: The cap on a client's ``max_new_tokens`` (``max_tokens`` on ``/v1``).
        max_connections: Open connections at once; beyond it (and beyond a client's share) a
            connection may only ask for the health check, in one of `reserved_connections`
            slots, or is answered 503 and closed.
        idle_timeout: Seconds a connection may wait for its next request (the first one
            included: a client that connects and sends nothing is disconnected).
        max_connections_per_client: Open connections at once from one client address (an
            IPv6 client's /64); more get 429. Behind a reverse proxy every client has the
            proxy's address: raise it to `max_connections`.
        header_timeout: Seconds from a request head's first byte until it must be complete
            (else 408 and closed): a client dripping partial headers is cut.
        reserved_connections: Extra connections beyond the caps that answer only
            ``/health_check``, so an operator's check gets through a full server.
        session_ttl: Seconds a session may stay unused before the server drops it from memory
            (None: never). With a `SessionStore` attached it stays stored and is read back on
            its next request; without one it is forgotten.
        max_sessions_per_tenant: Sessions one tenant (one token) keeps in memory at once
            (None: no cap); beyond it that tenant's least recently used idle session is dropped,
            as after `session_ttl`. Other tenants' sessions are never touched.
        max_stored_responses: Responses one tenant keeps stored for ``GET /v1/responses/{id}``
            and ``previous_response_id`` (`response_store`); beyond it its oldest is dropped.

    Raises:
        UserError: A cap below 1 or a timeout that is not positive.
    """

    max_body_bytes: int = 1 << 20
    max_messages: int = 64
    max_new_tokens: int = 4096
    max_connections: int = 512
    idle_timeout: float = 15.0
    max_connections_per_client: int = 64
    header_timeout: float = 10.0
    reserved_connections: int = 8
    session_ttl: float | None = 3600.0
    max_sessions_per_tenant: int | None = None
    max_stored_responses: int = 2048

    def __post_init__(self) -> None:
        caps = (self.max_body_bytes, self.max_messages, self.max_new_tokens, self.max_connections)
        if min(caps) < 1 or self.max_connections_per_client < 1 or self.reserved_connections < 0:
            raise UserError("server limits must be at least 1 (reserved_connections at least 0)")
        if not (self.idle_timeout > 0 and self.header_timeout > 0):
            raise UserError("idle_timeout and header_timeout must be positive (seconds)")
        if self.session_ttl is not None and not self.session_ttl > 0:
            raise UserError("session_ttl must be positive (seconds), or None to keep sessions in memory")
        if self.max_stored_responses < 0:
            raise UserError("max_stored_responses must be at least 0 (0: responses are not stored)")
        if self.max_sessions_per_tenant is not None and self.max_sessions_per_tenant < 1:
            raise UserError("max_sessions_per_tenant must be at least 1, or None for no cap")


@dataclass(frozen=True)
class ChatRequest:
    """A checked ``/chat_completion`` body.

    Attributes:
        inputs: The messages for the agent (strings or `AgentMessage`s).
        session_id: The session, as the client names it (before any namespace is applied).
        stream: Whether the reply is streamed as Server-Sent Events: `AgentMessage` chunks
            (true) or typed events (``"events"``, `plait.events`).
        overrides: Generation parameters for this call (from `GENERATION_FIELDS` only).
    """

    inputs: list[MessageLike]
    session_id: SessionId
    stream: Stream
    overrides: dict[str, object]


Stream = Union[bool, Literal["events"]]
"""A body's ``stream``: false (one reply), true (`AgentMessage` chunks) or ``"events"`` (typed events)."""


def _stream_of(body: Mapping[str, object]) -> Stream:
    """The body's ``stream`` field, checked."""
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream != "events":
        raise UserError("'stream' must be true, false or \"events\"")
    return stream


def session_of(value: object) -> SessionId:
    """A client-given session id: an int within 64 bits, or a short string.

    Raises:
        UserError: Anything else.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise UserError(f"session_id must be an integer or a string, not {type(value).__name__}")
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise UserError("session_id is out of range (a 64-bit integer, or a string)")
    if isinstance(value, str) and not 0 < len(value) <= _MAX_SESSION_ID:
        raise UserError(f"session_id must be 1 to {_MAX_SESSION_ID} characters")
    return clean(value)


def _fields_of(body: object, fields: Sequence[str], what: str) -> Mapping[str, object]:
    """`body` as a JSON object holding only `fields`.

    Raises:
        UserError: Not an object, or an unknown field.
    """
    if not isinstance(body, Mapping):
        raise UserError("the body must be a JSON object")
    unknown = sorted(str(k) for k in body if k not in fields)
    if unknown:
        raise UserError(f"unknown field(s) {unknown}; {what} may hold {list(fields)}")
    return body


def parse_chat_request(body: object, limits: ServerLimits) -> ChatRequest:
    """Check a ``/chat_completion`` body: ``{"message": ..., "session_id": ..., "stream": ..., <generation>}``.

    Raises:
        UserError: Not an object, an unknown field, a missing or malformed message, a bad
            session id, or a generation parameter of the wrong type or out of range.
    """
    body = _fields_of(body, _CHAT_FIELDS, "a request")
    messages = body.get("message")
    if messages is None:
        raise UserError("the body needs 'message': a string, a message dict, or a list of them")
    if isinstance(messages, (str, Mapping)):
        messages = [messages]
    if not isinstance(messages, list) or not messages:
        raise UserError("'message' must be a string, a message dict, or a non-empty list of them")
    if len(messages) > limits.max_messages:
        raise UserError(f"at most {limits.max_messages} messages per request, got {len(messages)}")
    inputs: list[MessageLike] = []
    for item in messages:
        if isinstance(item, str):
            inputs.append(clean(item))
        elif isinstance(item, Mapping):
            inputs.append(AgentMessage.model_validate(clean(dict(item))))  # a ValidationError is a ValueError: 400
        else:
            raise UserError(f"a message must be a string or a message dict, not {type(item).__name__}")
    stream = _stream_of(body)
    overrides = generation_overrides({k: v for k, v in body.items() if k in GENERATION_FIELDS}, limits)
    return ChatRequest(inputs, session_of(body.get("session_id", 0)), stream, overrides)


def generation_overrides(fields: Mapping[str, object], limits: ServerLimits) -> dict[str, object]:
    """Checked generation parameters (``None`` values dropped).

    Raises:
        UserError: A field outside `GENERATION_FIELDS`, of the wrong type, or out of range.
    """
    out: dict[str, object] = {}
    for name, value in fields.items():
        if value is None:
            continue
        if name == "stop_words":
            out[name] = _stop_words(value)
        elif name == "max_new_tokens":
            out[name] = _integer(name, value, 1, limits.max_new_tokens)
        elif name == "top_k":
            out[name] = _integer(name, value, *map(int, _RANGES[name]))
        elif name in _RANGES:
            out[name] = _number(name, value, *_RANGES[name])
        else:
            raise UserError(f"{name!r} cannot be set by a client; allowed: {list(GENERATION_FIELDS)}")
    return out


def _number(name: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserError(f"{name} must be a number")
    if not low <= value <= high:
        raise UserError(f"{name} must be between {low} and {high}, got {value}")
    return float(value)


def _integer(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{name} must be an integer")
    if not low <= value <= high:
        raise UserError(f"{name} must be between {low} and {high} on this server, got {value}")
    return value


def _stop_words(value: object) -> list[str]:
    words: Sequence[object] = [value] if isinstance(value, str) else value if isinstance(value, list) else [None]
    if len(words) > _MAX_STOP_WORDS or not all(isinstance(w, str) and 0 < len(w) <= _MAX_STOP_LEN for w in words):
        raise UserError(
            f"stop words must be a list of at most {_MAX_STOP_WORDS} strings of 1 to {_MAX_STOP_LEN} characters"
        )
    return [clean(str(w)) for w in words]


@dataclass(frozen=True)
class ResumeRequest:
    """A checked ``/resume`` body: a person's decisions on a paused run's calls."""

    decisions: dict[str, bool | str | dict[str, object]]
    session_id: SessionId
    stream: Stream


_RESUME_FIELDS = ("decisions", "session_id", "stream")
_MAX_DECISIONS = 64
_MAX_REASON = 4000


def parse_resume_request(body: object) -> ResumeRequest:
    """Check a ``/resume`` body: ``{"decisions": {call id: true | false | reason}, "session_id": ..., "stream": ...}``.

    A call that asks a question (``question`` in the paused reply) is decided with its answer:
    ``{"action": "accept", "content": {...}}``, ``"decline"`` or ``"cancel"`` (checked by the agent).

    Raises:
        UserError: Not an object, an unknown field, or decisions that are not a small object
            of call ids (strings) to true, false, a reason (a string) or an answer (an object).
    """
    body = _fields_of(body, _RESUME_FIELDS, "a resume")
    decisions = body.get("decisions")
    if not isinstance(decisions, Mapping) or not decisions or len(decisions) > _MAX_DECISIONS:
        raise UserError(f"'decisions' must map 1 to {_MAX_DECISIONS} call ids to true, false or a reason")
    checked: dict[str, bool | str | dict[str, object]] = {}
    for key, value in decisions.items():
        if not isinstance(key, str) or not 0 < len(key) <= _MAX_SESSION_ID:
            raise UserError(f"a call id must be 1 to {_MAX_SESSION_ID} characters")
        if isinstance(value, Mapping):  # the answer to the call's question
            if len(json.dumps(value, default=str)) > _MAX_REASON:
                raise UserError(f"the answer for {key!r} is over {_MAX_REASON} characters of JSON")
            checked[clean(key)] = dict(value)
            continue
        if not isinstance(value, (bool, str)) or (isinstance(value, str) and len(value) > _MAX_REASON):
            raise UserError(f"decide {key!r} with true, false or a reason of at most {_MAX_REASON} characters")
        checked[clean(key)] = clean(value) if isinstance(value, str) else value
    stream = _stream_of(body)
    return ResumeRequest(checked, session_of(body.get("session_id", 0)), stream)
