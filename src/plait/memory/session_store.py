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
is first used (reads see every write queued before them). `flush` waits for the queue;
`close` (or ``with``, or interpreter exit) flushes and closes the file.

**Durability.** An agent call on a stored session is durable when it returns: the call path
marks the turn open when it starts (`Turn`) and, once the reply is in memory, waits until
the turn is committed (SQLite WAL, ``synchronous=NORMAL``: a committed turn survives the
process being killed; a power cut may lose the last ones). A process killed in the middle
of a call leaves the turn open; when the session is read back, the interrupted turn (the
user message without an answer, an assistant tool call without its result) is removed, so
a restarted agent never sends a broken conversation.

Session ids are stored as JSON: use strings or integers (``0`` and ``"0"`` are different
sessions). One process should write a given session at a time. Agents' extra state
(`get_extra_state`) is not stored; `save_state` covers it. A memory's running summary
(`ContextSummary`, kept by a ``'summarise'`` `ContextPolicy`) is stored with its messages,
and so is a run paused for approval (its `RunState`), so a paused session survives a restart.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import os
import queue
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from ..exceptions import UserError
from ..schema import AgentMessage
from ..types import JSONValue
from ..utils._json import json_default
from .base_memory import ContextSummary

__all__ = ["SessionStore", "Turn"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

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

Job = Callable[[sqlite3.Connection], "Callable[[], None]"]
"""Runs in the writer's transaction; returns what to do once it is committed (hand a result over)."""


class _Waiter(Protocol):
    """The part of a job's `concurrent.futures.Future` the writer thread uses (its result is set by the job)."""

    def set_exception(self, exception: BaseException | None) -> None:
        """Hand `exception` to the waiting caller."""

    def done(self) -> bool:
        """Whether the caller already has its answer."""


class _AgentTree(Protocol):
    """An agent whose tree can be walked (`AgentModule.named_agents`)."""

    def named_agents(self) -> Iterable[tuple[str, object]]:
        """Every agent of the tree with its dotted path."""


AgentT = TypeVar("AgentT", bound=_AgentTree)
Pending = tuple[Job, "_Waiter | None"]
_TOUCH = (
    "INSERT INTO sessions (keypath, session, updated) VALUES (?, ?, ?) "
    "ON CONFLICT (keypath, session) DO UPDATE SET updated = excluded.updated"
)
_OPEN = (
    "INSERT INTO sessions (keypath, session, updated, open_from) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (keypath, session) DO UPDATE SET updated = excluded.updated, open_from = excluded.open_from"
)
_CLOSE = "UPDATE sessions SET open_from = NULL WHERE keypath = ? AND session = ?"
_FORGET = "DELETE FROM sessions WHERE keypath = ? AND session = ?"
_SESSION_TABLES = ("messages", "sessions", "summaries", "runs")


def _nothing() -> None:
    pass


_NOTHING = _nothing


def _session_key(session_id: Hashable) -> str:
    try:
        return json.dumps(session_id)
    except TypeError:
        raise UserError(f"a SessionStore keeps sessions with str or int ids, not {type(session_id).__name__}") from None


def _encode(message: AgentMessage) -> str:
    return json.dumps(message.model_dump(), ensure_ascii=False, default=json_default)


class _Writer:
    """One thread that owns the SQLite connection and runs every job, in order."""

    def __init__(self, path: str) -> None:
        self.jobs: queue.SimpleQueue[Pending | None] = queue.SimpleQueue()
        self.failure: BaseException | None = None
        self.closed = False
        self.path = path
        connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.executescript(_SCHEMA)
        columns = {row[1] for row in connection.execute("PRAGMA table_info(sessions)")}
        if "open_from" not in columns:  # a file written before turns were tracked
            connection.execute("ALTER TABLE sessions ADD COLUMN open_from INTEGER")
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
            connection.execute("BEGIN")
            for job, future in batch:
                try:
                    done = job(connection)
                    if future is not None:
                        committed.append(done)
                except Exception as exc:  # reported to the waiting caller, or kept for the next flush
                    if future is not None:
                        future.set_exception(exc)
                    else:
                        self.failure = exc
            connection.execute("COMMIT")
            for hand_over in committed:
                hand_over()
        except sqlite3.Error as exc:  # the transaction itself failed (disk full, file removed...)
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
            self.failure = exc
            for _, future in batch:
                if future is not None and not future.done():
                    future.set_exception(UserError(f"the session store {self.path} failed: {exc}"))

    def _check_open(self) -> None:
        if self.closed:
            raise UserError(f"the SessionStore {self.path} is closed")

    def submit(self, write: Callable[[sqlite3.Connection], object]) -> None:
        """Queue `write` (not waited for; a failure is kept for the next `flush`)."""
        self._check_open()

        def run(connection: sqlite3.Connection) -> Callable[[], None]:
            write(connection)
            return _NOTHING

        self.jobs.put((run, None))

    def call(self, job: Callable[[sqlite3.Connection], T]) -> T:
        """Run `job` in the writer's next transaction; its result once that transaction is committed."""
        self._check_open()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run(connection: sqlite3.Connection) -> Callable[[], None]:
            result = job(connection)
            return lambda: future.set_result(result)

        self.jobs.put((run, future))
        return future.result()

    def stop(self) -> None:
        self.closed = True
        if self.thread.is_alive():
            self.jobs.put(None)
            self.thread.join()


class _Journal:
    """Writes one memory's changes (a `MemoryJournal`) for one key path and session."""

    def __init__(self, writer: _Writer, keypath: str, session: str) -> None:
        self.writer = writer
        self.keypath = keypath
        self.session = session

    def _touch(self, connection: sqlite3.Connection) -> None:
        connection.execute(_TOUCH, (self.keypath, self.session, time.time()))

    def append(self, start: int, messages: Sequence[AgentMessage]) -> None:
        messages = list(messages)

        def write(connection: sqlite3.Connection) -> None:
            rows = [(self.keypath, self.session, start + i, _encode(m)) for i, m in enumerate(messages)]
            connection.executemany("INSERT OR REPLACE INTO messages VALUES (?, ?, ?, ?)", rows)
            self._touch(connection)

        self.writer.submit(write)

    def truncate(self, length: int) -> None:
        def write(connection: sqlite3.Connection) -> None:
            connection.execute(
                "DELETE FROM messages WHERE keypath = ? AND session = ? AND position >= ?",
                (self.keypath, self.session, length),
            )
            self._touch(connection)

        self.writer.submit(write)

    def open_turn(self, mark: int) -> Turn:
        """A call starts on a memory of `mark` messages (queued, not waited for)."""
        self.writer.submit(lambda c: c.execute(_OPEN, (self.keypath, self.session, time.time(), mark)))
        return Turn(self)

    def rewrite(self, messages: Sequence[AgentMessage]) -> None:
        messages = list(messages)

        def write(connection: sqlite3.Connection) -> None:
            rows = [(self.keypath, self.session, i, _encode(m)) for i, m in enumerate(messages)]
            connection.execute("DELETE FROM messages WHERE keypath = ? AND session = ?", (self.keypath, self.session))
            connection.executemany("INSERT INTO messages VALUES (?, ?, ?, ?)", rows)
            if rows:
                self._touch(connection)
            else:
                connection.execute(_FORGET, (self.keypath, self.session))
                for table in ("summaries", "runs"):  # an empty memory has no summary and no paused run
                    connection.execute(
                        f"DELETE FROM {table} WHERE keypath = ? AND session = ?", (self.keypath, self.session)
                    )

        self.writer.submit(write)

    def pause(self, state: dict[str, JSONValue] | None, wait: bool = False) -> None:
        self._keep("runs", state, wait)

    def summarise(self, summary: ContextSummary | None) -> None:
        self._keep("summaries", None if summary is None else summary.to_dict())

    def _keep(self, table: str, value: Mapping[str, object] | None, wait: bool = False) -> None:
        """Store `value` as the session's one row of `table` (``runs``, ``summaries``); None deletes it."""
        text = None if value is None else json.dumps(value, ensure_ascii=False, default=json_default)

        def write(connection: sqlite3.Connection) -> None:
            if text is None:
                connection.execute(
                    f"DELETE FROM {table} WHERE keypath = ? AND session = ?", (self.keypath, self.session)
                )
            else:
                connection.execute(
                    f"INSERT OR REPLACE INTO {table} VALUES (?, ?, ?)", (self.keypath, self.session, text)
                )

        if wait:
            self.writer.call(write)
        else:
            self.writer.submit(write)


class Turn:
    """One agent call on a stored session, open until `commit` or `abandon`."""

    __slots__ = ("journal",)

    def __init__(self, journal: _Journal) -> None:
        self.journal = journal

    def _close(self, connection: sqlite3.Connection) -> None:
        connection.execute(_CLOSE, (self.journal.keypath, self.journal.session))

    def commit(self) -> None:
        """The call finished: wait until it (and every change before it) is committed."""
        self.journal.writer.call(self._close)

    def abandon(self) -> None:
        """The call failed and its messages were rolled back (queued, not waited for)."""
        self.journal.writer.submit(self._close)


class SessionStore:
    """Sessions of agent memories kept in a SQLite file (see the module docstring).

    Args:
        path: The database file (created with its folder if missing).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = _Writer(str(self.path))
        self._finalizer = weakref.finalize(self, self._writer.stop)  # also runs at interpreter exit

    # -- agents -------------------------------------------------------------------------------
    def attach(self, agent: AgentT) -> AgentT:
        """Persist every memory of `agent`'s tree here; returns `agent`.

        Sessions already in memory are written now; the others are read back on first use.
        """
        from .manager import MemoryManager

        for path, module in agent.named_agents():
            memory = getattr(module, "memory", None)
            if isinstance(memory, MemoryManager):
                memory.bind(self, f"{path}.memory" if path else "memory")
        return agent

    def journal(self, keypath: str, session_id: Hashable) -> _Journal:
        """The writer of one memory's changes."""
        return _Journal(self._writer, keypath, _session_key(session_id))

    def read(self, keypath: str, session_id: Hashable) -> list[dict[str, JSONValue]] | None:
        """The stored messages of a session (as dicts), or None when it has none.

        A call that was interrupted (the process died before it finished) is removed first:
        its messages are deleted from the file and not returned.
        """
        session = _session_key(session_id)

        def read(connection: sqlite3.Connection) -> list[dict[str, JSONValue]] | None:
            opened = connection.execute(
                "SELECT open_from FROM sessions WHERE keypath = ? AND session = ?", (keypath, session)
            ).fetchone()
            if opened is not None and opened[0] is not None:
                removed = connection.execute(
                    "DELETE FROM messages WHERE keypath = ? AND session = ? AND position >= ?",
                    (keypath, session, opened[0]),
                ).rowcount
                connection.execute(_CLOSE, (keypath, session))
                logger.warning(
                    "session %s (%s): removed %d message(s) of a call interrupted before it finished",
                    session,
                    keypath,
                    removed,
                )
            rows = connection.execute(
                "SELECT message FROM messages WHERE keypath = ? AND session = ? ORDER BY position", (keypath, session)
            ).fetchall()
            return [json.loads(row[0]) for row in rows] if rows else None

        return self._writer.call(read)

    def read_run(self, keypath: str, session_id: Hashable) -> dict[str, JSONValue] | None:
        """The stored state of a session's paused run (`RunState.to_dict`), or None."""
        data = self._read_one("runs", keypath, session_id)
        return data if isinstance(data, dict) else None

    def read_summary(self, keypath: str, session_id: Hashable) -> ContextSummary | None:
        """The stored running summary of a session's memory, or None when it has none."""
        data = self._read_one("summaries", keypath, session_id)
        return None if data is None else ContextSummary.from_dict(data)

    def _read_one(self, table: str, keypath: str, session_id: Hashable) -> object:
        """The JSON value of the session's row of `table` (``runs``, ``summaries``), or None."""
        session = _session_key(session_id)

        def read(connection: sqlite3.Connection) -> str | None:
            query = f"SELECT * FROM {table} WHERE keypath = ? AND session = ?"
            row = connection.execute(query, (keypath, session)).fetchone()
            return None if row is None else str(row[2])

        text = self._writer.call(read)
        return None if text is None else json.loads(text)

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

        Agents that already loaded it keep their copy until they `reset` it.
        """
        session = _session_key(session_id)

        def write(connection: sqlite3.Connection) -> None:
            for table in _SESSION_TABLES:
                connection.execute(f"DELETE FROM {table} WHERE session = ?", (session,))

        self._writer.call(write)

    def prune(self, older_than: float) -> list[Hashable]:
        """Remove sessions whose last change is more than `older_than` seconds old; returns their ids."""
        cutoff = time.time() - older_than

        def write(connection: sqlite3.Connection) -> list[Hashable]:
            query = "SELECT session FROM sessions GROUP BY session HAVING MAX(updated) < ?"
            stale = [row[0] for row in connection.execute(query, (cutoff,))]
            for session in stale:
                for table in _SESSION_TABLES:
                    connection.execute(f"DELETE FROM {table} WHERE session = ?", (session,))
            return [json.loads(session) for session in stale]

        return self._writer.call(write)

    # -- lifetime -----------------------------------------------------------------------------
    def flush(self) -> None:
        """Wait until every change so far is on disk.

        Raises:
            UserError: A queued write failed (for instance a message that is not JSON-able).
        """
        self._writer.call(lambda connection: None)
        failure, self._writer.failure = self._writer.failure, None
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
