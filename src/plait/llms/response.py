"""Structured model output shared by every backend: text, native tool calls, usage."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..types import JSONValue, ToolCallRecord
from ..untrusted import as_text

__all__ = ["ModelResponse", "ToolCall", "Usage"]


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


@dataclass
class ModelResponse:
    """A complete model reply.

    Attributes:
        content: The reply text ("" when the model only called tools).
        tool_calls: Native tool calls, in the order the model made them.
        finish_reason: Why generation stopped (``'stop'``, ``'length'``, ``'tool_calls'``...).
        usage: Token counts, when the backend reports them.
        raw: The backend's decoded response body, for diagnosis.
    """

    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    raw: object = None

    def __post_init__(self) -> None:
        self.content = as_text(self.content)  # what reaches memory is clean text, whatever the server sent
