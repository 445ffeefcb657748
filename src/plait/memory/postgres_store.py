"""`PostgresSessionStore`: agent memories kept in a PostgreSQL database, shared by processes and machines.

```python
store = PostgresSessionStore("postgresql://plait@db.internal/app")   # psycopg 3: pip install 'plait[postgres]'
store.attach(agent)
agent("My name is Ada.", session_id="u42")
# ... any worker, on any machine, with the same DSN:
PostgresSessionStore(dsn).attach(agent)("What is my name?", session_id="u42")
```

The same backend as `SessionStore` (a `SessionBackend`), on a server: one body of SQL
(`plait.memory._sql_store`, `plait.memory._session_journal`), run with PostgreSQL's `Dialect`.
Writes go through a queue to one writer thread per store, which commits a burst of them in one
transaction; an agent call returns once its turn is committed; reads are ordered after the writes
queued before them (so they run on that thread's connection too, not a pool).

**One writer per session, across processes and machines.** Each write checks the session's
generation inside a transaction that holds the session's row (``SELECT ... FOR UPDATE``; for a
session with no row yet, a transaction-scoped advisory lock on its key) until it commits. A second
writer that changed the session in between gets `SessionConflictError`, never a silent overwrite.
A process killed mid-transaction holds nothing: the server rolls its transaction back.

**Schema.** The tables live in their own PostgreSQL schema (``plait`` unless `schema` says
otherwise), so they never meet an application's own ``sessions`` table; ``plait_schema`` there holds
the version, and opening a store migrates an older version in one transaction (concurrent openers
wait for each other). Version 1 is `SessionStore`'s tables; version 2 adds the indexes that removal
by session id and by age reads.

**Secrets.** The DSN's password never appears in the store's repr, its errors or its logs: the
store is named by its address without it (``postgresql://user@host:port/db``).
"""

from __future__ import annotations

import contextlib
import functools
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..exceptions import MissingDependencyError, SessionStoreError, UserError
from ._sql_dialect import Connection, Cursor, Dialect
from ._sql_store import SqlSessionStore

if TYPE_CHECKING:
    import psycopg

__all__ = ["SCHEMA_VERSION", "PostgresSessionStore", "migrate"]

_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: SessionStore's tables (see plait.memory.session_store)
        "CREATE TABLE messages (keypath TEXT NOT NULL, session TEXT NOT NULL, position INTEGER NOT NULL, "
        "message TEXT NOT NULL, PRIMARY KEY (keypath, session, position))",
        "CREATE TABLE sessions (keypath TEXT NOT NULL, session TEXT NOT NULL, updated DOUBLE PRECISION NOT NULL, "
        "open_from INTEGER, generation BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (keypath, session))",
        "CREATE TABLE runs (keypath TEXT NOT NULL, session TEXT NOT NULL, state TEXT NOT NULL, "
        "PRIMARY KEY (keypath, session))",
        "CREATE TABLE summaries (keypath TEXT NOT NULL, session TEXT NOT NULL, summary TEXT NOT NULL, "
        "PRIMARY KEY (keypath, session))",
    ),
    (  # 2: removing a session by its id (every key path), and by age, without reading every row
        "CREATE INDEX sessions_by_session ON sessions (session)",
        "CREATE INDEX sessions_by_age ON sessions (updated)",
        "CREATE INDEX messages_by_session ON messages (session)",
        "CREATE INDEX runs_by_session ON runs (session)",
        "CREATE INDEX summaries_by_session ON summaries (session)",
    ),
)
SCHEMA_VERSION = len(_MIGRATIONS)
"""The version of the tables this plait writes (`migrate` brings a database to it)."""

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def _psycopg() -> ModuleType:
    try:
        import psycopg
    except ImportError:
        raise MissingDependencyError("psycopg", extra="postgres", feature="PostgresSessionStore") from None
    return psycopg


@functools.lru_cache(maxsize=512)
def _placeholders(sql: str) -> str:
    """``?`` placeholders as psycopg's ``%s`` (no statement of the stores holds a ``?`` or ``%`` otherwise)."""
    return sql.replace("?", "%s")


class _PgConnection:
    """A psycopg connection as the stores use it (a `Connection`): ``?`` placeholders, autocommit."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        return self.raw.execute(_placeholders(sql), parameters)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> object:
        with self.raw.cursor() as cursor:
            cursor.executemany(_placeholders(sql), parameters)
        return None

    def close(self) -> None:
        self.raw.close()

    @staticmethod
    def pipeline(connection: Connection) -> AbstractContextManager[object]:
        """A transaction in pipeline mode: statements are sent at once, results awaited only where read."""
        return connection.raw.pipeline() if isinstance(connection, _PgConnection) else contextlib.nullcontext()

    @staticmethod
    def lost(connection: Connection) -> bool:
        """Whether the server is gone from `connection` (it is opened again for the next transaction)."""
        return isinstance(connection, _PgConnection) and (connection.raw.broken or connection.raw.closed)


@functools.lru_cache(maxsize=1)
def _dialect() -> Dialect:
    """PostgreSQL's way of running the stores' transactions (see `plait.memory._sql_dialect`)."""
    return Dialect(
        name="PostgreSQL",
        begin="BEGIN",  # read committed: a row read FOR UPDATE after a wait is the other writer's committed one
        lock_rows=" FOR UPDATE",
        lock_new="SELECT pg_advisory_xact_lock(hashtext(?), hashtext(?))",  # (keypath, session): no row to lock yet
        errors=(_psycopg().Error,),
        broken=_PgConnection.lost,
        batch=_PgConnection.pipeline,
    )


def migrate(
    raw: psycopg.Connection[Any], schema: str = "plait", target: int = SCHEMA_VERSION, *, where: str = "PostgreSQL"
) -> int:
    """Bring the tables in `schema` to version `target` (created when missing) in one transaction; returns it.

    Several processes opening one database at once wait for each other (an advisory lock), so
    each migration runs once. `raw` is an autocommit psycopg connection; its ``search_path`` is
    `schema` afterwards. `where` names the database in errors.

    Raises:
        SessionStoreError: The database holds a newer version than `target` (a newer plait wrote it).
        psycopg.Error: The server refused (the store turns it into `SessionStoreError`).
    """
    from psycopg import sql

    name = sql.Identifier(schema)
    raw.execute("BEGIN")
    try:
        raw.execute("SELECT pg_advisory_xact_lock(hashtext('plait_schema'), hashtext(%s))", (schema,))
        if raw.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None:
            raw.execute(sql.SQL("CREATE SCHEMA {}").format(name))
        raw.execute(sql.SQL("SET search_path TO {}").format(name))
        raw.execute("CREATE TABLE IF NOT EXISTS plait_schema (version INTEGER NOT NULL)")
        row = raw.execute("SELECT version FROM plait_schema").fetchone()
        version = 0 if row is None else int(row[0])
        if row is None:
            raw.execute("INSERT INTO plait_schema VALUES (0)")
        if version > target:
            raise SessionStoreError(
                f"the session store {where}: the tables in schema {schema!r} are at version {version}, newer "
                f"than this plait's ({target}): a newer plait wrote them; upgrade plait",
                where,
            )
        for step in _MIGRATIONS[version:target]:
            for statement in step:
                raw.execute(statement)
        raw.execute("UPDATE plait_schema SET version = %s", (max(version, target),))
        raw.execute("COMMIT")
    except BaseException:
        if not raw.broken:
            raw.execute("ROLLBACK")
        raise
    return max(version, target)


def _address(psycopg: ModuleType, dsn: str) -> tuple[str, tuple[str, ...], str]:
    """The DSN as messages show it (no password), the secrets they must never show, and its ``options``."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        raise UserError(
            "PostgresSessionStore: the DSN could not be parsed (it is not shown here, as it may hold a password); "
            "write it as 'postgresql://user@host:port/dbname' or 'host=... dbname=...'"
        ) from None
    secrets = [str(value) for key, value in params.items() if "password" in key and value]
    secrets += [urllib.parse.quote(secret, safe="") for secret in secrets]
    user, host, port = params.get("user"), params.get("host") or "localhost", params.get("port")
    where = f"postgresql://{f'{user}@' if user else ''}{host}{f':{port}' if port else ''}/{params.get('dbname', '')}"
    return where, tuple(dict.fromkeys(secrets)), str(params.get("options") or "")


class PostgresSessionStore(SqlSessionStore):
    """Sessions of agent memories kept in a PostgreSQL database (a `SessionBackend`; see the module docstring).

    Args:
        dsn: The database, as psycopg takes it (``postgresql://user:password@host:port/dbname`` or
            ``host=... dbname=...``); never shown (see `url`).
        schema: The PostgreSQL schema the tables live in (created if missing).
        ttl: Remove sessions unchanged for this many seconds (None: keep them).
        max_sessions: Keep at most this many sessions, removing the least recently changed (None: no cap).
        sweep_every: With a retention policy, apply it after writes at most this often (seconds).
        lock_timeout: Seconds a write waits for a session another writer holds before it fails.
        shared: Other processes or machines take turns on the same sessions (server workers,
            replicas): each call first reads its session back when another process changed it.

    Attributes:
        url: The database's address without the password (what errors and the repr show).

    Raises:
        MissingDependencyError: psycopg is not installed (``pip install 'plait[postgres]'``).
        SessionStoreError: The server could not be reached, refused, or holds a newer schema.
        UserError: The DSN, the schema name or a retention setting is not valid.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "plait",
        ttl: float | None = None,
        max_sessions: int | None = None,
        sweep_every: float = 60.0,
        lock_timeout: float = 30.0,
        shared: bool = False,
    ) -> None:
        psycopg = _psycopg()
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise UserError(f"schema must be a name of a-z, 0-9 and _, not starting with a digit: {schema!r}")
        self.url, secrets, options = _address(psycopg, dsn)
        self.schema = schema
        options = f"{options} -c lock_timeout={max(1, round(lock_timeout * 1000))}".strip()  # the DSN's own kept

        def connect() -> Connection:
            raw = psycopg.connect(dsn, autocommit=True, application_name="plait-session-store", options=options)
            try:
                migrate(raw, schema, where=self.url)
            except BaseException:
                raw.close()
                raise
            return _PgConnection(raw)

        super().__init__(
            self.url,
            connect,
            _dialect(),
            secrets=secrets,
            ttl=ttl,
            max_sessions=max_sessions,
            sweep_every=sweep_every,
            shared=shared,
        )

    def __repr__(self) -> str:
        schema = "" if self.schema == "plait" else f", schema={self.schema!r}"
        shared = ", shared=True" if self.shared else ""
        return f"PostgresSessionStore({self.url!r}{schema}{shared})"
