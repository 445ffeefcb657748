"""Structured model output shared by every backend: text, native tool calls, usage."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..schema import Reasoning
from ..types import JSONValue, ToolCallRecord
from ..untrusted import as_text

__all__ = [
    "ModelResponse",
    "ToolCall",
    "ToolCallsSoFar",
    "TurnTokenIds",
    "Usage",
    "reasoning_so_far",
    "unique_call_ids",
]


def unique_call_ids(ids: Sequence[str | None], blank: str = "call_{}") -> list[str]:
    """The ids of one turn's tool calls, made unique: what a decision, a result and the model name.

    A model (or a server) may give two calls of a turn the same id, or none. Those calls
    could not be told apart afterwards: a person approving ``X`` would approve both, a
    result for ``X`` would answer both. So, before a turn is stored or paused, an empty id
    becomes `blank` formatted with the call's place in the turn (``call_0``), and an id
    already taken gets the first free ``_<n>`` suffix (``X``, ``X_1``); the first holder of
    an id keeps it. The new ids are what the turn records, so the model sees its calls
    and their results under the same ids.

    Args:
        ids: The ids as given, in call order.
        blank: The pattern for a missing id (``{}``: the call's index).

    Returns:
        The ids to use, in the same order (the given list's values where they were fine).
    """
    given = [call_id or "" for call_id in ids]
    if "" not in given and len(set(given)) == len(given):
        return given
    taken = {call_id for call_id in given if call_id}
    kept: set[str] = set()
    unique: list[str] = []
    for index, call_id in enumerate(given):
        if call_id and call_id not in kept:
            kept.add(call_id)
            unique.append(call_id)
            continue
        base = call_id or blank.format(index)
        candidate, n = base, 1
        while candidate in taken or candidate in kept:
            candidate, n = f"{base}_{n}", n + 1
        kept.add(candidate)
        unique.append(candidate)
    return unique


@dataclass
class ToolCall:
    """One native tool call requested by the model.

    Attributes:
        id: The call id the model gave (echoed back with the tool's result).
        name: The tool (function) name.
        arguments: The raw JSON argument text, exactly as the model wrote it.
    """

    id: str
    name: str
    arguments: str = "{}"

    def __post_init__(self) -> None:
        # A server may send anything here (numbers, objects, lone surrogates): keep clean strings only.
        self.id, self.name = as_text(self.id), as_text(self.name)
        self.arguments = as_text(self.arguments)

    def parsed_arguments(self) -> JSONValue:
        """The arguments decoded from JSON (raises `json.JSONDecodeError` when the model wrote invalid JSON)."""
        value: JSONValue = json.loads(self.arguments or "{}")
        return value

    def to_openai(self) -> ToolCallRecord:
        """The OpenAI wire form (an item of an assistant message's ``tool_calls``)."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class ToolCallsSoFar:
    """The extra of a streamed item (``stream_chat(..., tools=...)``) while the model writes native tool calls.

    A streaming item's extra is otherwise the reasoning so far (a `Reasoning`, or None);
    once the model has begun a tool call it is this, with the reasoning inside. The `END`
    item's extra is the `ModelResponse`, whose calls are the ones to run.

    Attributes:
        tool_calls: The calls so far, in the turn's order: each one's ``id`` (``''`` until
            the model gave it), ``name`` and the ``arguments`` text so far (JSON still being
            written, never shown as text).
        reasoning: The reasoning so far (None: none).
    """

    tool_calls: tuple[ToolCall, ...]
    reasoning: Reasoning | None = None


def reasoning_so_far(extra: object) -> Reasoning | None:
    """The reasoning a streamed item's extra carries (a `Reasoning`, or inside `ToolCallsSoFar`)."""
    if isinstance(extra, ToolCallsSoFar):
        return extra.reasoning
    return extra if isinstance(extra, Reasoning) else None


@dataclass
class Usage:
    """Token counts of one request (or a running total)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def add(self, other: Usage) -> None:
        """Accumulate `other` into this total."""
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens


@dataclass(frozen=True)
class TurnTokenIds:
    """The exact tokens of one model turn, where the engine or server gave them (`ModelResponse.tokens`).

    Attributes:
        prompt_ids: The whole rendered prompt's token ids (None: the source could not give them).
        completion_ids: The sampled token ids, in order.
        logprobs: Each sampled token's log-probability (None: not given).
    """

    prompt_ids: list[int] | None
    completion_ids: list[int]
    logprobs: list[float] | None = None


@dataclass
class ModelResponse:
    """A complete model reply.

    Attributes:
        content: The reply text ("" when the model only called tools).
        tool_calls: Native tool calls, in the order the model made them.
        finish_reason: Why generation stopped (``'stop'``, ``'length'``, ``'tool_calls'``...).
        usage: Token counts, when the backend reports them.
        raw: The backend's decoded response body, for diagnosis.
        reasoning: The model's reasoning, apart from `content` (None when it gave none).
        tokens: The turn's exact token ids and log-probabilities, when the backend gave them
            (the embedded engine asked with ``logprobs=True``); None otherwise.
    """

    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    raw: object = None
    reasoning: Reasoning | None = None
    tokens: TurnTokenIds | None = None

    def __post_init__(self) -> None:
        self.content = as_text(self.content)  # what reaches memory is clean text, whatever the server sent
        if self.tool_calls:  # one id names one call: a duplicate or missing id is re-issued
            given = [call.id for call in self.tool_calls]
            ids = unique_call_ids(given)
            if ids != given:
                self.tool_calls = [
                    call if call.id == call_id else ToolCall(call_id, call.name, call.arguments)
                    for call, call_id in zip(self.tool_calls, ids, strict=True)
                ]
