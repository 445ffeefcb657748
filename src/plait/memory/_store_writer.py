"""A SQL session store's writer: one thread that owns the connection and runs every job in order.

A burst of queued jobs runs in one transaction (the dialect's ``BEGIN``: SQLite's ``BEGIN
IMMEDIATE`` takes the file's write lock first; PostgreSQL's jobs lock the rows they check, see
`plait.memory._sql_dialect`), so a job's checks and writes see no other writer in between. A job
that raises fails alone; a database error (disk full, I/O error, a corrupted file, a lost server)
fails the whole transaction, which is rolled back. Either way the job's owner (the journal of the
session it writes) is marked failed, so none of its later writes can land in a store that lacks
the earlier ones, and the error reaches whoever waits for the job (or the next `flush`). The
driver's own exceptions never leave this module: they become `SessionStoreError`, naming the
store (a file, or a server address without its password). A connection the server dropped is
opened again for the next transaction.

A store with a retention policy gives the writer a `sweep`: it runs in a transaction of its own
after a burst of writes, at most once every ``sweep_every`` seconds.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import queue
import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from ..exceptions import SessionStoreError, UserError
from ._sql_dialect import Connection, Dialect

__all__ = ["Owner", "StoreWriter"]

T = TypeVar("T")

Job = Callable[[Connection], "Callable[[], None]"]
"""Runs in the writer's transaction; returns what to do once it is committed (hand a result over)."""


class Owner(Protocol):
    """What a job writes for: one stored session's journal."""

    failure: BaseException | None
    """The first failed write since the session was read (None: every write so far was stored)."""


class _Waiter(Protocol):
    """The part of a job's `concurrent.futures.Future` the writer thread uses (its result is set by the job)."""

    def set_exception(self, exception: BaseException | None) -> None:
        """Hand `exception` to the waiting caller."""

    def done(self) -> bool:
        """Whether the caller already has its answer."""


Pending = tuple[Job, "_Waiter | None", "Owner | None"]


def _nothing() -> None:
    pass


class StoreWriter:
    """The thread that runs every job on one store.

    Args:
        path: The store as errors name it: the file, or the server's address without its password.
        connect: Opens a ready connection (tables created); the dialect's errors are the store's.
        dialect: How the database runs the transactions.
        secrets: Strings no error message may show (a password); replaced by ``***``.
        sweep: A job run in its own transaction after writes (a retention policy), if any.
        sweep_every: Seconds between two sweeps at least.
    """

    def __init__(
        self,
        path: str,
        connect: Callable[[], Connection],
        dialect: Dialect,
        *,
        secrets: tuple[str, ...] = (),
        sweep: Callable[[Connection], object] | None = None,
        sweep_every: float = 60.0,
    ) -> None:
        self.jobs: queue.SimpleQueue[Pending | None] = queue.SimpleQueue()
        self.failure: BaseException | None = None  # the first failed write no one waited for, until `take_failure`
        self.closed = False
        self.path = path
        self.dialect = dialect
        self.held: dict[tuple[str, str], int | None] = {}
        """The sessions (key path, session) the open transaction checked, locked and holds, with their
        generation now (None: no row); emptied by every new transaction and before any job that is
        not a journal's (a delete, a read), so only journals' changes, which keep it, come between."""
        self._connect, self._secrets = connect, secrets
        self._sweep, self._sweep_every, self._next_sweep = sweep, sweep_every, 0.0
        try:
            self.connection: Connection | None = connect()
        except dialect.errors as exc:  # 'file is not a database', a read-only or full disk, no server...
            failure = self.error(exc)
            raise failure from failure.__cause__  # None where the driver's message held a secret
        self.thread = threading.Thread(target=self._serve, name="plait-session-store", daemon=True)
        self.thread.start()

    def error(self, error: Exception) -> SessionStoreError:
        """The driver's `error` as plait's, naming the store (the original is its ``__cause__``)."""
        text = str(error)
        failure = SessionStoreError(f"the session store {self.path} failed: {self._redact(text)}", self.path)
        if any(secret in text for secret in self._secrets):  # the driver quoted the password: its error stays out
            failure.__suppress_context__ = True
        else:
            failure.__cause__ = error
        return failure

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _serve(self) -> None:
        try:
            while True:
                item = self.jobs.get()
                batch = [item]
                while not self.jobs.empty() and item is not None:  # commit a burst of writes together
                    item = self.jobs.get()
                    batch.append(item)
                self._run([job for job in batch if job is not None])
                if self._sweep is not None and time.monotonic() >= self._next_sweep:
                    self._next_sweep = time.monotonic() + self._sweep_every
                    self._run([(self._job(self._sweep), None, None)])
                if batch[-1] is None:
                    return
        finally:
            if self.connection is not None:
                with contextlib.suppress(*self.dialect.errors):
                    self.connection.close()

    def _run(self, batch: list[Pending]) -> None:
        if not batch:
            return
        committed: list[Callable[[], None]] = []  # waited-for jobs' results, handed over once stored
        errors = self.dialect.errors
        try:
            connection = self._connected()
            self.held.clear()
            with self.dialect.batch(connection):  # a driver's error may surface as late as its end
                connection.execute(self.dialect.begin)
                for job, future, owner in batch:
                    if owner is None:
                        self.held.clear()
                    try:
                        done = job(connection)
                    except errors:
                        raise  # the transaction is in doubt: every job of it fails
                    except Exception as exc:
                        self._failed(exc, future, owner)
                    else:
                        if future is not None:
                            committed.append(done)
                connection.execute("COMMIT")
        except errors as exc:  # disk full, I/O error, a corrupted file, the file locked too long, no server
            self._abort()
            self._fail_all(batch, self.error(exc))
            return
        except SessionStoreError as exc:  # a reopened database that cannot be used (a newer schema)
            self._fail_all(batch, exc)
            return
        for hand_over in committed:
            hand_over()

    def _connected(self) -> Connection:
        """The connection, opened again if the server dropped the last one."""
        if self.connection is None:
            self.connection = self._connect()
        return self.connection

    def _fail_all(self, batch: list[Pending], failure: SessionStoreError) -> None:
        """The transaction failed: every job of it fails with `failure`, and so does each owner's next write."""
        for _, future, owner in batch:
            if owner is not None and owner.failure is None:
                owner.failure = failure
            if future is not None and not future.done():
                future.set_exception(failure)
        self._keep(failure)

    def _abort(self) -> None:
        """Roll a failed transaction back; drop a connection the server lost (opened again when next needed)."""
        connection = self.connection
        if connection is None:
            return
        with contextlib.suppress(*self.dialect.errors):
            connection.execute("ROLLBACK")
        if self.dialect.broken(connection):
            with contextlib.suppress(*self.dialect.errors):
                connection.close()
            self.connection = None

    def _failed(self, exc: Exception, future: _Waiter | None, owner: Owner | None) -> None:
        """One job raised: its owner takes no more writes; the error goes to its waiter, or to the next flush."""
        refused = owner is not None and exc is owner.failure  # a write after a failure: that one is reported
        if owner is not None and owner.failure is None:
            owner.failure = exc
        if future is not None:
            future.set_exception(exc)
        elif not refused:
            self._keep(exc)

    def _keep(self, failure: BaseException) -> None:
        if self.failure is None:
            self.failure = failure

    def take_failure(self) -> BaseException | None:
        """The first failed write no one waited for since the last call (None: none)."""
        failure, self.failure = self.failure, None
        return failure

    def _check_open(self) -> None:
        if self.closed:
            raise UserError(f"the session store {self.path} is closed")

    @staticmethod
    def _job(write: Callable[[Connection], object]) -> Job:
        def run(connection: Connection) -> Callable[[], None]:
            write(connection)
            return _nothing

        return run

    def submit(self, write: Callable[[Connection], object], owner: Owner | None = None) -> None:
        """Queue `write` for `owner` (not waited for; a failure is kept for the next `flush`)."""
        self._check_open()
        self.jobs.put((self._job(write), None, owner))

    def call(self, job: Callable[[Connection], T], owner: Owner | None = None) -> T:
        """Run `job` (for `owner`) in the writer's next transaction; its result once that transaction is committed.

        Raises:
            SessionStoreError: The transaction failed (the store named); `job`'s own errors as they are.
        """
        self._check_open()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run(connection: Connection) -> Callable[[], None]:
            result = job(connection)
            return lambda: future.set_result(result)

        self.jobs.put((run, future, owner))
        return future.result()

    def stop(self) -> None:
        """Run what is queued, then close the connection (idempotent)."""
        self.closed = True
        if self.thread.is_alive():
            self.jobs.put(None)
            self.thread.join()
