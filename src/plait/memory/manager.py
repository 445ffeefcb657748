"""`MemoryManager`: one `Memory` per session id."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from typing_extensions import TypedDict, Unpack

from ..schema import AgentMessage
from ..types import JSONValue
from ..utils.config import create_object
from .base_memory import ContextSummary, Memory, MessageLike

if TYPE_CHECKING:
    from .backend import SessionBackend, SessionWriter, StoredSession, Turn

__all__ = ["MemoryManager"]


@runtime_checkable
class _TurnJournal(Protocol):
    """A journal that tracks agent calls (a `SessionBackend`'s)."""

    def open_turn(self, mark: int) -> Turn:
        """A call starts on a memory of `mark` messages."""


class _MemoryQuery(TypedDict, total=False):
    """The keyword arguments `MemoryManager.get_memory` passes on to `Memory.get_memory`."""

    recent_n: int | None
    filter_func: Callable[[int, AgentMessage], bool] | None


class MemoryManager:
    """Keeps a separate `Memory` for every session id, created on first use.

    Args:
        cfg: The memory to create per session: a config dict such as
            ``dict(type=Memory, recent_n=10)``, a `Memory` subclass, or None for `Memory()`.

    Example:
        ```python
        manager = MemoryManager(dict(type=Memory))
        manager.add(AgentMessage(content='hi'), session_id=7)
        manager.get_memory(7)  # [AgentMessage(content='hi', ...)]
        manager.reset(7)
        ```
    """

    def __init__(self, cfg: Mapping[str, object] | type[Memory] | None = None) -> None:
        self.cfg: Mapping[str, object] = cfg if isinstance(cfg, Mapping) else {"type": cfg or Memory}
        self.memory_map: dict[Hashable, Memory] = {}
        self.store: SessionBackend | None = None
        self.keypath = "memory"

    def bind(self, store: SessionBackend, keypath: str) -> None:
        """Keep this manager's sessions in `store` under `keypath` (see `SessionBackend.attach`).

        Sessions held now are written to the store (replacing what it holds of them); others
        are read from it on first use.
        """
        self.store, self.keypath = store, keypath
        for session_id, memory in self.memory_map.items():
            journal = store.journal(keypath, session_id)
            journal.claim(memory.memory)
            journal.summarise(memory.summary)
            memory.journal = journal

    def _new(self, session_id: Hashable, journal: SessionWriter | None = None) -> Memory:
        kind = self.cfg.get("type")
        memory: Memory = kind() if len(self.cfg) == 1 and isinstance(kind, type) else create_object(self.cfg)
        if self.store is not None:
            memory.journal = journal if journal is not None else self.store.journal(self.keypath, session_id)
        self.memory_map[session_id] = memory
        return memory

    def create_instance(self, session_id: Hashable) -> Memory:
        """Create (replacing any old one) and return the memory of `session_id`."""
        memory = self._new(session_id)
        if memory.journal is not None:
            memory.journal.rewrite([])
        return memory

    def _held(self, session_id: Hashable) -> Memory | None:
        """The session's memory in this process (None: none, or one the file must be read for again).

        A memory whose store write failed (`SessionJournal.stale`: another writer changed the
        session, the disk was full...) is dropped once no call is open on it: it is read back,
        so memory holds what the file holds.
        """
        memory = self.memory_map.get(session_id)
        if memory is not None and memory.journal is not None and getattr(memory.journal, "stale", False):
            del self.memory_map[session_id]
            return None
        return memory

    def _stored(self, session_id: Hashable) -> Memory | None:
        """The session's memory: in this process, or read back from the bound store (None: it has none)."""
        memory = self._held(session_id)
        if memory is not None or self.store is None:
            return memory
        stored = self.store.load(self.keypath, session_id)
        return self._adopt(session_id, stored) if stored.found else None

    def _session(self, session_id: Hashable) -> Memory:
        """The session's memory, created when it has none."""
        memory = self._held(session_id)
        if memory is not None:
            return memory
        if self.store is None:
            return self._new(session_id)
        return self._adopt(session_id, self.store.load(self.keypath, session_id))

    def _adopt(self, session_id: Hashable, stored: StoredSession) -> Memory:
        """A memory holding what the file holds, written on by the journal that read it."""
        memory = self._new(session_id, stored.journal)
        journal, memory.journal = memory.journal, None
        memory.load(stored.messages)
        memory.summary = stored.summary
        memory.paused_run = stored.run
        memory.journal = journal
        return memory

    def keep_paused_run(self, state: dict[str, JSONValue] | None, session_id: Hashable = 0, wait: bool = False) -> None:
        """Store the state of the session's run paused for approval (None: it is over) in the bound store.

        Without a store nothing happens (the agent holds the run). With `wait`, return once
        it is on disk.
        """
        memory = self._stored(session_id) if self.store is not None else None
        if memory is not None and memory.journal is not None:
            memory.journal.pause(state, wait)

    def set_summary(self, summary: ContextSummary | None, session_id: Hashable = 0) -> None:
        """Keep `summary` as the running summary of a session's older messages (see `Memory.set_summary`)."""
        self._session(session_id).set_summary(summary)

    def add(self, memories: MessageLike | Sequence[MessageLike] | None, session_id: Hashable = 0) -> None:
        """Add messages to a session's memory."""
        self._session(session_id).add(memories)

    def get(self, session_id: Hashable = 0) -> Memory | None:
        """The `Memory` of a session, or None if it has none."""
        return self._stored(session_id)

    def get_memory(self, session_id: Hashable = 0, **kwargs: Unpack[_MemoryQuery]) -> list[AgentMessage]:
        """A session's messages (see `Memory.get_memory` for `recent_n` / `filter_func`); [] for an unknown session."""
        memory = self._stored(session_id)
        return memory.get_memory(**kwargs) if memory is not None else []

    def length(self, session_id: Hashable = 0) -> int:
        """How many messages a session holds."""
        memory = self._stored(session_id)
        return len(memory) if memory is not None else 0

    def cap(self, session_id: Hashable = 0) -> int:
        """Apply the session's ``max_messages`` storage cap (see `Memory.cap`); how many messages were dropped."""
        memory = self._stored(session_id)
        return memory.cap() if memory is not None else 0

    def truncate(self, session_id: Hashable, length: int) -> None:
        """Drop a session's messages after the first `length` (undo of a failed call)."""
        memory = self._stored(session_id)
        if memory is not None:
            memory.truncate(length)

    def open_turn(self, session_id: Hashable, mark: int) -> Turn | None:
        """An agent call starts on a session of `mark` messages: the bound store's `Turn`, None without a store.

        The call path commits the turn when the call returns (it is then durable) or abandons
        it after rolling the memory back (also when the commit failed); a turn still open when
        the session is read back in a new process is removed.
        """
        if self.store is None:
            return None
        journal = self._session(session_id).journal  # held from now on: never read back while it is open
        return journal.open_turn(mark) if isinstance(journal, _TurnJournal) else None

    def reset(self, session_id: Hashable = 0) -> None:
        """Forget a session entirely (in the bound store too)."""
        memory = self.memory_map.pop(session_id, None)
        if self.store is not None:
            journal = memory.journal if memory is not None else self.store.journal(self.keypath, session_id)
            if journal is not None:
                journal.rewrite([])

    def evict(self, session_id: Hashable = 0) -> None:
        """Drop a session from this process only: a bound store keeps it (read back on its next use).

        Without a store the session is forgotten, as by `reset`.
        """
        self.memory_map.pop(session_id, None)

    def sessions(self) -> list[Hashable]:
        """The session ids that have a memory (in this process, or in the bound store)."""
        if self.store is None:
            return list(self.memory_map)
        stored = self.store.sessions(self.keypath)
        return list(self.memory_map) + [s for s in stored if s not in self.memory_map]

    def __contains__(self, session_id: object) -> bool:
        return session_id in self.memory_map or self._stored(session_id) is not None

    def __repr__(self) -> str:
        return f"MemoryManager(sessions={len(self.memory_map)})"
