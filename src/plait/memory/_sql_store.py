"""`SqlSessionStore`: the one body of the SQL session backends (`SessionStore`, `PostgresSessionStore`).

Reading a session, listing, deleting, pruning and the retention policy are the same statements on
every SQL database; a backend brings its connection and its `Dialect` (see
`plait.memory._sql_dialect`), and the writer thread and the journal do the rest
(`plait.memory._store_writer`, `plait.memory._session_journal`).

**A session is read in one statement**, so it is one snapshot even where the database lets other
writers commit between two statements (PostgreSQL's read committed): the head (its generation,
and where an interrupted call begins), its summary, its paused run and its messages agree.

**Removing a session locks its rows first** (the dialect's ``FOR UPDATE``), so a writer that is
in the middle of a transaction on it finishes before or after the removal, never across it; a
session written again since it was found stale is kept.
"""

from __future__ import annotations

import json
import logging
import math
import time
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TypeVar

from ..exceptions import SessionStoreError, UserError
from ..types import JSONValue
from ._session_journal import SESSION_TABLES, SessionJournal
from ._sql_dialect import Connection, Dialect
from ._store_writer import StoreWriter
from .backend import AgentTree, StoredSession, attach
from .base_memory import ContextSummary

__all__ = ["SqlSessionStore", "session_key"]

logger = logging.getLogger(__name__)

AgentT = TypeVar("AgentT", bound=AgentTree)
StoreT = TypeVar("StoreT", bound="SqlSessionStore")

_READ = (  # the head first (kind 0), then the summary, the paused run, the messages in order
    "SELECT 0, open_from, generation, CAST(NULL AS TEXT) FROM sessions WHERE keypath = ? AND session = ? "
    "UNION ALL SELECT 1, NULL, NULL, summary FROM summaries WHERE keypath = ? AND session = ? "
    "UNION ALL SELECT 2, NULL, NULL, state FROM runs WHERE keypath = ? AND session = ? "
    "UNION ALL SELECT 3, position, NULL, message FROM messages WHERE keypath = ? AND session = ? "
    "ORDER BY 1, 2"
)
_STALE = "SELECT session, MIN(updated) FROM sessions WHERE updated < ? GROUP BY session ORDER BY 2, 1"
_SURPLUS = "SELECT session, MAX(updated) FROM sessions GROUP BY session ORDER BY 2 DESC, 1 LIMIT ? OFFSET ?"
_EVERY_ROW = 2**62  # a LIMIT both databases read as "no limit"


def session_key(session_id: Hashable) -> str:
    """A session id as the stores keep it (JSON).

    Raises:
        UserError: The id is neither a str nor an int.
    """
    try:
        return json.dumps(session_id)
    except TypeError:
        kind = type(session_id).__name__
        raise UserError(f"a session store keeps sessions with str or int ids, not {kind}") from None


@dataclass
class _Row:
    """A session as one read statement found it."""

    messages: list[dict[str, JSONValue]]
    summary: str | None
    run: str | None
    generation: int | None
    interrupted: int | None  # open_from of a call that did not finish
    removed: int  # how many messages that call left


def _read(connection: Connection, keypath: str, session: str) -> _Row:
    """The session's committed state: a call that did not finish is left out (its messages stay stored)."""
    row = _Row([], None, None, None, None, 0)
    for kind, number, generation, text in connection.execute(_READ, (keypath, session) * 4).fetchall():
        if kind == 0:
            row.interrupted, row.generation = number, None if generation is None else int(generation)
        elif kind == 1:
            row.summary = str(text)
        elif kind == 2:
            row.run = str(text)
        elif row.interrupted is None or number < row.interrupted:
            row.messages.append(json.loads(text))
        else:
            row.removed += 1
    return row


def _remove(connection: Connection, dialect: Dialect, session: str, kept_from: float = math.inf) -> bool:
    """Remove a session (every key path) once its rows are locked, unless it changed at `kept_from` or later."""
    rows = connection.execute("SELECT updated FROM sessions WHERE session = ?" + dialect.lock_rows, (session,))
    updated = [float(row[0]) for row in rows.fetchall()]
    if updated and max(updated) >= kept_from:
        return False  # written again since it was found: kept
    for table in SESSION_TABLES:
        connection.execute(f"DELETE FROM {table} WHERE session = ?", (session,))
    return True


def _remove_stale(connection: Connection, dialect: Dialect, cutoff: float) -> list[Hashable]:
    """Remove the sessions last changed before `cutoff`; their ids, oldest first."""
    stale = connection.execute(_STALE, (cutoff,)).fetchall()
    return [json.loads(session) for session, _ in stale if _remove(connection, dialect, session, cutoff)]


def _remove_surplus(connection: Connection, dialect: Dialect, keep: int) -> list[Hashable]:
    """Remove every session but the `keep` most recently changed; their ids, oldest first."""
    surplus = connection.execute(_SURPLUS, (_EVERY_ROW, keep)).fetchall()
    return [
        json.loads(session)
        for session, seen in reversed(surplus)
        if _remove(connection, dialect, session, math.nextafter(float(seen), math.inf))
    ]


@dataclass(frozen=True)
class _Retention:
    """A retention policy, run by `expire` and by the writer after writes (it holds no store: no cycle)."""

    dialect: Dialect
    ttl: float | None
    max_sessions: int | None

    def __call__(self, connection: Connection) -> list[Hashable]:
        removed: list[Hashable] = []
        if self.ttl is not None:
            removed += _remove_stale(connection, self.dialect, time.time() - self.ttl)
        if self.max_sessions is not None:
            removed += _remove_surplus(connection, self.dialect, self.max_sessions)
        return removed


def _check_retention(ttl: float | None, max_sessions: int | None, sweep_every: float) -> None:
    def number(value: object) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    if ttl is not None and not (number(ttl) and ttl > 0):
        raise UserError(f"ttl must be a number of seconds > 0 or None, got {ttl!r}")
    if max_sessions is not None and (isinstance(max_sessions, bool) or not isinstance(max_sessions, int)):
        raise UserError(f"max_sessions must be an int >= 1 or None, got {max_sessions!r}")
    if max_sessions is not None and max_sessions < 1:
        raise UserError(f"max_sessions must be an int >= 1 or None, got {max_sessions!r}")
    if not (number(sweep_every) and sweep_every >= 0):
        raise UserError(f"sweep_every must be a number of seconds >= 0, got {sweep_every!r}")


class SqlSessionStore:
    """Sessions of agent memories in a SQL database (a `SessionBackend`; see the module docstring).

    Args:
        where: The store as messages name it (a file; a server address without its password).
        connect: Opens a ready connection (tables created or migrated).
        dialect: How the database runs the transactions.
        secrets: Strings no message may show (a password).
        ttl: Remove sessions unchanged for this many seconds (None: keep them).
        max_sessions: Keep at most this many sessions, removing the least recently changed (None: no cap).
        sweep_every: With a retention policy, apply it after writes at most this often (seconds).
        shared: Other processes take turns on the same sessions (several server workers): each
            call first checks that this process holds the latest of its session, and reads it
            back when not (see `plait.memory.backend`).

    Raises:
        SessionStoreError: The database could not be opened (it is named).
        UserError: A retention setting is not valid.
    """

    def __init__(
        self,
        where: str,
        connect: Callable[[], Connection],
        dialect: Dialect,
        *,
        secrets: tuple[str, ...] = (),
        ttl: float | None = None,
        max_sessions: int | None = None,
        sweep_every: float = 60.0,
        shared: bool = False,
    ) -> None:
        _check_retention(ttl, max_sessions, sweep_every)
        if not isinstance(shared, bool):
            raise UserError(f"shared must be True or False, got {shared!r}")
        self.ttl, self.max_sessions, self.shared = ttl, max_sessions, shared
        self._retention = _Retention(dialect, ttl, max_sessions)
        policy = ttl is not None or max_sessions is not None
        self._writer = StoreWriter(
            where,
            connect,
            dialect,
            secrets=secrets,
            sweep=self._retention if policy else None,
            sweep_every=sweep_every,
        )
        self._finalizer = weakref.finalize(self, self._writer.stop)  # also runs at interpreter exit

    # -- agents -------------------------------------------------------------------------------
    def attach(self, agent: AgentT) -> AgentT:
        """Persist every memory of `agent`'s tree here; returns `agent`.

        Sessions already in memory are written now (replacing what the store holds of them);
        the others are read back on first use.
        """
        return attach(self, agent)

    def journal(self, keypath: str, session_id: Hashable) -> SessionJournal:
        """The writer of one memory's changes, for a session not read from the store (see `load`)."""
        return SessionJournal(self._writer, keypath, session_key(session_id))

    def load(self, keypath: str, session_id: Hashable) -> StoredSession:
        """A memory's stored session (no messages: none stored) with the journal that goes on writing it.

        A call that was interrupted (the process died before it finished) is left out, and its
        messages are removed from the store by the journal's first write.

        Raises:
            SessionStoreError: The store could not be read (it is named).
        """
        session = session_key(session_id)
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
        write of the session removes it from the store).
        """
        session = session_key(session_id)
        row = self._writer.call(lambda connection: _read(connection, keypath, session))
        self._report(row, keypath, session)
        return row.messages or None

    def read_run(self, keypath: str, session_id: Hashable) -> dict[str, JSONValue] | None:
        """The stored state of a session's paused run (`RunState.to_dict`), or None."""
        session = session_key(session_id)
        text = self._writer.call(lambda connection: _read(connection, keypath, session).run)
        data = None if text is None else json.loads(text)
        return data if isinstance(data, dict) else None

    def read_summary(self, keypath: str, session_id: Hashable) -> ContextSummary | None:
        """The stored running summary of a session's memory, or None when it has none."""
        session = session_key(session_id)
        text = self._writer.call(lambda connection: _read(connection, keypath, session).summary)
        return None if text is None else ContextSummary.from_dict(json.loads(text))

    # -- sessions -----------------------------------------------------------------------------
    def sessions(self, keypath: str = "memory") -> list[Hashable]:
        """The ids of the sessions stored for a memory (the root agent's by default), oldest change first."""

        def read(connection: Connection) -> list[Hashable]:
            rows = connection.execute(
                "SELECT session FROM sessions WHERE keypath = ? ORDER BY updated", (keypath,)
            ).fetchall()
            return [json.loads(row[0]) for row in rows]

        return self._writer.call(read)

    def delete(self, session_id: Hashable) -> None:
        """Remove a session from the store (every memory's part of it).

        An agent that already loaded it is another writer of it: its next write to it raises
        `SessionConflictError`, and then it reads the session again (gone).
        """
        session = session_key(session_id)
        self._writer.call(lambda connection: _remove(connection, self._writer.dialect, session))

    def prune(self, older_than: float) -> list[Hashable]:
        """Remove sessions whose last change is more than `older_than` seconds old; returns their ids."""
        cutoff = time.time() - older_than

        return self._writer.call(lambda connection: _remove_stale(connection, self._writer.dialect, cutoff))

    def expire(self) -> list[Hashable]:
        """Remove what the retention policy (``ttl``, ``max_sessions``) no longer keeps; returns their ids.

        The store does this by itself after writes (at most every ``sweep_every`` seconds);
        without a policy nothing is removed.
        """
        return self._writer.call(self._retention)

    # -- lifetime -----------------------------------------------------------------------------
    def flush(self) -> None:
        """Wait until every change so far is stored.

        Raises:
            SessionStoreError: A queued write could not be stored (the store is named;
                `SessionConflictError`: another writer changed its session).
            UserError: A queued write failed (for instance a message that is not JSON-able).
                Either way its session is read again from the store on its next use.
        """
        self._writer.call(lambda connection: None)
        failure = self._writer.take_failure()
        if isinstance(failure, SessionStoreError):
            raise failure
        if failure is not None:
            raise UserError(f"a session write to {self._writer.path} failed: {failure}") from failure

    def close(self) -> None:
        """Flush and close the store's connection (idempotent)."""
        self._finalizer()

    def __enter__(self: StoreT) -> StoreT:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
