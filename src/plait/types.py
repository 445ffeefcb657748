"""Shared type names for the payloads plait passes around.

These are the shapes the core hands between its parts — chat messages for a model,
session ids, JSON values — named once so signatures say what they carry instead of
``Any``. They are plain typing constructs: nothing here exists at run time beyond the
names, and a `ChatMessage` is an ordinary ``dict``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias, Union

from typing_extensions import NotRequired, TypedDict

if TYPE_CHECKING:
    from .memory.base_memory import Memory

__all__ = [
    "Aggregator",
    "ChatInput",
    "ChatMessage",
    "ChatRole",
    "JSONValue",
    "SessionId",
    "SessionIds",
    "ToolCallFunction",
    "ToolCallRecord",
]

SessionId: TypeAlias = Hashable
"""What names a conversation: any hashable (Lagent uses ``int``; strings work too)."""

SessionIds: TypeAlias = Union[SessionId, Sequence[SessionId], None]
"""The ``session_ids`` a model method accepts: one id, one per prompt, or none."""

JSONValue: TypeAlias = Union[bool, int, float, str, Sequence["JSONValue"], Mapping[str, "JSONValue"], None]
"""A value that survives ``json.dumps`` / ``json.loads`` unchanged in meaning."""

ChatRole: TypeAlias = Literal["system", "user", "assistant", "tool", "environment", "function"]


class ToolCallFunction(TypedDict):
    """The ``function`` member of an OpenAI-style tool call."""

    name: str
    arguments: str


class ToolCallRecord(TypedDict):
    """One tool call of an assistant message in OpenAI's shape."""

    id: str
    type: Literal["function"]
    function: ToolCallFunction


class ChatMessage(TypedDict):
    """One message of a model prompt (the OpenAI chat shape plait's templates produce).

    ``role`` is a `ChatRole` in practice, but meta templates may define their own role
    names (InternLM's ``environment`` with a ``name``), so it is typed ``str``.
    """

    role: str
    content: str
    name: NotRequired[str]
    tool_calls: NotRequired[list[ToolCallRecord]]
    tool_call_id: NotRequired[str]


ChatInput: TypeAlias = Union[str, Sequence[Mapping[str, object]]]
"""What a model's ``chat`` accepts: a bare prompt, or a list of message mappings."""


class Aggregator(Protocol):
    """Turns a session's memory into the messages a model receives (`DefaultAggregator` and kin)."""

    def aggregate(
        self, messages: Memory, name: str, parser: object = None, system_instruction: object = None
    ) -> list[dict[str, object]]:
        """The chat messages for `messages`, seen by agent `name`, behind `system_instruction`."""
        ...
