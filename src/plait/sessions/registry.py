"""`SessionRegistry`: the sessions of one agent tree, and the store that keeps them.

Every agent tree has one registry (an agent made alone has its own; assigning it as a
sub-agent moves its subtree, and the sessions its agents hold, into the parent's). A
registry maps session ids to `Session`s; an agent finds its part of one under its dotted
path. Bound to a store (`SessionStore.attach`), a registry writes every change through the
memories' journals and reads a session's parts back from the store on their first use.

What a store must offer here is `SessionSource` (`SessionStore` does).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..types import JSONValue
from .session import AgentPart, Session, memory_keypath

if TYPE_CHECKING:
    from ..memory.backend import SessionWriter, StoredSession, Turn
    from ..memory.base_memory import Memory

__all__ = ["MemoryFactory", "SessionRegistry", "SessionSource"]

MemoryFactory = Callable[[], "Memory"]
"""Makes an agent's empty memory for a new session (from its memory config)."""


class SessionSource(Protocol):
    """What a registry asks of the store it is bound to."""

    @property
    def shared(self) -> bool:
        """Whether other processes take turns on the same sessions (each call then checks it holds the latest)."""

    def journal(self, keypath: str, session_id: Hashable) -> SessionWriter:
        """The writer of one memory's changes, for a session not read from the store."""

    def load(self, keypath: str, session_id: Hashable) -> StoredSession:
        """One memory's stored session, with the journal that goes on writing it."""

    def sessions(self, keypath: str = "memory") -> list[Hashable]:
        """The ids of the sessions stored for a memory."""


@runtime_checkable
class _CheckedJournal(Protocol):
    """A journal that can tell whether the store still holds what it last read or wrote (`SessionWriter`)."""

    def current(self) -> bool:
        """False: another writer changed the session since."""


@runtime_checkable
class _TurnJournal(Protocol):
    """A journal that tracks agent calls (`SessionWriter`)."""

    def open_turn(self, mark: int) -> Turn:
        """A call starts on a memory of `mark` messages."""


class SessionRegistry:
    """The sessions of one agent tree (see the module docstring)."""

    __slots__ = ("sessions", "store")

    def __init__(self) -> None:
        self.sessions: dict[Hashable, Session] = {}
        self.store: SessionSource | None = None

    # -- sessions --

    def session(self, session_id: Hashable) -> Session:
        """The session `session_id` (created empty on first use)."""
        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = Session(session_id)
        return session

    def part(self, session_id: Hashable, path: str) -> AgentPart | None:
        """The part of the agent at `path` in a session held in this process (None: none)."""
        session = self.sessions.get(session_id)
        return None if session is None else session.parts.get(path)

    def drop(self, session_id: Hashable, paths: Iterable[str]) -> None:
        """Drop the parts at `paths` of a session from this process (a bound store keeps them)."""
        session = self.sessions.get(session_id)
        if session is None:
            return
        for path in paths:
            session.parts.pop(path, None)
        if session.empty():
            del self.sessions[session_id]

    def move(self, path: str, target: SessionRegistry, new_path: str) -> None:
        """Hand every session's part at `path` to `target` under `new_path` (an agent joined another tree)."""
        if target is self and new_path == path:
            return
        for session_id, session in list(self.sessions.items()):
            part = session.parts.pop(path, None)
            if part is not None and not part.empty():
                target.session(session_id).parts[new_path] = part
            if session.empty():
                del self.sessions[session_id]

    # -- memories --

    def held(self, session_id: Hashable, path: str) -> Memory | None:
        """The memory at `path` held in this process (None: none, or one the store must be read for again).

        A memory whose store write failed (`SessionWriter.stale`: another writer changed the
        session, the disk was full...) is dropped once no call is open on it: it is read back,
        so memory holds what the store holds.
        """
        session = self.sessions.get(session_id)
        part = None if session is None else session.parts.get(path)
        if part is None or part.memory is None:
            return None
        memory = part.memory
        if memory.journal is not None and getattr(memory.journal, "stale", False):
            part.memory = None
            return None
        return memory

    def stored(self, session_id: Hashable, path: str, factory: MemoryFactory) -> Memory | None:
        """The memory at `path`: held, or read back from the bound store (None: it has none)."""
        memory = self.held(session_id, path)
        if memory is not None or self.store is None:
            return memory
        stored = self.store.load(memory_keypath(path), session_id)
        return self._adopt(session_id, path, factory, stored) if stored.found else None

    def memory(self, session_id: Hashable, path: str, factory: MemoryFactory) -> Memory:
        """The memory at `path`, created (or read back from the bound store) when it has none."""
        memory = self.held(session_id, path)
        if memory is not None:
            return memory
        if self.store is None:
            return self.new_memory(session_id, path, factory)
        return self._adopt(session_id, path, factory, self.store.load(memory_keypath(path), session_id))

    def new_memory(
        self, session_id: Hashable, path: str, factory: MemoryFactory, journal: SessionWriter | None = None
    ) -> Memory:
        """A new empty memory at `path` (replacing any), written on by `journal` or a new one of the store."""
        memory = factory()
        if self.store is not None:
            memory.journal = journal if journal is not None else self.store.journal(memory_keypath(path), session_id)
        self.session(session_id).part(path).memory = memory
        return memory

    def _adopt(self, session_id: Hashable, path: str, factory: MemoryFactory, stored: StoredSession) -> Memory:
        """A memory holding what the store holds, written on by the journal that read it."""
        memory = self.new_memory(session_id, path, factory, stored.journal)
        journal, memory.journal = memory.journal, None
        memory.load(stored.messages)
        memory.summary = stored.summary
        memory.journal = journal
        self.session(session_id).part(path).stored_run = stored.run
        return memory

    def forget_memory(self, session_id: Hashable, path: str) -> None:
        """Forget the memory at `path` entirely (in the bound store too)."""
        part = self.part(session_id, path)
        memory = None if part is None else part.memory
        if part is not None:
            part.memory = None
            part.stored_run = None
        if self.store is not None:
            journal = memory.journal if memory is not None else self.store.journal(memory_keypath(path), session_id)
            if journal is not None:
                journal.rewrite([])
        self.prune(session_id)

    def evict_memory(self, session_id: Hashable, path: str) -> None:
        """Drop the memory at `path` from this process only (a bound store keeps it)."""
        part = self.part(session_id, path)
        if part is not None:
            part.memory = None
            part.stored_run = None
        self.prune(session_id)

    def prune(self, session_id: Hashable) -> None:
        """Forget a session that holds nothing and runs nothing."""
        session = self.sessions.get(session_id)
        if session is not None and session.empty():
            del self.sessions[session_id]

    def memories(self, path: str) -> dict[Hashable, Memory]:
        """Every session's memory at `path` held in this process, by session id."""
        found: dict[Hashable, Memory] = {}
        for session_id, session in self.sessions.items():
            part = session.parts.get(path)
            if part is not None and part.memory is not None:
                found[session_id] = part.memory
        return found

    def stored_ids(self, path: str) -> list[Hashable]:
        """The session ids with a memory at `path`, in this process or in the bound store."""
        held = list(self.memories(path))
        if self.store is None:
            return held
        return held + [s for s in self.store.sessions(memory_keypath(path)) if s not in held]

    def refresh(self, session_id: Hashable, path: str) -> bool:
        """A call starts at `path`: drop the agent's part when a shared store holds a newer session.

        With a store shared by processes (``shared=True``: several server workers), a session's
        turns may run anywhere; what this process holds of it is checked against the store (one
        round trip) and, when another process changed it since, dropped, so the call reads the
        session back. Without a shared store, nothing is asked (a stale writer is refused instead).

        Returns:
            Whether the part was dropped.
        """
        store = self.store
        if store is None or not store.shared:
            return False
        part = self.part(session_id, path)
        memory = None if part is None else part.memory
        journal = None if memory is None else memory.journal
        if part is None or journal is None or not isinstance(journal, _CheckedJournal) or journal.current():
            return False
        part.memory = None
        part.run = part.stored_run = None
        return True

    # -- runs and turns --

    def pause(
        self,
        session_id: Hashable,
        path: str,
        factory: MemoryFactory | None,
        state: dict[str, JSONValue] | None,
        wait: bool,
    ) -> None:
        """Keep the state of a run paused for approval (None: it is over) with the session in the bound store."""
        if self.store is None or factory is None:
            return
        memory = self.stored(session_id, path, factory)
        if memory is not None and memory.journal is not None:
            memory.journal.pause(state, wait)

    def open_turn(self, session_id: Hashable, path: str, factory: MemoryFactory, mark: int) -> Turn | None:
        """A call starts on the memory at `path` of `mark` messages: the store's `Turn` (None without a store)."""
        if self.store is None:
            return None
        journal = self.memory(session_id, path, factory).journal  # held from now on: never read back while open
        return journal.open_turn(mark) if isinstance(journal, _TurnJournal) else None

    # -- the store --

    def bind(self, store: SessionSource, paths: Iterable[str]) -> None:
        """Keep this registry's sessions in `store`: memories at `paths` held now are written there now.

        The others are read from the store on first use.
        """
        self.store = store
        for path in paths:
            keypath = memory_keypath(path)
            for session_id, memory in self.memories(path).items():
                journal = store.journal(keypath, session_id)
                journal.claim(memory.memory)
                journal.summarise(memory.summary)
                memory.journal = journal

    def __repr__(self) -> str:
        bound = "" if self.store is None else f", store={self.store!r}"
        return f"SessionRegistry(sessions={len(self.sessions)}{bound})"
