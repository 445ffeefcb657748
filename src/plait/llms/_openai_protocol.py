"""The OpenAI chat-completions wire format, as pure functions (no IO).

* `chat_completions_url` accepts a base URL or the full endpoint.
* `build_payload` turns plait generation parameters into a request body that holds
  only fields the OpenAI API accepts (anything else goes through ``extra_body``).
* `parse_completion` reads a non-streaming body into a `ModelResponse`.
* `StreamAccumulator` folds streamed chunks (text and tool-call deltas) into one.

Reasoning is read from replies and sent back by `plait.llms._reasoning_wire`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias, Union
from urllib.parse import urlsplit, urlunsplit

from ..exceptions import LLMResponseError, ParseError, UserError
from ..untrusted import loads
from ..utils.redact import redact_url
from ._decoded import count, json_array, json_object
from ._reasoning_wire import DETAILS_FIELD, ReasoningStream, field_reasoning, replay_messages, reply_reasoning
from .profiles import ReasoningReplay, ThinkTags
from .response import ModelResponse, ToolCall, Usage

if TYPE_CHECKING:
    from .base_llm import GenParams

__all__ = [
    "OPENAI_CHAT_PARAMS",
    "Payload",
    "StreamAccumulator",
    "SupportsToOpenAI",
    "ToolChoice",
    "ToolSpec",
    "build_headers",
    "build_payload",
    "chat_completions_url",
    "normalize_tool",
    "parse_completion",
    "parse_usage",
    "wire_tool_choice",
]

# Request fields passed through unchanged when set (and not None). `max_tokens`,
# `temperature`, `top_p` and `stop` come from plait's own parameter names; plait
# parameters the API lacks (`top_k`, `repetition_penalty`) are never sent.
OPENAI_CHAT_PARAMS = frozenset(
    {
        "audio",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "metadata",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "reasoning_effort",
        "response_format",
        "seed",
        "service_tier",
        "store",
        "stream_options",
        "top_logprobs",
        "user",
    }
)

_CHAT_PATH = "/chat/completions"

RESERVED_FIELDS = frozenset({"model", "messages", "stream", "stream_options", "tools", "tool_choice"})
"""Request fields ``extra_body`` may not set: the model, the conversation, and how it is answered."""


class SupportsToOpenAI(Protocol):
    """A tool object that can describe itself as an OpenAI tool dict."""

    def to_openai(self) -> Mapping[str, object]:
        """The OpenAI tool dict (``{"type": "function", "function": {...}}``)."""


ToolSpec: TypeAlias = Union[Mapping[str, object], SupportsToOpenAI]
"""A tool offered to a model: an OpenAI tool dict, a bare function schema, or an object with ``to_openai()``."""

ToolChoice: TypeAlias = Union[str, Mapping[str, object], None]
"""``'auto'``, ``'none'``, ``'required'``, a function name, or ``{"type": "function", "function": {"name": ...}}``."""

Payload: TypeAlias = dict[str, object]
"""A request body, as sent (JSON-encoded) to the server."""


def chat_completions_url(api_base: str) -> str:
    """The chat-completions endpoint for `api_base`.

    ``http://host:8000/v1`` -> ``http://host:8000/v1/chat/completions``; a URL that already
    ends with ``/chat/completions`` is kept; a bare host gets ``/v1/chat/completions``. A
    query string (``?api-version=...``) stays at the end.

    Raises:
        UserError: Not an http(s) URL (the message shows it with any password masked).
    """
    parts = urlsplit(api_base.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        shown = redact_url(api_base)
        raise UserError(f"api_base must be an http(s) URL such as 'http://127.0.0.1:8000/v1', not {shown!r}")
    path = parts.path.rstrip("/")
    if not path.endswith(_CHAT_PATH):
        path = (path or "/v1") + _CHAT_PATH
    return urlunsplit(parts._replace(path=path))


def build_headers(key: str | None, org: str | None = None) -> dict[str, str]:
    """Request headers: JSON content, plus ``Authorization`` only when there is a key."""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if org:
        headers["OpenAI-Organization"] = org
    return headers


def normalize_tool(tool: ToolSpec) -> dict[str, object]:
    """One entry of ``tools``: OpenAI form as is; a bare function schema gets wrapped."""
    if not isinstance(tool, Mapping):
        to_openai = getattr(tool, "to_openai", None)
        if callable(to_openai):
            return dict(to_openai())
        raise UserError(f"tools must be OpenAI tool dicts, not {type(tool).__name__}")
    if "type" in tool:
        return dict(tool)
    if "name" in tool:
        return {"type": "function", "function": dict(tool)}
    raise UserError(f"a tool needs 'type' or 'name': {dict(tool)!r}")


_TOOL_CHOICE_WORDS = ("auto", "none", "required")


def wire_tool_choice(tool_choice: str | Mapping[str, object]) -> str | dict[str, object]:
    """``tool_choice`` as the API takes it: a function's bare name becomes ``{"type": "function", ...}``.

    The API accepts only ``'auto'``, ``'none'``, ``'required'`` or the function object; plait
    also accepts a tool's name (as its other backends do), which servers refuse as it is
    (llama.cpp: HTTP 400 ``Invalid tool_choice``).
    """
    if isinstance(tool_choice, str) and tool_choice not in _TOOL_CHOICE_WORDS:
        return {"type": "function", "function": {"name": tool_choice}}
    return tool_choice if isinstance(tool_choice, str) else dict(tool_choice)


def build_payload(
    model: str,
    messages: Sequence[Mapping[str, object]],
    params: GenParams,
    *,
    stream: bool = False,
    json_mode: bool = False,
    tools: Sequence[ToolSpec] | None = None,
    tool_choice: ToolChoice = None,
    reasoning_replay: ReasoningReplay = "drop",
    reasoning_field: str | None = None,
) -> Payload:
    """The request body for one chat completion.

    Args:
        model: The model name, sent as is (whatever the server knows).
        messages: OpenAI-style messages (already rendered by the template parser).
        params: plait generation parameters: ``max_new_tokens`` -> ``max_tokens`` (no cap;
            skipped when ``max_completion_tokens`` is set), ``stop_words`` -> ``stop``,
            ``temperature``/``top_p``, any of `OPENAI_CHAT_PARAMS`, and ``extra_body``
            (a dict merged last, for server-specific fields such as vLLM's ``top_k``; it
            cannot replace `RESERVED_FIELDS`).
            None values are not sent.
        stream: Ask for SSE streaming (with usage in the last chunk).
        json_mode: ``response_format = {'type': 'json_object'}`` unless one is given.
        tools: Tool schemas for native tool calling.
        tool_choice: ``'auto'``, ``'none'``, ``'required'`` or a specific function (its
            name, or the API's function object; sent as the object).
        reasoning_replay: How the reasoning messages carry (their ``reasoning`` key) is
            sent back: ``'field'``, ``'tags'`` or ``'drop'`` (`plait.llms._reasoning_wire`).
        reasoning_field: The message field of ``'field'`` replay (``'reasoning_content'``...).
    """
    payload: Payload = {"model": model, "messages": replay_messages(messages, reasoning_replay, reasoning_field)}
    if params.get("max_completion_tokens") is None:
        max_tokens = params.get("max_tokens", params.get("max_new_tokens"))
        if max_tokens is not None:
            payload["max_tokens"] = int(max_tokens)
    for name in ("temperature", "top_p"):
        value = params.get(name)
        if value is not None:
            payload[name] = value
    stop = params.get("stop_words")
    if stop:
        payload["stop"] = [stop] if isinstance(stop, str) else list(stop)
    for name, value in params.items():
        if value is not None and name in OPENAI_CHAT_PARAMS:
            payload[name] = value
    if json_mode and "response_format" not in payload:
        payload["response_format"] = {"type": "json_object"}
    if tools:
        payload["tools"] = [normalize_tool(tool) for tool in tools]
        if tool_choice is not None:
            payload["tool_choice"] = wire_tool_choice(tool_choice)
    if stream:
        payload["stream"] = True
        payload.setdefault("stream_options", {"include_usage": True})
    extra = params.get("extra_body")
    if extra:
        replaced = sorted(RESERVED_FIELDS.intersection(extra))
        if replaced:
            raise UserError(f"extra_body cannot replace {replaced}: plait sets them (pass them as arguments)")
        payload.update(extra)
    return payload


def parse_usage(data: object) -> Usage | None:
    """`Usage` from a response's ``usage`` object (None when absent)."""
    if not isinstance(data, (dict, Mapping)):
        return None
    try:
        prompt = int(data.get("prompt_tokens") or 0)
        completion = int(data.get("completion_tokens") or 0)
        total = int(data.get("total_tokens") or (prompt + completion))
    except (TypeError, ValueError):  # a server with odd counts: report none rather than fail the reply
        return None
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)


def _text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return str(content)


def _arguments(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _snippet(body: object) -> str:
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
    return text[:300]


def parse_completion(body: object, think: ThinkTags = "closed") -> ModelResponse:
    """A `ModelResponse` from a decoded (non-streaming) chat-completion body.

    The reply's reasoning (a reasoning field, or inline think tags as `think` says) goes to
    ``reasoning``, never into ``content``.

    Raises:
        LLMResponseError: The body has no ``choices`` (or carries an ``error`` object).
    """
    if not isinstance(body, (dict, Mapping)):
        raise LLMResponseError(f"expected a JSON object from the server, got: {_snippet(body)}")
    choices = body.get("choices")
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], (dict, Mapping)):
        if "error" in body:
            raise LLMResponseError(f"the server returned an error: {_snippet(body['error'])}")
        raise LLMResponseError(f"the response has no 'choices': {_snippet(body)}")
    choice = choices[0]
    try:
        message = choice.get("message") or {}
        calls = [
            ToolCall(
                id=str(call.get("id") or f"call_{i}"),
                name=str((call.get("function") or {}).get("name") or ""),
                arguments=_arguments((call.get("function") or {}).get("arguments")) or "{}",
            )
            for i, call in enumerate(message.get("tool_calls") or ())
        ]
        reasoning, content = reply_reasoning(
            field_reasoning(message), _text(message.get("content")), think, message.get(DETAILS_FIELD)
        )
    except (AttributeError, TypeError) as exc:  # a field of the wrong JSON type
        raise LLMResponseError(f"malformed message in the response: {_snippet(choice)}") from exc
    return ModelResponse(
        content=content,
        tool_calls=calls,
        finish_reason=choice.get("finish_reason"),
        usage=parse_usage(body.get("usage")),
        raw=body,
        reasoning=reasoning,
    )


class StreamAccumulator:
    """Folds streamed chat-completion chunks into the text so far and one final `ModelResponse`.

    Args:
        think: How inline think tags in the content are read (`plait.llms.profiles.ThinkTags`).

    Attributes:
        text: The content received so far, reasoning held back (think blocks never show).
        finish_reason: The finish reason, once a chunk carried one.
        usage: Token counts, once a chunk carried them.
        done: True once ``[DONE]`` arrived.
    """

    __slots__ = ("_calls", "_reasoning", "done", "finish_reason", "usage")

    def __init__(self, think: ThinkTags = "closed") -> None:
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.done = False
        self._calls: dict[int, list[str]] = {}  # index -> [id, name, arguments]
        self._reasoning = ReasoningStream(think)

    @property
    def text(self) -> str:
        """The visible content received so far."""
        return self._reasoning.content

    @property
    def reasoning(self) -> str:
        """The reasoning received so far."""
        return self._reasoning.reasoning

    @property
    def complete(self) -> bool:
        """Whether the stream ended properly (``[DONE]`` or a finish reason), not cut off."""
        return self.done or self.finish_reason is not None

    def feed_data(self, data: str) -> bool:
        """Consume one SSE ``data`` payload; True when the text or the reasoning grew."""
        if data == "[DONE]":
            self.done = True
            return False
        try:
            chunk = loads(data)
        except ParseError as exc:
            raise LLMResponseError(f"the stream carried a chunk that is not JSON: {data[:300]!r}") from exc
        return self.feed(chunk)

    def feed(self, chunk: object) -> bool:
        """Consume one decoded chunk; True when the text or the reasoning grew."""
        if not isinstance(chunk, Mapping):
            raise LLMResponseError(f"the stream carried a chunk that is not an object: {_snippet(chunk)}")
        if "error" in chunk and not chunk.get("choices"):
            raise LLMResponseError(f"the server reported an error mid-stream: {_snippet(chunk['error'])}")
        usage = parse_usage(chunk.get("usage"))
        if usage is not None:
            self.usage = usage
        try:
            return self._feed_choices(json_array(chunk.get("choices")))
        except (AttributeError, TypeError, ValueError) as exc:  # a field of the wrong JSON type
            raise LLMResponseError(f"malformed chunk in the stream: {_snippet(chunk)}") from exc

    def _feed_choices(self, choices: Iterable[object]) -> bool:
        grew = False
        for choice in map(json_object, choices):
            if choice.get("index", 0) != 0:
                continue
            delta = json_object(choice.get("delta") or {})
            if self._reasoning.feed(delta, _text(delta.get("content"))):
                grew = True
            for call in json_array(delta.get("tool_calls")):
                self._feed_call(json_object(call))
            reason = choice.get("finish_reason")
            if reason:
                self.finish_reason = str(reason)
        return grew

    def _feed_call(self, call: Mapping[str, object]) -> None:
        index = call.get("index")
        if index is None:  # servers that send whole calls without an index
            call_id = call.get("id")
            known = [i for i, entry in self._calls.items() if entry[0] == call_id]
            index = known[0] if known else (len(self._calls) if call_id or not self._calls else max(self._calls))
        entry = self._calls.setdefault(count(index), ["", "", ""])
        if call.get("id"):
            entry[0] = str(call["id"])
        function = json_object(call.get("function") or {})
        name = function.get("name")
        if name and name != entry[1]:
            entry[1] = entry[1] + str(name) if entry[1] else str(name)
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            entry[2] += arguments
        elif arguments is not None:
            entry[2] = _arguments(arguments)

    def response(self) -> ModelResponse:
        """Everything received, as one `ModelResponse`."""
        calls = [
            ToolCall(id=entry[0] or f"call_{index}", name=entry[1], arguments=entry[2] or "{}")
            for index, entry in sorted(self._calls.items())
        ]
        self._reasoning.finish()
        reasoning, content = self._reasoning.result()
        return ModelResponse(
            content=content, tool_calls=calls, finish_reason=self.finish_reason, usage=self.usage, reasoning=reasoning
        )
