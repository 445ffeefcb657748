"""What the SQL session stores differ in: a `Dialect` (SQLite's, PostgreSQL's), and the connection they share.

Every statement of the stores is written once, with ``?`` placeholders and standard upserts
(``INSERT ... ON CONFLICT ... DO UPDATE``), which both SQLite and PostgreSQL run; the PostgreSQL
connection turns ``?`` into psycopg's ``%s``. What is left differs in how a transaction keeps a
session's writers apart:

* SQLite: ``BEGIN IMMEDIATE`` takes the file's one write lock first, so whatever a transaction
  reads, no other writer changes before it commits.
* PostgreSQL: a plain ``BEGIN``; the rows a write checks are read ``FOR UPDATE`` (locked until the
  commit, and re-read as the other writer committed them when it had to wait), and a session with
  no row yet is claimed by a transaction-scoped advisory lock on its key, which every process and
  machine on the database sees.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Connection", "Cursor", "Dialect"]


class Cursor(Protocol):
    """What the stores read of an executed statement (DB-API)."""

    @property
    def rowcount(self) -> int:
        """How many rows the statement changed."""

    def fetchone(self) -> Any:
        """The next row (a tuple), or None."""

    def fetchall(self) -> list[Any]:
        """The remaining rows (tuples)."""


class Connection(Protocol):
    """A database connection as the stores use it (``sqlite3.Connection`` is one, in autocommit mode)."""

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        """Run one statement (``?`` placeholders)."""

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> object:
        """Run one statement for each row of parameters."""

    def close(self) -> None:
        """Close the connection."""


def _never(connection: Connection) -> bool:
    return False


def _as_is(connection: Connection) -> AbstractContextManager[object]:
    return contextlib.nullcontext()


@dataclass(frozen=True)
class Dialect:
    """How one database runs the stores' transactions.

    Attributes:
        name: The database, as messages name it (``SQLite``, ``PostgreSQL``).
        begin: The statement that opens a writer's transaction.
        lock_rows: Appended to a ``SELECT`` of the rows a transaction is about to check and change
            ("" where `begin` already keeps other writers out).
        lock_new: Run, with ``(keypath, session)``, before checking a session that has no row yet, so
            two writers creating it cannot both find it missing (None: `begin` already does).
        errors: The driver's exceptions: any of them fails the whole transaction.
        broken: Whether a connection is lost after a failed transaction (then it is opened again).
        batch: Wraps a whole transaction, ``BEGIN`` to ``COMMIT`` (PostgreSQL: pipeline mode, where
            statements go out without waiting for their results until one is read).
    """

    name: str
    begin: str
    lock_rows: str
    lock_new: str | None
    errors: tuple[type[Exception], ...]
    broken: Callable[[Connection], bool] = _never
    batch: Callable[[Connection], AbstractContextManager[object]] = _as_is
