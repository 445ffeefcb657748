"""A ``/v1/chat/completions`` body, checked as OpenAI checks it (private to `openai_route`).

Every field is either honoured, harmless to accept, or refused with a 400 that names the
client's field (``messages[2].role``, ``max_tokens``, ``n``) in OpenAI's error shape
(``{"error": {"message", "type": "invalid_request_error", "param", "code"}}``), never
silently dropped:

* Honoured: ``model`` (any name; the reply names the served model), ``messages``, ``stream``,
  ``stream_options.include_usage``, ``temperature``, ``top_p``, ``max_tokens`` /
  ``max_completion_tokens``, ``stop``, ``seed``, ``presence_penalty``, ``frequency_penalty``
  (each checked and within the server's caps), ``response_format`` (``json_object`` or
  ``json_schema``: passed to the model the agent answers with, which constrains its reply to
  it; ``text``: nothing to do), ``user`` (logged) and ``metadata.session_id`` (the session,
  like the ``X-Session-Id`` header), ``tools`` (function tools: the client's, offered to the
  agent's model as external tools, `plait.agents.external_tools`) and ``tool_choice``
  (``none``, ``auto``, ``required`` or one of the client's functions; without tools only
  ``none`` / ``auto``).
* Accepted as no-ops: ``n: 1``, ``logprobs: false``,
  ``modalities: ["text"]``, ``store: false``, ``parallel_tool_calls``, ``service_tier``,
  ``prompt_cache_key``, ``safety_identifier``, other ``metadata`` keys.
* Refused: ``n > 1``, ``logprobs: true``, ``top_logprobs``, ``functions``, ``audio``,
  ``prediction``, ``logit_bias``, ``reasoning_effort``, ``web_search_options``,
  ``verbosity``, ``store: true``, and any field OpenAI does not define.

Messages: roles ``system``, ``developer`` (a system message), ``user``, ``assistant`` (with
its ``tool_calls``) and ``tool``; content a string or text parts (the served agent takes text
only: an image, audio or file part is refused).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ...agents.external_tools import ExternalToolError, check_external_tools
from ...exceptions import UserError
from ...outputs import response_schema
from ...types import SessionId
from ...untrusted import clean
from .requests import ServerLimits, _integer, _number, _stop_words, session_of

__all__ = ["OpenAIRequest", "OpenAIRequestError", "Turn", "check_openai_request"]

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
_HONOURED = frozenset(
    {
        *("model", "messages", "stream", "stream_options", "temperature", "top_p", "max_tokens"),
        *("max_completion_tokens", "stop", "seed", "presence_penalty", "frequency_penalty", "user", "metadata"),
        *("response_format", "tools", "tool_choice"),
    }
)
_HARMLESS = frozenset({"parallel_tool_calls", "service_tier", "prompt_cache_key", "safety_identifier"})
# field -> the values that ask for nothing the agent cannot do
_NO_OPS: dict[str, tuple[object, ...]] = {
    "n": (None, 1),
    "logprobs": (None, False),
    "top_logprobs": (None,),
    "functions": (None, []),
    "function_call": (None, "none", "auto"),
    "modalities": (None, ["text"]),
    "store": (None, False),
    "audio": (None,),
    "prediction": (None,),
    "logit_bias": (None, {}),
    "reasoning_effort": (None,),
    "web_search_options": (None,),
    "verbosity": (None,),
}
_WHY = {
    "n": "the served agent gives one answer per request (n must be 1)",
    "logprobs": "the served agent does not report log probabilities",
    "top_logprobs": "the served agent does not report log probabilities",
    "functions": "the served agent does not take client functions",
    "function_call": "the served agent does not take client functions",
    "modalities": "the served agent answers in text only",
    "store": "the served agent does not store completions",
}
_INT64 = 2**63
_FIELDS = re.compile(
    r"messages\[\d+\](?:\.tool_call_id)?|tools\[\d+\]\.function(?:\.\w+)?|tool_choice\.function\.name"
    r"|max_completion_tokens|response_format"
)  # the chat fields an error message may name


class OpenAIRequestError(UserError):
    """A request the route refuses (400), with the client's field it is about.

    Attributes:
        param: The field, as the client spelled it (``messages[2].role``), or None.
        code: OpenAI's error code (``invalid_value``, ``invalid_type``, ``unsupported_parameter``...).
    """

    def __init__(self, message: str, param: str | None, code: str = "invalid_value") -> None:
        super().__init__(message)
        self.param = param
        self.code = code


@dataclass(frozen=True)
class Turn:
    """One checked chat message.

    Attributes:
        role: ``system`` (also a client's ``developer``), ``user``, ``assistant`` or ``tool``.
        text: Its text (text parts joined; empty for an assistant message with only tool calls).
        tool_call_id: The call a ``tool`` message answers (None for other roles).
        tool_calls: An assistant message's tool calls, as ``{"id", "name", "arguments"}``
            (the arguments' JSON text).
    """

    role: str
    text: str
    tool_call_id: str | None = None
    tool_calls: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True)
class OpenAIRequest:
    """A checked ``/v1/chat/completions`` body.

    Attributes:
        turns: The messages, in order.
        stream: Whether the answer is streamed.
        include_usage: Whether a stream ends with a usage chunk.
        user: The ``user`` field (metadata, logged), or ``''``.
        session: ``metadata.session_id``, or None.
        overrides: Generation parameters for the agent's model, in Lagent's names
            (``max_new_tokens``, ``stop_words``) and OpenAI's (``seed``, the penalties).
        tools: The client's function tools (checked), or None.
        tool_choice: The client's ``tool_choice`` with its tools, or None.
        rename: A chat field (``messages[3].tool_call_id``) as the client's API names it, for a
            request read from another API (`responses_route`); None: as it is.
        previous_response: The stored response a Responses API request continues, or None.
        store: Whether the answer is kept to be fetched and continued (`response_store`).
    """

    turns: list[Turn]
    stream: bool
    include_usage: bool
    user: str
    session: SessionId | None
    overrides: dict[str, object]
    tools: list[dict[str, object]] | None = None
    tool_choice: object = None
    rename: Callable[[str | None], str | None] | None = None
    previous_response: str | None = None
    store: bool = False

    def param(self, field: str | None) -> str | None:
        """A chat field as the client named it."""
        return field if self.rename is None else self.rename(field)

    def said(self, message: str) -> str:
        """An error message with the chat fields it names (``messages[3]``) as the client named them."""
        rename = self.rename
        if rename is None:
            return message
        return _FIELDS.sub(lambda found: rename(found.group(0)) or found.group(0), message)


def check_openai_request(body: object, limits: ServerLimits) -> OpenAIRequest:
    """Check a ``/v1/chat/completions`` body (see the module docstring).

    Raises:
        OpenAIRequestError: Anything the route does not take, naming the client's field.
    """
    if not isinstance(body, Mapping):
        raise OpenAIRequestError("the body must be a JSON object", None, "invalid_type")
    for field, value in body.items():
        if field in _HONOURED or field in _HARMLESS:
            continue
        if field not in _NO_OPS:
            raise OpenAIRequestError(
                f"Unrecognized request argument supplied: {field}", str(field), "unknown_parameter"
            )
        if value not in _NO_OPS[field]:
            why = _WHY.get(field, "the served agent cannot honour it")
            raise OpenAIRequestError(f"'{field}' is not supported: {why}", field, "unsupported_parameter")
    for field in ("stream",):
        if not isinstance(body.get(field, False), (bool, type(None))):
            raise OpenAIRequestError(f"'{field}' must be true or false", field, "invalid_type")
    for field in ("model", "user"):
        if not isinstance(body.get(field, ""), (str, type(None))):
            raise OpenAIRequestError(f"'{field}' must be a string", field, "invalid_type")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, Mapping):
        raise OpenAIRequestError("'stream_options' must be an object", "stream_options", "invalid_type")
    tools = _tools(body.get("tools"))
    return OpenAIRequest(
        turns=_turns(body.get("messages")),
        stream=body.get("stream") is True,
        include_usage=isinstance(options, Mapping) and options.get("include_usage") is True,
        user=str(body.get("user") or ""),
        session=_session(body.get("metadata")),
        overrides=_overrides(body, limits),
        tools=tools,
        tool_choice=_tool_choice(body.get("tool_choice"), tools),
    )


def _tools(tools: object) -> list[dict[str, object]] | None:
    if tools is None or tools == []:
        return None
    try:
        return clean(list(check_external_tools(tools, field="tools")))
    except ExternalToolError as exc:
        raise OpenAIRequestError(str(exc), exc.where) from None


def _tool_choice(choice: object, tools: list[dict[str, object]] | None) -> object:
    """``none`` / ``auto`` (no-ops without tools), ``required`` or one of the client's functions."""
    if choice is None or (tools is None and choice in ("none", "auto")):
        return None
    if tools is None:
        raise OpenAIRequestError(
            f"'tool_choice' {choice!r} needs 'tools': the client's tools are the ones it can choose",
            "tool_choice",
            "unsupported_parameter",
        )
    if choice in ("none", "auto", "required"):
        return choice
    function = choice.get("function") if isinstance(choice, Mapping) and choice.get("type") == "function" else None
    name = function.get("name") if isinstance(function, Mapping) else None
    names = [tool["function"]["name"] for tool in tools if isinstance(tool["function"], Mapping)]
    if name is None:
        raise OpenAIRequestError(
            "'tool_choice' must be 'none', 'auto', 'required' or {'type': 'function', 'function': {'name': ...}}",
            "tool_choice",
        )
    if name not in names:
        raise OpenAIRequestError(
            f"'tool_choice.function.name' {name!r} names none of the request's tools {names}",
            "tool_choice.function.name",
        )
    return {"type": "function", "function": {"name": name}}


def _session(metadata: object) -> SessionId | None:
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping) or not all(isinstance(v, str) for v in metadata.values()):
        raise OpenAIRequestError("'metadata' must map keys to strings", "metadata", "invalid_type")
    value = metadata.get("session_id")
    if value is None:
        return None
    try:
        return session_of(value)
    except UserError as exc:
        raise OpenAIRequestError(str(exc), "metadata.session_id") from None


def _turns(messages: object) -> list[Turn]:
    if not isinstance(messages, list) or not messages:
        raise OpenAIRequestError("'messages' must be a non-empty list of chat messages", "messages", "invalid_type")
    return [_turn(message, f"messages[{i}]") for i, message in enumerate(messages)]


def _turn(message: object, where: str) -> Turn:
    if not isinstance(message, Mapping):
        raise OpenAIRequestError(f"'{where}' must be an object", where, "invalid_type")
    role = message.get("role")
    if role not in _ROLES:
        raise OpenAIRequestError(
            f"Invalid value for '{where}.role': {role!r}; expected one of {list(_ROLES)}", f"{where}.role"
        )
    content = message.get("content")
    if content is None and not (role == "assistant"):
        raise OpenAIRequestError(f"Missing required parameter: '{where}.content'", f"{where}.content", "missing")
    text = _content_text(content, f"{where}.content")
    call_id = None
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            param = f"{where}.tool_call_id"
            raise OpenAIRequestError(f"Missing required parameter: '{param}'", param, "missing")
        call_id = clean(call_id)
    calls = _tool_calls(message.get("tool_calls"), f"{where}.tool_calls") if role == "assistant" else ()
    return Turn(_ROLES[str(role)], text, call_id, calls)


def _tool_calls(calls: object, where: str) -> tuple[dict[str, str], ...]:
    """An assistant message's ``tool_calls`` as ``{"id", "name", "arguments"}``."""
    if calls is None:
        return ()
    if not isinstance(calls, list):
        raise OpenAIRequestError(f"'{where}' must be a list of tool calls", where, "invalid_type")
    checked = []
    for j, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(call.get("id"), str) or not call["id"]:
            raise OpenAIRequestError(
                f"'{where}[{j}]' must be {{'id', 'type': 'function', 'function': {{'name', 'arguments'}}}}",
                f"{where}[{j}]",
                "invalid_type",
            )
        name, arguments = function.get("name"), function.get("arguments", "{}")
        if not isinstance(name, str) or not isinstance(arguments, str):
            param = f"{where}[{j}].function"
            raise OpenAIRequestError(f"'{param}' needs a string 'name' and string 'arguments'", param, "invalid_type")
        checked.append({"id": clean(call["id"]), "name": clean(name), "arguments": clean(arguments)})
    return tuple(checked)


def _content_text(content: object, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return clean(content)
    if not isinstance(content, Sequence) or isinstance(content, (bytes, bytearray)):
        raise OpenAIRequestError(
            f"Invalid type for '{where}': expected a string or an array of content parts, got {type(content).__name__}",
            where,
            "invalid_type",
        )
    texts = []
    for j, part in enumerate(content):
        if not isinstance(part, Mapping):
            raise OpenAIRequestError(f"'{where}[{j}]' must be an object", f"{where}[{j}]", "invalid_type")
        if part.get("type") != "text":
            raise OpenAIRequestError(
                f"'{where}[{j}].type' is {part.get('type')!r}: the served agent's model takes text parts only",
                f"{where}[{j}].type",
                "unsupported_value",
            )
        if not isinstance(part.get("text"), str):
            raise OpenAIRequestError(f"'{where}[{j}].text' must be a string", f"{where}[{j}].text", "invalid_type")
        texts.append(clean(str(part["text"])))
    return "".join(texts)


def _overrides(body: Mapping[str, object], limits: ServerLimits) -> dict[str, object]:
    """The generation fields, checked under the client's names, in the agent's names."""
    out: dict[str, object] = {}
    checks: list[tuple[str, str, Callable[[str, object], object]]] = [
        ("temperature", "temperature", lambda f, v: _number(f, v, 0.0, 2.0)),
        ("top_p", "top_p", lambda f, v: _number(f, v, 0.0, 1.0)),
        ("presence_penalty", "presence_penalty", lambda f, v: _number(f, v, -2.0, 2.0)),
        ("frequency_penalty", "frequency_penalty", lambda f, v: _number(f, v, -2.0, 2.0)),
        ("max_tokens", "max_new_tokens", lambda f, v: _integer(f, v, 1, limits.max_new_tokens)),
        ("max_completion_tokens", "max_new_tokens", lambda f, v: _integer(f, v, 1, limits.max_new_tokens)),
        ("seed", "seed", lambda f, v: _integer(f, v, -_INT64, _INT64 - 1)),
        ("stop", "stop_words", lambda f, v: _stop_words(v)),
    ]
    if body.get("response_format") is not None:
        try:
            if response_schema(body["response_format"]) is not None:  # json_object or json_schema
                out["response_format"] = clean(body["response_format"])
        except UserError as exc:
            raise OpenAIRequestError(str(exc), "response_format") from None
    for field, name, check in checks:
        if body.get(field) is None:
            continue
        try:
            out[name] = check(field, body[field])
        except UserError as exc:
            raise OpenAIRequestError(str(exc), field) from None
    return out
