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
`plait.memory._session_journal`; the file's write lock, ``BEGIN IMMEDIATE``, keeps the check and
the write together). A write the file refuses (disk full, I/O error, a corrupted
file) raises `SessionStoreError`, naming the file; either way the call that made it fails and
is rolled back from memory too, so memory never holds a turn the file lacks.

Session ids are stored as JSON: use strings or integers (``0`` and ``"0"`` are different
sessions). Agents' extra state (`get_extra_state`) is not stored; `save_state` covers it. A
memory's running summary (`ContextSummary`, kept by a ``'summarise'`` `ContextPolicy`) is stored
with its messages, and so is a run paused for approval (its `RunState`), so a paused session
survives a restart.

**Retention.** ``SessionStore(path, ttl=..., max_sessions=...)`` removes sessions unchanged for
``ttl`` seconds and, beyond ``max_sessions``, the least recently changed ones: after writes (at
most every ``sweep_every`` seconds) and on `expire`. `prune` removes by age on demand.

The body shared with the PostgreSQL backend (`PostgresSessionStore`) is
`plait.memory._sql_store`; this module holds what is SQLite's: the file, its tables and how
files written by earlier versions are upgraded in place.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ._sql_dialect import Connection, Dialect
from ._sql_store import SqlSessionStore
from .backend import StoredSession, Turn

__all__ = ["SQLITE", "SessionStore", "StoredSession", "Turn"]

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

SQLITE = Dialect(
    name="SQLite",
    begin="BEGIN IMMEDIATE",  # the file's one write lock, first: nothing another writer does gets in between
    lock_rows="",
    lock_new=None,
    errors=(sqlite3.Error,),
)
"""SQLite's way of running the stores' transactions (see `plait.memory._sql_dialect`)."""


def _prepare(connection: sqlite3.Connection) -> None:
    """Create the tables of a new file; add the columns an older file lacks."""
    connection.executescript(_SCHEMA)
    columns = {row[1] for row in connection.execute("PRAGMA table_info(sessions)")}
    for column, statement in _UPGRADES.items():
        if column not in columns:
            connection.execute(statement)


def _connect(path: str) -> Connection:
    """The file opened for the writer thread (autocommit: the writer begins its transactions)."""
    connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        _prepare(connection)
    except sqlite3.Error:  # 'file is not a database', a read-only or full disk...
        connection.close()
        raise
    return connection


class SessionStore(SqlSessionStore):
    """Sessions of agent memories kept in a SQLite file (a `SessionBackend`; see the module docstring).

    Args:
        path: The database file (created with its folder if missing).
        ttl: Remove sessions unchanged for this many seconds (None: keep them).
        max_sessions: Keep at most this many sessions, removing the least recently changed (None: no cap).
        sweep_every: With a retention policy, apply it after writes at most this often (seconds).
        shared: Other processes (server workers on this machine) take turns on the same
            sessions: each call first reads its session back when another process changed it.

    Raises:
        SessionStoreError: The file could not be opened (it is named).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ttl: float | None = None,
        max_sessions: int | None = None,
        sweep_every: float = 60.0,
        shared: bool = False,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        where = str(self.path)
        super().__init__(
            where,
            lambda: _connect(where),
            SQLITE,
            ttl=ttl,
            max_sessions=max_sessions,
            sweep_every=sweep_every,
            shared=shared,
        )

    def __repr__(self) -> str:
        shared = ", shared=True" if self.shared else ""
        return f"SessionStore({str(self.path)!r}{shared})"
