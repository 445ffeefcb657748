"""`SessionStore`: agent memories that survive the process, in one SQLite file.

```python
store = SessionStore("sessions.db")
store.attach(agent)                      # every memory in the agent tree persists its sessions
agent("My name is Ada.", session_id="u42")
# ... later, in another process, on the same agent structure:
SessionStore("sessions.db").attach(agent)
agent("What is my name?", session_id="u42")   # u42's history is read back on first use
```

Every message is written as it is added (a failed call's rollback, deletions, loads and
resets too), keyed like `state_dict` (``memory``, ``writer.memory``, ``team.0.memory``)
and by session id. Writes go through a queue to one writer thread, so adding a message
never waits for the disk; a session's history is read once per process, when that session
is first used (and again after a write of it failed; reads see every write queued before
them). `flush` waits for the queue;
`close` (or ``with``, or interpreter exit) flushes and closes the file.

**Durability.** An agent call on a stored session is durable when it returns: the call path
marks the turn open when it starts (`Turn`) and, once the reply is in memory, waits until
the turn is committed (SQLite WAL, ``synchronous=NORMAL``: a committed turn survives the
process being killed; a power cut may lose the last ones). A process killed in the middle
of a call leaves the turn open; when the session is read back, the interrupted turn (the
user message without an answer, an assistant tool call without its result) is left out (and
removed from the file by the session's next write), so a restarted agent never sends a broken
conversation.

**Safety.** One writer per session: every write checks that no other writer (another process,
another `SessionStore` on the file) changed the session since this one read it, and is refused
with `SessionConflictError` when one did, so no turn is ever silently overwritten (see
`plait.memory._session_journal`). A write the file refuses (disk full, I/O error, a corrupted
file) raises `SessionStoreError`, naming the file; either way the call that made it fails and
is rolled back from memory too, so memory never holds a turn the file lacks.

Session ids are stored as JSON: use strings or integers (``0`` and ``"0"`` are different
sessions). Agents' extra state (`get_extra_state`) is not stored; `save_state` covers it. A
memory's running summary (`ContextSummary`, kept by a ``'summarise'`` `ContextPolicy`) is stored
with its messages, and so is a run paused for approval (its `RunState`), so a paused session
survives a restart.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
import weakref
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from ..exceptions import SessionStoreError, UserError
from ..types import JSONValue
from ._session_journal import SESSION_TABLES, SessionJournal, Turn
from ._store_writer import StoreWriter
from .base_memory import ContextSummary

__all__ = ["SessionStore", "StoredSession", "Turn"]

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    keypath TEXT NOT NULL,
    session TEXT NOT NULL,
    position INTEGER NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (keypath, session, position)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sessions (
    keypath TEXT NOT NULL,
    session TEXT NOT NULL,
    updated REAL NOT NULL,
    open_from INTEGER,
    generation INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (keypath, session)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs (
    keypath TEXT NOT NULL,
    session TEXT NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (keypath, session)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS summaries (
    keypath TEXT NOT NULL,
    session TEXT NOT NULL,
    summary TEXT NOT NULL,
    PRIMARY KEY (keypath, session)
) WITHOUT ROWID;
"""
# open_from: the memory length when a call that has not finished began (NULL: no call open)
# generation: replaced by every write of the session, checked by the next (see _session_journal)
_UPGRADES = {  # columns files written by earlier versions lack (added in place when such a file is opened)
    "open_from": "ALTER TABLE sessions ADD COLUMN open_from INTEGER",
    "generation": "ALTER TABLE sessions ADD COLUMN generation INTEGER NOT NULL DEFAULT 0",
}


def _prepare(connection: sqlite3.Connection) -> None:
    """Create the tables of a new file; add the columns an older file lacks."""
    connection.executescript(_SCHEMA)
    columns = {row[1] for row in connection.execute("PRAGMA table_info(sessions)")}
    for column, statement in _UPGRADES.items():
        if column not in columns:
            connection.execute(statement)


class _AgentTree(Protocol):
    """An agent whose tree can be walked (`AgentModule.named_agents`)."""

    def named_agents(self) -> Iterable[tuple[str, object]]:
        """Every agent of the tree with its dotted path."""


AgentT = TypeVar("AgentT", bound=_AgentTree)


def _session_key(session_id: Hashable) -> str:
    try:
        return json.dumps(session_id)
    except TypeError:
        raise UserError(f"a SessionStore keeps sessions with str or int ids, not {type(session_id).__name__}") from None


@dataclass
class _Row:
    """A session as one read transaction found it."""

    messages: list[dict[str, JSONValue]]
    summary: str | None
    run: str | None
    generation: int | None
    interrupted: int | None  # open_from of a call that did not finish
    removed: int  # how many messages that call left


def _read(connection: sqlite3.Connection, keypath: str, session: str) -> _Row:
    """The session's committed state: a call that did not finish is left out (its messages stay in the file)."""
    key = (keypath, session)
    head = connection.execute(
        "SELECT open_from, generation FROM sessions WHERE keypath = ? AND session = ?", key
    ).fetchone()
    interrupted, generation = (None, None) if head is None else head
    cut = (*key, interrupted if interrupted is not None else 2**62)
    rows = connection.execute(
        "SELECT message FROM messages WHERE keypath = ? AND session = ? AND position < ? ORDER BY position", cut
    ).fetchall()
    removed = 0
    if interrupted is not None:
        tail = "SELECT COUNT(*) FROM messages WHERE keypath = ? AND session = ? AND position >= ?"
        removed = connection.execute(tail, cut).fetchone()[0]
    found = [
        connection.execute(f"SELECT {column} FROM {table} WHERE keypath = ? AND session = ?", key).fetchone()
        for table, column in (("summaries", "summary"), ("runs", "state"))
    ]
    summary, run = (None if row is None else str(row[0]) for row in found)
    return _Row([json.loads(row[0]) for row in rows], summary, run, generation, interrupted, removed)


@dataclass
class StoredSession:
    """A session read back from the file, with the journal that goes on writing it.

    Attributes:
        journal: Writes the session's changes from now on (it knows what was read).
        messages: The messages (dicts), without any call that was interrupted.
        summary: The memory's running summary, if any.
        run: The state of a run paused for approval (`RunState.to_dict`), if any.
    """

    journal: SessionJournal
    messages: list[dict[str, JSONValue]]
    summary: ContextSummary | None
    run: dict[str, JSONValue] | None

    @property
    def found(self) -> bool:
        """Whether the file holds the session: messages, or a call that was interrupted (to remove)."""
        return bool(self.messages) or self.journal.interrupted is not None


class SessionStore:
    """Sessions of agent memories kept in a SQLite file (see the module docstring).

    Args:
        path: The database file (created with its folder if missing).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = StoreWriter(str(self.path), _prepare)
        self._finalizer = weakref.finalize(self, self._writer.stop)  # also runs at interpreter exit

    # -- agents -------------------------------------------------------------------------------
    def attach(self, agent: AgentT) -> AgentT:
        """Persist every memory of `agent`'s tree here; returns `agent`.

        Sessions already in memory are written now (replacing what the file holds of them);
        the others are read back on first use.
        """
        registry = getattr(agent, "_session_registry", None)
        if registry is None:
            raise UserError(f"SessionStore.attach takes an agent, not {type(agent).__name__}")
        paths = [
            str(getattr(module, "_session_path", ""))
            for _, module in agent.named_agents()
            if getattr(module, "memory", None) is not None
        ]
        registry.bind(self, paths)
        return agent

    def journal(self, keypath: str, session_id: Hashable) -> SessionJournal:
        """The writer of one memory's changes, for a session not read from the file (see `load`)."""
        return SessionJournal(self._writer, keypath, _session_key(session_id))

    def load(self, keypath: str, session_id: Hashable) -> StoredSession:
        """A memory's stored session (no messages: none stored) with the journal that goes on writing it.

        A call that was interrupted (the process died before it finished) is left out, and its
        messages are removed from the file by the journal's first write.

        Raises:
            SessionStoreError: The file could not be read (it is named).
        """
        session = _session_key(session_id)
        row = self._writer.call(lambda connection: _read(connection, keypath, session))
        self._report(row, keypath, session)
        journal = SessionJournal(self._writer, keypath, session, row.generation, row.interrupted)
        summary = None if row.summary is None else ContextSummary.from_dict(json.loads(row.summary))
        run = None if row.run is None else json.loads(row.run)
        return StoredSession(journal, row.messages, summary, run if isinstance(run, dict) else None)

    @staticmethod
    def _report(row: _Row, keypath: str, session: str) -> None:
        if row.interrupted is not None:
            logger.warning(
                "session %s (%s): removed %d message(s) of a call interrupted before it finished",
                session,
                keypath,
                row.removed,
            )

    def read(self, keypath: str, session_id: Hashable) -> list[dict[str, JSONValue]] | None:
        """The stored messages of a session (as dicts), or None when it has none.

        A call that was interrupted (the process died before it finished) is left out (the next
        write of the session removes it from the file).
        """
        session = _session_key(session_id)
        row = self._writer.call(lambda connection: _read(connection, keypath, session))
        self._report(row, keypath, session)
        return row.messages or None

    def read_run(self, keypath: str, session_id: Hashable) -> dict[str, JSONValue] | None:
        """The stored state of a session's paused run (`RunState.to_dict`), or None."""
        session = _session_key(session_id)
        text = self._writer.call(lambda connection: _read(connection, keypath, session).run)
        data = None if text is None else json.loads(text)
        return data if isinstance(data, dict) else None

    def read_summary(self, keypath: str, session_id: Hashable) -> ContextSummary | None:
        """The stored running summary of a session's memory, or None when it has none."""
        session = _session_key(session_id)
        text = self._writer.call(lambda connection: _read(connection, keypath, session).summary)
        return None if text is None else ContextSummary.from_dict(json.loads(text))

    # -- sessions -----------------------------------------------------------------------------
    def sessions(self, keypath: str = "memory") -> list[Hashable]:
        """The ids of the sessions stored for a memory (the root agent's by default), oldest change first."""

        def read(connection: sqlite3.Connection) -> list[Hashable]:
            rows = connection.execute(
                "SELECT session FROM sessions WHERE keypath = ? ORDER BY updated", (keypath,)
            ).fetchall()
            return [json.loads(row[0]) for row in rows]

        return self._writer.call(read)

    def delete(self, session_id: Hashable) -> None:
        """Remove a session from the file (every memory's part of it).

        An agent that already loaded it is another writer of it: its next write to it raises
        `SessionConflictError`, and then it reads the session again (gone).
        """
        session = _session_key(session_id)

        def write(connection: sqlite3.Connection) -> None:
            for table in SESSION_TABLES:
                connection.execute(f"DELETE FROM {table} WHERE session = ?", (session,))

        self._writer.call(write)

    def prune(self, older_than: float) -> list[Hashable]:
        """Remove sessions whose last change is more than `older_than` seconds old; returns their ids."""
        cutoff = time.time() - older_than

        def write(connection: sqlite3.Connection) -> list[Hashable]:
            query = "SELECT session FROM sessions GROUP BY session HAVING MAX(updated) < ?"
            stale = [row[0] for row in connection.execute(query, (cutoff,))]
            for session in stale:
                for table in SESSION_TABLES:
                    connection.execute(f"DELETE FROM {table} WHERE session = ?", (session,))
            return [json.loads(session) for session in stale]

        return self._writer.call(write)

    # -- lifetime -----------------------------------------------------------------------------
    def flush(self) -> None:
        """Wait until every change so far is on disk.

        Raises:
            SessionStoreError: A queued write could not be stored (the file is named;
                `SessionConflictError`: another writer changed its session).
            UserError: A queued write failed (for instance a message that is not JSON-able).
                Either way its session is read again from the file on its next use.
        """
        self._writer.call(lambda connection: None)
        failure = self._writer.take_failure()
        if isinstance(failure, SessionStoreError):
            raise failure
        if failure is not None:
            raise UserError(f"a session write to {self.path} failed: {failure}") from failure

    def close(self) -> None:
        """Flush and close the file (idempotent)."""
        self._finalizer()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SessionStore({str(self.path)!r})"
