"""`SessionBackend`: what agents and `MemoryManager` need of a store that keeps sessions.

Two backends ship with plait: `SessionStore` (a SQLite file) and `PostgresSessionStore` (a
PostgreSQL database, shared by processes and machines). A third one implements this protocol and
proves it with the conformance suite, `plait.testing.session_backends`.

A backend keeps, per memory key path (``memory``, ``writer.memory``: the `state_dict` keys) and
session id, a memory's messages, its running summary (`ContextSummary`) and the state of a run
paused for approval (`RunState.to_dict`). It hands each session a *journal* (`SessionWriter`)
that writes the memory's changes as they happen, and that opens a `Turn` per agent call. What
each backend guarantees:

* **Durable turns.** `Turn.commit` returns once the call's messages are stored; a call that never
  committed (its process died) is left out when the session is read back, and removed by the
  session's next write.
* **One writer per session.** A journal's write is refused with `SessionConflictError` when
  another writer (another process, machine or store object) changed the session since the journal
  read it: never a silent overwrite.
* **Sessions that move.** A backend built with ``shared=True`` is one that several processes
  (server workers, machines) use for the same sessions, any of them taking any turn: each call
  first asks its session's journal whether it is `current` and, when another process changed
  the session since, reads it back (`plait.sessions.SessionRegistry.refresh`). Calls that truly
  overlap on one session still meet the one-writer rule. Unshared (the default), a process that
  holds a session keeps using its copy, and a stale copy is refused on its next write.
* **Errors named.** A failed write raises `SessionStoreError` naming the store (never a password).
* **Retention.** `prune` removes sessions by age; a backend built with ``ttl`` / ``max_sessions``
  removes what the policy no longer keeps (`expire`, and by itself while it writes).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ..exceptions import UserError
from ..schema import AgentMessage
from ..types import JSONValue
from .base_memory import ContextSummary, MemoryJournal

__all__ = ["AgentTree", "SessionBackend", "SessionWriter", "StoredSession", "Turn", "attach"]


class Turn(Protocol):
    """One agent call on a stored session, open until `commit` or `abandon`."""

    def commit(self) -> None:
        """The call finished: wait until it (and every change before it) is stored.

        Raises:
            SessionStoreError: It could not be stored (`SessionConflictError`: another writer
                changed the session); the call path then rolls the call back.
        """

    def abandon(self) -> None:
        """The call failed and its messages were rolled back (need not be waited for)."""


class SessionWriter(MemoryJournal, Protocol):
    """The journal of one memory's session in a backend: writes every change, opens turns."""

    @property
    def stale(self) -> bool:
        """A write failed and no call is open: the backend, not the memory, holds the session as it is."""

    @property
    def interrupted(self) -> int | None:
        """Where a call the backend holds unfinished begins (None: none); its first write removes it."""

    def current(self) -> bool:
        """Whether the backend still holds the session as this journal last read or wrote it.

        Asked at the start of each call when the backend is `shared` (one round trip, after this
        journal's own queued writes); False: another writer changed it since.
        """

    def claim(self, messages: Sequence[AgentMessage]) -> None:
        """Store `messages` as the whole session, whatever the backend held (`attach`)."""

    def open_turn(self, mark: int) -> Turn:
        """An agent call starts on a memory of `mark` messages."""


@dataclass
class StoredSession:
    """A session read back from a backend, with the journal that goes on writing it.

    Attributes:
        journal: Writes the session's changes from now on (it knows what was read).
        messages: The messages (dicts), without any call that was interrupted.
        summary: The memory's running summary, if any.
        run: The state of a run paused for approval (`RunState.to_dict`), if any.
    """

    journal: SessionWriter
    messages: list[dict[str, JSONValue]]
    summary: ContextSummary | None
    run: dict[str, JSONValue] | None

    @property
    def found(self) -> bool:
        """Whether the backend holds the session: messages, or a call that was interrupted (to remove)."""
        return bool(self.messages) or self.journal.interrupted is not None


class AgentTree(Protocol):
    """An agent whose tree can be walked (`AgentModule.named_agents`)."""

    def named_agents(self) -> Iterable[tuple[str, object]]:
        """Every agent of the tree with its dotted path."""


AgentT = TypeVar("AgentT", bound=AgentTree)


class SessionBackend(Protocol):
    """A store of agent sessions (see the module docstring for what it guarantees)."""

    @property
    def shared(self) -> bool:
        """Whether processes take turns on the same sessions: each call then starts from what the backend holds."""

    def attach(self, agent: AgentT) -> AgentT:
        """Persist every memory of `agent`'s tree here; returns `agent` (see `attach`)."""

    def journal(self, keypath: str, session_id: Hashable) -> SessionWriter:
        """The writer of one memory's changes, for a session not read from the backend."""

    def load(self, keypath: str, session_id: Hashable) -> StoredSession:
        """A memory's stored session (no messages: none stored) with the journal that goes on writing it."""

    def read(self, keypath: str, session_id: Hashable) -> list[dict[str, JSONValue]] | None:
        """The stored messages of a session (as dicts, an interrupted call left out), or None when it has none."""

    def read_run(self, keypath: str, session_id: Hashable) -> dict[str, JSONValue] | None:
        """The stored state of a session's paused run (`RunState.to_dict`), or None."""

    def read_summary(self, keypath: str, session_id: Hashable) -> ContextSummary | None:
        """The stored running summary of a session's memory, or None."""

    def sessions(self, keypath: str = "memory") -> list[Hashable]:
        """The ids of the sessions stored for a memory, oldest change first."""

    def delete(self, session_id: Hashable) -> None:
        """Remove a session (every memory's part of it); a live writer of it gets `SessionConflictError`."""

    def prune(self, older_than: float) -> list[Hashable]:
        """Remove sessions whose last change is more than `older_than` seconds old; returns their ids."""

    def expire(self) -> list[Hashable]:
        """Remove what the retention policy (``ttl``, ``max_sessions``) no longer keeps; returns their ids."""

    def flush(self) -> None:
        """Wait until every change so far is stored; raise the first write that failed unwaited for."""

    def close(self) -> None:
        """Flush and release the backend (idempotent)."""


def attach(backend: SessionBackend, agent: AgentT) -> AgentT:
    """Keep the sessions of `agent`'s tree in `backend` (its `SessionRegistry`, each memory under its `state_dict` key).

    Sessions already in memory are written now (replacing what the backend holds of them); the
    others are read back on first use.
    """
    registry = getattr(agent, "_session_registry", None)
    if registry is None:
        raise UserError(f"a session store attaches to an agent, not {type(agent).__name__}")
    paths = [
        str(getattr(module, "_session_path", ""))
        for _, module in agent.named_agents()
        if getattr(module, "memory", None) is not None
    ]
    registry.bind(backend, paths)
    return agent
