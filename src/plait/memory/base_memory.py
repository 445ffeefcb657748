"""`Memory`: the ordered messages of one session."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, Union

from ..exceptions import StateDictError, UserError
from ..schema import AgentMessage
from ..types import JSONValue

__all__ = ["ContextSummary", "Memory", "MemoryJournal", "MessageLike"]

MessageLike = Union[AgentMessage, str, Mapping[str, object]]


def to_message(item: MessageLike) -> AgentMessage:
    """Turn a str (a user message), a dict (message fields) or a message into an `AgentMessage`."""
    if isinstance(item, AgentMessage):
        return item
    if isinstance(item, str):
        return AgentMessage(sender="user", content=item)
    if isinstance(item, Mapping):
        return AgentMessage(**item)
    raise UserError(f"memory holds AgentMessage, str or dict items, not {type(item).__name__}")


@dataclass(frozen=True)
class ContextSummary:
    """A session's running summary of its older messages, written by a ``'summarise'`` `ContextPolicy`.

    It stands for the first `covers` messages of the session's requests after their system
    messages; `digest` (of those messages) tells when they changed and the summary no
    longer applies. The messages themselves stay in memory: the summary is kept alongside.

    Attributes:
        text: The summary.
        covers: How many messages it stands for.
        digest: The SHA-256 of those messages (`plait.context.summary.digest`).
    """

    text: str
    covers: int
    digest: str

    def to_dict(self) -> dict[str, str | int]:
        """The summary as plain JSON data."""
        return {"text": self.text, "covers": self.covers, "digest": self.digest}

    @classmethod
    def from_dict(cls, data: object) -> ContextSummary:
        """Read what `to_dict` wrote.

        Raises:
            StateDictError: `data` is not a summary.
        """
        if isinstance(data, Mapping):
            text, covers, digest = data.get("text"), data.get("covers"), data.get("digest")
            if isinstance(text, str) and isinstance(digest, str) and type(covers) is int and covers >= 0:
                return cls(text, covers, digest)
        raise StateDictError(f"not a context summary: {str(data)[:200]!r}", [], [])


class MemoryJournal(Protocol):
    """Told about every change of a `Memory` (a `SessionStore` writes them to disk)."""

    def append(self, start: int, messages: Sequence[AgentMessage]) -> None:
        """`messages` were added at positions ``start``, ``start + 1``, ..."""

    def truncate(self, length: int) -> None:
        """Every message from position `length` on was dropped."""

    def rewrite(self, messages: Sequence[AgentMessage]) -> None:
        """The memory now holds exactly `messages` (after a delete, load or reset; none: the summary goes too)."""

    def summarise(self, summary: ContextSummary | None) -> None:
        """The memory's running summary is now `summary` (None: it has none)."""

    def pause(self, state: dict[str, JSONValue] | None, wait: bool = False) -> None:
        """The session's run paused with `state` (None: no paused run); `wait`: until it is on disk."""


class Memory:
    """The messages of one session, oldest first.

    Args:
        recent_n: When set, `get_memory` returns only the last ``recent_n`` messages by default.
        max_messages: A cap on what is *stored* (None: no cap): after each completed agent
            call the oldest messages beyond it are dropped, from the start of a turn on, so a
            tool result never outlives its call (see `cap`). Separate from what a context
            policy *sends* (`plait.context`), which never drops stored messages.

    Attributes:
        journal: When set (by `MemoryManager` bound to a `SessionStore`), every change
            is reported to it.
        summary: The running summary a ``'summarise'`` `ContextPolicy` keeps of the older
            messages (None: none yet); `set_summary` changes it.

    Example:
        ```python
        memory = Memory()
        memory.add(['hi', AgentMessage(sender='Agent', content='hello')])
        [m.content for m in memory.get_memory()]  # ['hi', 'hello']
        ```
    """

    def __init__(self, recent_n: int | None = None, max_messages: int | None = None) -> None:
        if recent_n is not None and recent_n < 0:
            raise UserError(f"recent_n must be >= 0, got {recent_n}")
        if max_messages is not None and (
            isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1
        ):
            raise UserError(f"max_messages must be an int >= 1 or None, got {max_messages!r}")
        self.memory: list[AgentMessage] = []
        self.recent_n = recent_n
        self.max_messages = max_messages
        self.journal: MemoryJournal | None = None
        self.summary: ContextSummary | None = None

    def get_memory(
        self,
        recent_n: int | None = None,
        filter_func: Callable[[int, AgentMessage], bool] | None = None,
    ) -> list[AgentMessage]:
        """Return the last ``recent_n`` messages (all when unset), keeping those `filter_func(index, msg)` accepts."""
        n = self.recent_n if recent_n is None else recent_n
        messages = self.memory if n is None else (self.memory[-n:] if n > 0 else [])
        if filter_func is None:
            return list(messages)
        offset = len(self.memory) - len(messages)
        return [m for i, m in enumerate(messages, offset) if filter_func(i, m)]

    def add(self, memories: MessageLike | Sequence[MessageLike] | None) -> None:
        """Append a message, a str (as a user message), a dict, or a list/tuple of those; None adds nothing."""
        if memories is None:
            return
        if isinstance(memories, (AgentMessage, str, dict, Mapping)):  # concrete classes first: no ABC check
            new = [to_message(memories)]
        elif isinstance(memories, (list, tuple)):
            new = [to_message(m) for m in memories]
        else:
            raise UserError(f"memory holds AgentMessage, str or dict items, not {type(memories).__name__}")
        start = len(self.memory)
        self.memory.extend(new)
        if self.journal is not None and new:
            self.journal.append(start, new)

    def delete(self, index: int | Iterable[int]) -> None:
        """Delete the message at `index`, or the messages at every index of a list (indices as they are now)."""
        if isinstance(index, int):
            del self.memory[index]
        else:
            size = len(self.memory)
            positions = {i % size if -size <= i < size else self._bad_index(i) for i in index}
            for i in sorted(positions, reverse=True):
                del self.memory[i]
        if self.journal is not None:
            self.journal.rewrite(self.memory)

    def _bad_index(self, index: int) -> int:
        raise IndexError(f"memory index {index} out of range for {len(self.memory)} messages")

    def truncate(self, length: int) -> None:
        """Keep only the first `length` messages (used to undo a failed call)."""
        before = len(self.memory)
        del self.memory[length:]
        if self.journal is not None and len(self.memory) < before:
            self.journal.truncate(len(self.memory))

    def cap(self) -> int:
        """Drop the oldest messages beyond ``max_messages``; how many were dropped.

        The cut moves forward to the next user message, so what stays starts with a turn and
        never with the result of a call that was dropped (fewer messages than the cap may
        stay); with no user message after it, past the tool results at least.
        """
        if self.max_messages is None or len(self.memory) <= self.max_messages:
            return 0
        start = len(self.memory) - self.max_messages
        cut = next((i for i in range(start, len(self.memory)) if self.memory[i].sender == "user"), start)
        while cut < len(self.memory) - 1 and _is_tool_result(self.memory[cut]):
            cut += 1
        del self.memory[:cut]
        if self.journal is not None:
            self.journal.rewrite(self.memory)
        return cut

    def set_summary(self, summary: ContextSummary | None) -> None:
        """Keep `summary` as the running summary of the older messages (None: drop it)."""
        self.summary = summary
        if self.journal is not None:
            self.journal.summarise(summary)

    def reset(self) -> None:
        """Forget every message and the summary."""
        self.memory.clear()
        self.summary = None
        if self.journal is not None:
            self.journal.rewrite([])

    def load(self, memories: Mapping[str, object] | Iterable[MessageLike], overwrite: bool = True) -> None:
        """Load messages saved by `save` (dicts) or messages; replaces the current ones unless `overwrite=False`."""
        journal, self.journal = self.journal, None  # one rewrite at the end, not an append per message
        try:
            if overwrite:
                self.memory = []
            self.add([memories] if isinstance(memories, Mapping) else list(memories))
        finally:
            self.journal = journal
        if journal is not None:
            journal.rewrite(self.memory)

    def save(self) -> list[dict[str, object]]:
        """The messages as plain dicts (`AgentMessage.model_dump()`)."""
        return [m.model_dump() for m in self.memory]

    def __len__(self) -> int:
        return len(self.memory)

    def __repr__(self) -> str:
        cap = "" if self.max_messages is None else f", max_messages={self.max_messages}"
        return f"Memory(recent_n={self.recent_n}{cap}, messages={len(self.memory)})"


def _is_tool_result(message: AgentMessage) -> bool:
    """Whether `message` answers a tool call (it must not be kept without the call)."""
    extra = message.extra_info
    return message.sender == "ActionExecutor" or (isinstance(extra, Mapping) and "tool_call_id" in extra)
