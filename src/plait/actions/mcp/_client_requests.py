"""What plait answers when an MCP server asks the client: elicitation and sampling (private).

A server may send requests of its own while a ``tools/call`` runs (spec 2025-11-25):

* ``elicitation/create`` (form mode): a question for a person, with a ``requestedSchema``
  of flat primitive properties. `MCPToolkit(..., elicit=...)` names who answers: a callable
  given an `Elicitation` that returns ``"accept"`` with content, ``"decline"`` or
  ``"cancel"``, or ``"approval"``: the agent's person, through a paused run and ``resume``
  (`plait.actions.mcp._asking`). Accepted content is checked against the schema before it is sent.
* ``sampling/createMessage``: the server asks the client's model for a completion.
  Refused unless `MCPToolkit(..., sampling=Sampling(llm, ...))` enables it; then answered by
  that model within a per-connection budget of requests and tokens (a request's
  ``maxTokens`` is charged in full), and put to `Sampling.approve` first when one is given.

A capability is advertised in the handshake only when it is enabled; a request for one
that is not is answered "method not found". Refusals are JSON-RPC errors (code ``-1``,
the spec's "user rejected", for a refused or over-budget sampling request).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, cast

from ...exceptions import UserError
from ...types import JSONValue
from ...utils.names import did_you_mean
from ._protocol import INTERNAL_ERROR, INVALID_PARAMS

__all__ = [
    "ELICIT",
    "SAMPLE",
    "USER_REJECTED",
    "Elicit",
    "Elicitation",
    "Handler",
    "RequestRefused",
    "Sampling",
    "client_handlers",
    "elicitation_answer",
    "sampling_settings",
]

logger = logging.getLogger(__name__)

ELICIT = "elicitation/create"
SAMPLE = "sampling/createMessage"
USER_REJECTED = -1
"""The spec's code for a request the user (or the client's policy) refused."""

ACTIONS = ("accept", "decline", "cancel")
PRIMITIVES: Mapping[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
}


class RequestRefused(Exception):
    """A server's request is answered with a JSON-RPC error (`code`, the message)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


Handler = Callable[[Mapping[str, JSONValue]], Awaitable[JSONValue]]
"""Answers the ``params`` of one server request with its result (raises `RequestRefused`)."""


@dataclass(frozen=True)
class Elicitation:
    """A server's question to a person (``elicitation/create``, form mode).

    Attributes:
        message: What the server asks, for the person.
        requested_schema: The JSON Schema of the answer: an object of flat primitive properties.
        server: The name of the server that asks.
    """

    message: str
    requested_schema: dict[str, JSONValue]
    server: str = ""


Elicit = Callable[[Elicitation], "str | Mapping[str, Any]"]
"""Answers an `Elicitation`: ``"decline"``, ``"cancel"``, or ``{"action": "accept", "content": {...}}``."""


def elicitation_answer(answer: object, schema: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """The ``ElicitResult`` for `answer` (an action name, or a mapping with ``action`` and ``content``).

    Raises:
        UserError: An unknown action, or accepted content that does not fit `schema`.
    """
    if isinstance(answer, str):
        answer = {"action": answer}
    if not isinstance(answer, Mapping):
        raise UserError(f"an elicitation answer is 'decline', 'cancel' or {{'action': 'accept', ...}}, got {answer!r}")
    action = answer.get("action")
    if action not in ACTIONS:
        hint = did_you_mean(str(action), ACTIONS)
        raise UserError(f"an elicitation's action is one of {', '.join(ACTIONS)}, got {action!r}; {hint}".rstrip("; "))
    if action != "accept":
        return {"action": action}
    content = answer.get("content") or {}
    if not isinstance(content, Mapping):
        raise UserError(f"accepted elicitation content is an object, got {type(content).__name__}")
    return {"action": "accept", "content": _checked(dict(content), schema)}


def _checked(content: dict[str, JSONValue], schema: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """`content` if it fits the flat `schema` (types, enums, required names, no others)."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    for name, value in content.items():
        spec = properties.get(name)
        if not isinstance(spec, Mapping):
            hint = did_you_mean(name, [str(key) for key in properties])
            raise UserError(
                f"the elicitation asks for no field {name!r}; {hint or f'it asks for {sorted(properties)}'}"
            )
        kind = str(spec.get("type", "string"))
        if kind == "array":  # a multi-select: a list of enum strings
            items = spec.get("items")
            options = items.get("enum") if isinstance(items, Mapping) else None
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise UserError(f"the elicitation field {name!r} is a list of strings, got {value!r}")
            if isinstance(options, list) and any(v not in options for v in value):
                raise UserError(f"the elicitation field {name!r} takes values from {options}, got {value!r}")
            continue
        types = PRIMITIVES.get(kind)
        if types is None:
            raise UserError(f"the elicitation field {name!r} has type {kind!r}, which is not a flat primitive")
        if not isinstance(value, types) or (kind != "boolean" and isinstance(value, bool)):
            raise UserError(f"the elicitation field {name!r} is a {kind}, got {value!r}")
        options = spec.get("enum")
        if isinstance(options, list) and value not in options:
            raise UserError(f"the elicitation field {name!r} is one of {options}, got {value!r}")
    for name in required if isinstance(required, list) else []:
        if name not in content:
            raise UserError(f"the elicitation answer lacks the required field {name!r}")
    return content


@dataclass
class Sampling:
    """Lets an MCP server ask `llm` for completions (``sampling/createMessage``), within a budget.

    Attributes:
        llm: The model that answers (a plait LLM, sync or async: its ``chat`` is called).
        max_requests: Sampling requests answered per connection; later ones are refused.
        max_tokens: Tokens per connection, each request charged its ``maxTokens``; a request
            that would pass the budget is refused.
        approve: Asked first, with the request's ``params``; False refuses the request (as
            a tool's ``requires_approval`` gates a call).
    """

    llm: Any
    max_requests: int = 10
    max_tokens: int = 4096
    approve: Callable[[Mapping[str, JSONValue]], bool] | None = None
    requests: int = field(default=0, init=False)
    tokens: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if not callable(getattr(self.llm, "chat", None)):
            raise UserError(f"Sampling needs a model with a chat method, got {type(self.llm).__name__}")
        for name in ("max_requests", "max_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UserError(f"Sampling's {name} is an int >= 0, got {value!r}")

    def charge(self, tokens: int) -> None:
        """Count one request of `tokens` (raises `RequestRefused` when it would pass the budget)."""
        if self.requests + 1 > self.max_requests:
            raise RequestRefused(
                f"sampling budget spent: {self.requests} of {self.max_requests} requests", USER_REJECTED
            )
        if self.tokens + tokens > self.max_tokens:
            left = self.max_tokens - self.tokens
            raise RequestRefused(f"sampling budget spent: {tokens} tokens asked, {left} left", USER_REJECTED)
        self.requests += 1
        self.tokens += tokens

    async def answer(self, params: Mapping[str, JSONValue]) -> JSONValue:
        """The ``CreateMessageResult`` for a request's `params`."""
        limit = params.get("maxTokens")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise RequestRefused(f"maxTokens must be a positive integer, got {limit!r}", INVALID_PARAMS)
        messages = _chat(params)
        if self.approve is not None and not await asyncio.to_thread(self.approve, params):
            raise RequestRefused("User rejected sampling request", USER_REJECTED)
        self.charge(limit)
        gen: dict[str, object] = {"max_new_tokens": limit}
        if isinstance(temperature := params.get("temperature"), (int, float)) and not isinstance(temperature, bool):
            gen["temperature"] = float(temperature)
        if inspect.iscoroutinefunction(self.llm.chat):
            text = await self.llm.chat(messages, **gen)
        else:
            text = await asyncio.to_thread(self.llm.chat, messages, **gen)
        model = (
            getattr(self.llm, "model_name", None) or getattr(self.llm, "model_type", None) or type(self.llm).__name__
        )
        return {
            "role": "assistant",
            "content": {"type": "text", "text": str(text)},
            "model": str(model),
            "stopReason": "endTurn",
        }


def _chat(params: Mapping[str, JSONValue]) -> list[dict[str, str]]:
    """The plait chat messages for a sampling request (text content only)."""
    chat: list[dict[str, str]] = []
    if isinstance(system := params.get("systemPrompt"), str) and system:
        chat.append({"role": "system", "content": system})
    messages = params.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestRefused("messages must be a non-empty list", INVALID_PARAMS)
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
            raise RequestRefused(f"a sampling message has role 'user' or 'assistant': {message!r}", INVALID_PARAMS)
        content = message.get("content")
        parts = content if isinstance(content, list) else [content]
        texts = []
        for part in parts:
            if not isinstance(part, Mapping) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                raise RequestRefused(f"plait samples text only, got {kind!r} content", INVALID_PARAMS)
            texts.append(str(part.get("text", "")))
        chat.append({"role": str(message["role"]), "content": "\n".join(texts)})
    return chat


def sampling_settings(setting: object) -> Sampling | None:
    """`setting` (None, a `Sampling`, or a mapping of its fields) as a `Sampling`.

    Raises:
        UserError: Anything else, or a mapping with a misspelt field.
    """
    if setting is None or setting is False or isinstance(setting, Sampling):
        return setting or None
    if isinstance(setting, Mapping):
        names = [f.name for f in fields(Sampling) if f.init]
        for key in setting:
            if key not in names:
                hint = did_you_mean(str(key), names)
                raise UserError(f"sampling has no setting {key!r}; {hint or f'its settings are {names}'}")
        return Sampling(**setting)
    raise UserError(f"sampling is a Sampling(llm, ...) or a dict of its settings, got {type(setting).__name__}")


def client_handlers(
    elicit: Elicit | Handler | None, sampling: Sampling | None, server: Callable[[], str], ask: bool = False
) -> tuple[dict[str, Handler], dict[str, JSONValue]]:
    """The handlers of the server requests plait answers, and the client capabilities announcing them.

    Args:
        elicit: Who answers elicitations (None: not offered); with `ask`, the request handler itself
            (``elicit="approval"``: `plait.actions.mcp._asking.Questions.handler`).
        sampling: The sampling model and budget (None: not offered).
        server: The name of the server (for the `Elicitation`).
        ask: `elicit` is the elicitation request handler itself.
    """
    handlers: dict[str, Handler] = {}
    capabilities: dict[str, JSONValue] = {}
    if elicit is not None and ask:
        handlers[ELICIT] = cast(Handler, elicit)
        capabilities["elicitation"] = {"form": {}}
    elif elicit is not None:
        person = cast(Elicit, elicit)

        async def elicitation(params: Mapping[str, JSONValue]) -> JSONValue:
            if params.get("mode", "form") != "form":
                raise RequestRefused(
                    f"plait answers form elicitations only, not {params.get('mode')!r}", INVALID_PARAMS
                )
            schema = params.get("requestedSchema")
            schema = dict(schema) if isinstance(schema, Mapping) else {"type": "object", "properties": {}}
            question = Elicitation(str(params.get("message", "")), schema, server())
            answer = await asyncio.to_thread(person, question)
            try:
                return elicitation_answer(answer, schema)
            except UserError as exc:
                logger.error("the answer to the MCP server's elicitation was refused: %s", exc)
                raise RequestRefused(str(exc), INTERNAL_ERROR) from exc  # the tool's arguments were fine

        handlers[ELICIT] = elicitation
        capabilities["elicitation"] = {"form": {}}
    if sampling is not None:
        handlers[SAMPLE] = sampling.answer
        capabilities["sampling"] = {}
    return handlers, capabilities
