"""The `SessionStore`'s writer: one thread that owns the SQLite connection and runs every job in order.

A burst of queued jobs runs in one transaction (``BEGIN IMMEDIATE``: the file's write lock is
taken first, so a job's checks and writes see no other writer in between). A job that raises
fails alone; a SQLite error (disk full, I/O error, a corrupted file) fails the whole
transaction, which is rolled back. Either way the job's owner (the journal of the session it
writes) is marked failed, so none of its later writes can land on a file that lacks the
earlier ones, and the error reaches whoever waits for the job (or the next `flush`). SQLite's
own exceptions never leave this module: they become `SessionStoreError`, naming the file.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

from ..exceptions import SessionStoreError, UserError

__all__ = ["Owner", "StoreWriter", "store_error"]

T = TypeVar("T")

Job = Callable[[sqlite3.Connection], "Callable[[], None]"]
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


def store_error(path: str, error: sqlite3.Error) -> SessionStoreError:
    """SQLite's `error` as plait's, naming the file (the original is its ``__cause__``)."""
    failure = SessionStoreError(f"the session store {path} failed: {error}", path)
    failure.__cause__ = error
    return failure


def _nothing() -> None:
    pass


class StoreWriter:
    """The thread that runs every job on the file at `path` (`prepare` sets a new connection up)."""

    def __init__(self, path: str, prepare: Callable[[sqlite3.Connection], None]) -> None:
        self.jobs: queue.SimpleQueue[Pending | None] = queue.SimpleQueue()
        self.failure: BaseException | None = None  # the first failed write no one waited for, until `take_failure`
        self.closed = False
        self.path = path
        try:
            connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise store_error(path, exc) from exc
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            prepare(connection)
        except sqlite3.Error as exc:  # 'file is not a database', a read-only or full disk...
            connection.close()
            raise store_error(path, exc) from exc
        self.thread = threading.Thread(target=self._serve, args=(connection,), name="plait-session-store", daemon=True)
        self.thread.start()

    def _serve(self, connection: sqlite3.Connection) -> None:
        try:
            while True:
                item = self.jobs.get()
                batch = [item]
                while not self.jobs.empty() and item is not None:  # commit a burst of writes together
                    item = self.jobs.get()
                    batch.append(item)
                self._run(connection, [job for job in batch if job is not None])
                if batch[-1] is None:
                    return
        finally:
            connection.close()

    def _run(self, connection: sqlite3.Connection, batch: list[Pending]) -> None:
        committed: list[Callable[[], None]] = []  # waited-for jobs' results, handed over once on disk
        try:
            connection.execute("BEGIN IMMEDIATE")
            for job, future, owner in batch:
                try:
                    done = job(connection)
                except sqlite3.Error:
                    raise  # the transaction is in doubt: every job of it fails
                except Exception as exc:
                    self._failed(exc, future, owner)
                else:
                    if future is not None:
                        committed.append(done)
            connection.execute("COMMIT")
        except sqlite3.Error as exc:  # disk full, I/O error, a corrupted file, the file locked too long
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
            failure = store_error(self.path, exc)
            for _, future, owner in batch:
                if owner is not None and owner.failure is None:
                    owner.failure = failure
                if future is not None and not future.done():
                    future.set_exception(failure)
            self._keep(failure)
            return
        for hand_over in committed:
            hand_over()

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
            raise UserError(f"the SessionStore {self.path} is closed")

    def submit(self, write: Callable[[sqlite3.Connection], object], owner: Owner | None = None) -> None:
        """Queue `write` for `owner` (not waited for; a failure is kept for the next `flush`)."""
        self._check_open()

        def run(connection: sqlite3.Connection) -> Callable[[], None]:
            write(connection)
            return _nothing

        self.jobs.put((run, None, owner))

    def call(self, job: Callable[[sqlite3.Connection], T], owner: Owner | None = None) -> T:
        """Run `job` (for `owner`) in the writer's next transaction; its result once that transaction is committed.

        Raises:
            SessionStoreError: The transaction failed (the file named); `job`'s own errors as they are.
        """
        self._check_open()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run(connection: sqlite3.Connection) -> Callable[[], None]:
            result = job(connection)
            return lambda: future.set_result(result)

        self.jobs.put((run, future, owner))
        return future.result()

    def stop(self) -> None:
        """Run what is queued, then close the connection."""
        self.closed = True
        if self.thread.is_alive():
            self.jobs.put(None)
            self.thread.join()
