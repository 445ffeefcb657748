"""`MemoryManager`: one agent's memories, one per session id (a view of the agent's sessions)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING

from typing_extensions import TypedDict, Unpack

from ..schema import AgentMessage
from ..sessions import SessionRegistry, SessionSource
from ..utils.config import create_object
from .base_memory import ContextSummary, Memory, MessageLike

if TYPE_CHECKING:
    from .backend import Turn

__all__ = ["MemoryManager"]


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
        self._registry = SessionRegistry()  # its own until an agent adopts it (`_attach`)
        self._path = ""
        self._factory = self.make  # bound once: the registry calls it for a new session

    def _attach(self, registry: SessionRegistry, path: str, move: bool = True) -> None:
        """Be the view of the memories at `path` in `registry` (`move`: those held now move there)."""
        if move:
            self._registry.move(self._path, registry, path)
        self._registry, self._path = registry, path

    def make(self) -> Memory:
        """A new empty memory, as `cfg` describes it."""
        kind = self.cfg.get("type")
        memory: Memory = kind() if len(self.cfg) == 1 and isinstance(kind, type) else create_object(self.cfg)
        return memory

    @property
    def store(self) -> SessionSource | None:
        """The store the sessions are kept in (`SessionStore.attach`), or None."""
        return self._registry.store

    @property
    def memory_map(self) -> dict[Hashable, Memory]:
        """The memories held in this process, by session id (a snapshot)."""
        return self._registry.memories(self._path)

    def held(self, session_id: Hashable) -> Memory | None:
        """The session's memory held in this process (None: none, or not read back from the store yet)."""
        return self._registry.held(session_id, self._path)

    def create_instance(self, session_id: Hashable) -> Memory:
        """Create (replacing any old one) and return the memory of `session_id`."""
        memory = self._registry.new_memory(session_id, self._path, self._factory)
        if memory.journal is not None:
            memory.journal.rewrite([])
        return memory

    def set_summary(self, summary: ContextSummary | None, session_id: Hashable = 0) -> None:
        """Keep `summary` as the running summary of a session's older messages (see `Memory.set_summary`)."""
        self._registry.memory(session_id, self._path, self._factory).set_summary(summary)

    def add(self, memories: MessageLike | Sequence[MessageLike] | None, session_id: Hashable = 0) -> None:
        """Add messages to a session's memory."""
        self._registry.memory(session_id, self._path, self._factory).add(memories)

    def get(self, session_id: Hashable = 0) -> Memory | None:
        """The `Memory` of a session, or None if it has none."""
        return self._registry.stored(session_id, self._path, self._factory)

    def get_memory(self, session_id: Hashable = 0, **kwargs: Unpack[_MemoryQuery]) -> list[AgentMessage]:
        """A session's messages (see `Memory.get_memory` for `recent_n` / `filter_func`); [] for an unknown session."""
        memory = self.get(session_id)
        return memory.get_memory(**kwargs) if memory is not None else []

    def length(self, session_id: Hashable = 0) -> int:
        """How many messages a session holds."""
        memory = self.get(session_id)
        return len(memory) if memory is not None else 0

    def cap(self, session_id: Hashable = 0) -> int:
        """Apply the session's ``max_messages`` storage cap (see `Memory.cap`); how many messages were dropped."""
        memory = self.get(session_id)
        return memory.cap() if memory is not None else 0

    def truncate(self, session_id: Hashable, length: int) -> None:
        """Drop a session's messages after the first `length` (undo of a failed call)."""
        memory = self.get(session_id)
        if memory is not None:
            memory.truncate(length)

    def open_turn(self, session_id: Hashable, mark: int) -> Turn | None:
        """An agent call starts on a session of `mark` messages: the bound store's `Turn`, None without a store.

        The call path commits the turn when the call returns (it is then durable) or abandons
        it after rolling the memory back; a turn still open when the session is read back in
        a new process is removed (see `plait.sessions.SessionRegistry.open_turn`).
        """
        return self._registry.open_turn(session_id, self._path, self._factory, mark)

    def reset(self, session_id: Hashable = 0) -> None:
        """Forget a session entirely (in the bound store too)."""
        self._registry.forget_memory(session_id, self._path)

    def evict(self, session_id: Hashable = 0) -> None:
        """Drop a session from this process only: a bound store keeps it (read back on its next use).

        Without a store the session is forgotten, as by `reset`.
        """
        self._registry.evict_memory(session_id, self._path)

    def sessions(self) -> list[Hashable]:
        """The session ids that have a memory (in this process, or in the bound store)."""
        return self._registry.stored_ids(self._path)

    def __contains__(self, session_id: Hashable) -> bool:
        return self.get(session_id) is not None

    def __repr__(self) -> str:
        return f"MemoryManager(sessions={len(self.memory_map)})"
