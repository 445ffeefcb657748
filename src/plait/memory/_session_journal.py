"""`SessionJournal` writes one stored session's changes; `JournalTurn` is one agent call on it.

One body for every SQL backend (SQLite, PostgreSQL): what differs is the `Dialect` the writer
runs its transactions with (see `plait.memory._sql_dialect`).

**One writer per session.** Every session row carries a *generation*, a random number that each
write replaces. A journal knows the generation it last read or wrote, and each of its writes
checks it first, in the write's own transaction, with the session's row locked for the rest of
it (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: ``SELECT ... FOR UPDATE``, and an advisory lock on
the key of a session that has no row yet). A different number means another writer (another
process or machine, another store object on the same database) changed the session since: the
write is refused with `SessionConflictError` instead of overwriting the other writer's messages,
the call that made it fails, and the session is read again on its next use. Random numbers, not
a counter: a session deleted and written again never comes back to a number a stale writer
still holds.

**A failed write stops the journal.** After a write fails (a conflict, a full disk, an I/O
error), the journal refuses the later ones: a later message must never land in a store that lacks
the one before it. The agent call path then rolls the call back, and the memory, once no call is
open on it, is read again from the store (`stale`): memory equals the store again.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping, Sequence

from ..exceptions import SessionConflictError
from ..schema import AgentMessage
from ..types import JSONValue
from ..utils._json import json_default
from ._sql_dialect import Connection
from ._store_writer import StoreWriter
from .base_memory import ContextSummary

__all__ = ["SESSION_TABLES", "JournalTurn", "SessionJournal", "encode"]

SESSION_TABLES = ("messages", "sessions", "summaries", "runs")
_GENERATION = "SELECT generation FROM sessions WHERE keypath = ? AND session = ?"
_MESSAGES = (
    "INSERT INTO messages VALUES (?, ?, ?, ?) "
    "ON CONFLICT (keypath, session, position) DO UPDATE SET message = excluded.message"
)
_ONE_ROW = {"runs": "state", "summaries": "summary"}  # the tables of one value per session: their column
_STAMP = (
    "INSERT INTO sessions (keypath, session, updated, generation) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (keypath, session) DO UPDATE SET updated = excluded.updated, generation = excluded.generation"
)
_OPEN = (
    "INSERT INTO sessions (keypath, session, updated, open_from, generation) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (keypath, session) DO UPDATE SET updated = excluded.updated, open_from = excluded.open_from, "
    "generation = excluded.generation"
)
_CLOSE = "UPDATE sessions SET open_from = NULL, generation = ? WHERE keypath = ? AND session = ?"
_RESTAMP = "UPDATE sessions SET generation = ? WHERE keypath = ? AND session = ?"
_TAIL = "DELETE FROM messages WHERE keypath = ? AND session = ? AND position >= ?"


def encode(message: AgentMessage) -> str:
    """A message as the stores keep it (JSON text)."""
    return json.dumps(message.model_dump(), ensure_ascii=False, default=json_default)


def _new_generation() -> int:
    return secrets.randbits(62) + 1


class SessionJournal:
    """Writes one memory's changes (a `MemoryJournal`) for one key path and session.

    Args:
        writer: The store's writer.
        keypath: The memory's key (``memory``, ``writer.memory``...).
        session: The session id as stored (JSON).
        generation: The session's generation when it was read (None: it was not stored).
        interrupted: Where the stored interrupted call begins (None: none); the first write
            removes that call's messages.
    """

    def __init__(
        self,
        writer: StoreWriter,
        keypath: str,
        session: str,
        generation: int | None = None,
        interrupted: int | None = None,
    ) -> None:
        self.writer = writer
        self.keypath = keypath
        self.session = session
        self.generation = generation  # changed by the writer thread only
        self.interrupted = interrupted
        self.failure: BaseException | None = None  # set by the writer thread (`Owner`)
        self.calls = 0  # agent calls open on the session (their turns)

    @property
    def stale(self) -> bool:
        """A write failed and no call is open: the store, not this memory, holds the session as it is."""
        return self.failure is not None and self.calls == 0

    def current(self) -> bool:
        """Whether the store still holds the session as this journal last read or wrote it (one round trip).

        Runs after the journal's queued writes; a journal whose write failed is not current.
        """

        def check(connection: Connection) -> bool:
            row = connection.execute(_GENERATION, (self.keypath, self.session)).fetchone()
            return self.failure is None and (None if row is None else int(row[0])) == self.generation

        return self.writer.call(check)

    # -- every write: checked first, then stamped -------------------------------------------------
    def _lock(self, connection: Connection, claim: bool = False) -> int | None:
        """Keep other writers off the session until the transaction ends; its generation now (None: no row).

        A session without a row is claimed by its key (the dialect's `lock_new`), and so is any
        session a `claim` replaces whatever it holds of.
        """
        dialect = self.writer.dialect
        if (self.generation is None or claim) and dialect.lock_new is not None:  # no row to lock: its key
            connection.execute(dialect.lock_new, (self.keypath, self.session))
        row = connection.execute(_GENERATION + dialect.lock_rows, (self.keypath, self.session)).fetchone()
        return None if row is None else int(row[0])

    def _begin(self, connection: Connection) -> None:
        """Before a write: refuse after a failed one; refuse when another writer changed the session.

        A session this transaction already checked is held by it (locked) and its generation is
        known (`StoreWriter.held`): it is not read again.
        """
        if self.failure is not None:
            raise self.failure
        key = (self.keypath, self.session)
        held = self.writer.held
        current = held[key] if key in held else self._lock(connection)
        if current != self.generation:
            raise SessionConflictError(self.writer.path, self.keypath, json.loads(self.session), current is None)
        held[key] = current
        if self.interrupted is not None:  # what a killed process left: gone before anything is added
            connection.execute(_TAIL, (self.keypath, self.session, self.interrupted))
            connection.execute(_CLOSE, (current, self.keypath, self.session))
            self.interrupted = None

    def _stamp(self, connection: Connection, statement: str = _STAMP, *extra: object) -> None:
        """Mark the session changed (a new generation); `statement` may set more (`_OPEN`'s open_from)."""
        generation = _new_generation()
        connection.execute(statement, (self.keypath, self.session, time.time(), *extra, generation))
        self.generation = self.writer.held[(self.keypath, self.session)] = generation

    def _restamp(self, connection: Connection, statement: str = _RESTAMP) -> None:
        """A new generation for the session's row, if it has one (after `_begin`: none is created)."""
        if self.generation is None:  # checked in this transaction: the session has no row
            return
        generation = _new_generation()
        connection.execute(statement, (generation, self.keypath, self.session))
        self.generation = self.writer.held[(self.keypath, self.session)] = generation

    def _forget(self, connection: Connection) -> None:
        """Remove the whole session (unchecked: a reset is meant to replace whatever is there)."""
        self._lock(connection, claim=True)
        for table in SESSION_TABLES:
            connection.execute(f"DELETE FROM {table} WHERE keypath = ? AND session = ?", (self.keypath, self.session))
        self.generation = self.interrupted = self.failure = None
        self.writer.held[(self.keypath, self.session)] = None

    # -- MemoryJournal ------------------------------------------------------------------------------
    def append(self, start: int, messages: Sequence[AgentMessage]) -> None:
        """`messages` were added at positions ``start``, ``start + 1``, ..."""
        messages = list(messages)

        def write(connection: Connection) -> None:
            rows = [(self.keypath, self.session, start + i, encode(m)) for i, m in enumerate(messages)]
            self._begin(connection)
            connection.executemany(_MESSAGES, rows)
            self._stamp(connection)

        self.writer.submit(write, self)

    def truncate(self, length: int) -> None:
        """Every message from position `length` on was dropped."""

        def write(connection: Connection) -> None:
            self._begin(connection)
            connection.execute(_TAIL, (self.keypath, self.session, length))
            self._stamp(connection)

        self.writer.submit(write, self)

    def rewrite(self, messages: Sequence[AgentMessage]) -> None:
        """The memory now holds exactly `messages` (none: the session is forgotten, unchecked)."""
        self._replace(messages, claim=False)

    def claim(self, messages: Sequence[AgentMessage]) -> None:
        """Store `messages` as the whole session, whatever the store held (`attach`)."""
        self._replace(messages, claim=True)

    def _replace(self, messages: Sequence[AgentMessage], claim: bool) -> None:
        messages = list(messages)

        def write(connection: Connection) -> None:
            rows = [(self.keypath, self.session, i, encode(m)) for i, m in enumerate(messages)]
            if claim or not rows:
                self._forget(connection)
            else:
                self._begin(connection)
                connection.execute(
                    "DELETE FROM messages WHERE keypath = ? AND session = ?", (self.keypath, self.session)
                )
            if rows:
                connection.executemany("INSERT INTO messages VALUES (?, ?, ?, ?)", rows)
                self._stamp(connection)

        self.writer.submit(write, self)

    def pause(self, state: dict[str, JSONValue] | None, wait: bool = False) -> None:
        """The session's run paused with `state` (None: no paused run); `wait`: until it is on disk."""
        self._keep("runs", state, wait)

    def summarise(self, summary: ContextSummary | None) -> None:
        """The memory's running summary is now `summary` (None: it has none)."""
        self._keep("summaries", None if summary is None else summary.to_dict())

    def _keep(self, table: str, value: Mapping[str, object] | None, wait: bool = False) -> None:
        """Store `value` as the session's one row of `table` (``runs``, ``summaries``); None deletes it."""
        text = None if value is None else json.dumps(value, ensure_ascii=False, default=json_default)

        def write(connection: Connection) -> None:
            self._begin(connection)
            if text is None:
                connection.execute(
                    f"DELETE FROM {table} WHERE keypath = ? AND session = ?", (self.keypath, self.session)
                )
            else:
                column = _ONE_ROW[table]
                connection.execute(
                    f"INSERT INTO {table} VALUES (?, ?, ?) "
                    f"ON CONFLICT (keypath, session) DO UPDATE SET {column} = excluded.{column}",
                    (self.keypath, self.session, text),
                )
            self._restamp(connection)

        if wait:
            self.writer.call(write, self)
        else:
            self.writer.submit(write, self)

    # -- turns --------------------------------------------------------------------------------------
    def open_turn(self, mark: int) -> JournalTurn:
        """A call starts on a memory of `mark` messages (queued, not waited for)."""
        self.calls += 1

        def write(connection: Connection) -> None:
            self._begin(connection)
            self._stamp(connection, _OPEN, mark)

        self.writer.submit(write, self)
        return JournalTurn(self)

    def close_turn(self, connection: Connection) -> None:
        """The open call is over (finished, or rolled back)."""
        self._begin(connection)
        self._restamp(connection, _CLOSE)


class JournalTurn:
    """One agent call on a stored session, open until `commit` or `abandon` (a `Turn`)."""

    __slots__ = ("journal", "open")

    def __init__(self, journal: SessionJournal) -> None:
        self.journal = journal
        self.open = True

    def commit(self) -> None:
        """The call finished: wait until it (and every change before it) is committed.

        Raises:
            SessionStoreError: It could not be stored (`SessionConflictError`: another writer
                changed the session); the call path then rolls the call back.
        """
        self.journal.writer.call(self.journal.close_turn, self.journal)
        self._end()

    def abandon(self) -> None:
        """The call failed and its messages were rolled back (queued, not waited for)."""
        self._end()
        self.journal.writer.submit(self.journal.close_turn, self.journal)

    def _end(self) -> None:
        if self.open:
            self.open = False
            self.journal.calls -= 1
