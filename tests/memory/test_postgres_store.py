"""PostgresSessionStore beyond the conformance suite: schema versions and migration, the password kept out of
every message, a connection the server drops, a session held by another transaction, its own schema."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from plait.agents import Agent
from plait.exceptions import MissingDependencyError, SessionStoreError, UserError
from plait.memory import PostgresSessionStore
from plait.memory.postgres_store import SCHEMA_VERSION, migrate
from plait.testing import FunctionLLM


def _agent() -> Agent:
    return Agent(FunctionLLM(lambda messages, params: f"{len(messages)}:{messages[-1]['content']}"))


def _with_password(dsn: str, password: str) -> str:
    """`dsn` with a password (the test server trusts loopback, so any password is accepted)."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(netloc=parts.netloc.replace("@", f":{password}@", 1)))


def _shown(error: BaseException | None) -> str:
    """What a traceback of `error` shows of it and of the errors chained to it (their messages)."""
    shown = []
    while error is not None:
        shown.append(f"{type(error).__name__}: {error}")
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    return "\n".join(shown)


def _version(dsn: str, schema: str = "plait") -> int:
    with psycopg.connect(dsn) as raw:
        row = raw.execute(f"SELECT version FROM {schema}.plait_schema").fetchone()
    assert row is not None
    return int(row[0])


def _indexes(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as raw:
        rows = raw.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'plait'").fetchall()
    return {row[0] for row in rows if not row[0].endswith("_pkey")}


def test_a_version_1_database_is_migrated_and_its_sessions_go_on(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as raw:
        assert migrate(raw, target=1) == 1  # the tables as the first version wrote them
        rows = [(0, {"content": "kept", "sender": "user"}), (1, {"content": "1:kept", "sender": "Agent"})]
        for position, message in rows:
            raw.execute("INSERT INTO messages VALUES ('memory', '\"u\"', %s, %s)", (position, json.dumps(message)))
        raw.execute("INSERT INTO sessions VALUES ('memory', '\"u\"', 1.0, NULL, 7)")
    assert _version(postgres_dsn) == 1 and _indexes(postgres_dsn) == set()
    with PostgresSessionStore(postgres_dsn) as store:
        agent = store.attach(_agent())
        assert agent("next", session_id="u").content == "3:next"  # the model saw the old history
        assert [m["content"] for m in store.read("memory", "u") or []] == ["kept", "1:kept", "next", "3:next"]
    assert _version(postgres_dsn) == SCHEMA_VERSION == 2
    assert _indexes(postgres_dsn) == {
        "sessions_by_session",
        "sessions_by_age",
        "messages_by_session",
        "runs_by_session",
        "summaries_by_session",
    }
    PostgresSessionStore(postgres_dsn).close()  # opening an up-to-date database changes nothing
    assert _version(postgres_dsn) == 2


def test_processes_opening_a_new_database_at_once_migrate_it_once(postgres_dsn: str) -> None:
    opened: list[object] = []

    def open_store() -> None:
        try:
            PostgresSessionStore(postgres_dsn).close()
            opened.append("ok")
        except Exception as exc:  # reported below
            opened.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert opened == ["ok"] * 4
    assert _version(postgres_dsn) == SCHEMA_VERSION


def test_a_database_from_a_newer_plait_is_refused_naming_its_version(postgres_dsn: str) -> None:
    PostgresSessionStore(postgres_dsn).close()
    with psycopg.connect(postgres_dsn, autocommit=True) as raw:
        raw.execute("UPDATE plait.plait_schema SET version = 99")
    with pytest.raises(SessionStoreError, match="version 99, newer than this plait's") as caught:
        PostgresSessionStore(_with_password(postgres_dsn, "pw-123"))
    assert "pw-123" not in str(caught.value) and caught.value.path.startswith("postgresql://postgres@127.0.0.1:")


def test_the_password_is_in_no_repr_error_or_log(
    postgres_dsn: str, postgres: Any, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "Sup3r-s3cret"
    caplog.set_level(logging.DEBUG)
    with PostgresSessionStore(_with_password(postgres_dsn, secret)) as store:
        assert secret not in repr(store) and secret not in store.url and "127.0.0.1" in store.url
        store.attach(_agent())("hello", session_id="s")
    # a server that refuses a setting whose value is the password: its own message quotes it
    quoted = _with_password(postgres_dsn, "no-such-value") + "?options=-c%20statement_timeout%3Dno-such-value"
    with pytest.raises(SessionStoreError) as caught:
        PostgresSessionStore(quoted)
    shown = _shown(caught.value)
    assert 'invalid value for parameter "statement_timeout": "***"' in shown and "no-such-value" not in shown
    with pytest.raises(SessionStoreError) as refused:  # nothing listens on the port
        PostgresSessionStore(f"postgresql://postgres:{secret}@127.0.0.1:9/db?connect_timeout=5")
    shown = _shown(refused.value)
    assert "127.0.0.1" in shown and secret not in shown and "Connection refused" in shown
    with pytest.raises(UserError, match="could not be parsed") as unparsable:
        PostgresSessionStore(f"host=127.0.0.1 password={secret} broken")
    assert secret not in str(unparsable.value) and unparsable.value.__cause__ is None
    assert secret not in caplog.text


def test_a_connection_the_server_drops_fails_one_call_then_is_opened_again(postgres_dsn: str) -> None:
    with PostgresSessionStore(postgres_dsn) as store:
        agent = store.attach(_agent())
        agent("before", session_id="s")
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'plait-session-store'"
            ).fetchall()
        assert killed == [(True,)]
        with pytest.raises(SessionStoreError, match="the session store postgresql://") as caught:
            agent("lost", session_id="s")  # the call is rolled back, from memory too
        assert isinstance(caught.value.__cause__, psycopg.OperationalError)
        assert agent("after", session_id="s").content == "3:after"  # a new connection, the session read again
        assert [m["content"] for m in store.read("memory", "s") or []] == ["before", "1:before", "after", "3:after"]


def test_a_reopened_connection_that_finds_a_newer_schema_fails_the_call_and_the_store_lives_on(
    postgres_dsn: str,
) -> None:
    with PostgresSessionStore(postgres_dsn) as store:
        agent = store.attach(_agent())
        agent("before", session_id="s")
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            admin.execute("UPDATE plait.plait_schema SET version = 99")  # a newer plait migrated meanwhile
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'plait-session-store'"
            )
            with pytest.raises(SessionStoreError):
                agent("lost", session_id="s")  # the dropped connection
            with pytest.raises(SessionStoreError, match="version 99, newer than this plait's"):
                agent("refused", session_id="s")  # reopened: a database this plait must not write
            admin.execute("UPDATE plait.plait_schema SET version = 2")
        assert agent("after", session_id="s").content == "3:after"  # the writer thread is still there


def test_a_session_another_transaction_holds_fails_after_the_lock_timeout(postgres_dsn: str) -> None:
    with PostgresSessionStore(postgres_dsn, lock_timeout=0.5) as store:
        agent = store.attach(_agent())
        agent("first", session_id="held")
        with psycopg.connect(postgres_dsn) as other:  # a transaction that never lets go
            other.execute("SELECT * FROM plait.sessions WHERE session = '\"held\"' FOR UPDATE")
            with pytest.raises(SessionStoreError, match="lock timeout"):
                agent("blocked", session_id="held")
            other.rollback()
        assert agent("free again", session_id="held").content == "3:free again"


def test_the_tables_live_in_their_own_schema(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as raw:  # an application's own table of that name
        raw.execute("CREATE TABLE public.sessions (id serial, who text)")
        raw.execute("INSERT INTO public.sessions (who) VALUES ('the app')")
    with PostgresSessionStore(postgres_dsn) as one, PostgresSessionStore(postgres_dsn, schema="other_app") as two:
        one.attach(_agent())("in plait", session_id="s")
        two.attach(_agent())("in other_app", session_id="s")
        assert [m["content"] for m in one.read("memory", "s") or []] == ["in plait", "1:in plait"]
        assert [m["content"] for m in two.read("memory", "s") or []] == ["in other_app", "1:in other_app"]
        assert repr(two).endswith("schema='other_app')")
    with psycopg.connect(postgres_dsn) as raw:
        assert raw.execute("SELECT who FROM public.sessions").fetchall() == [("the app",)]
    with pytest.raises(UserError, match="schema must be"):
        PostgresSessionStore(postgres_dsn, schema="x; DROP TABLE y")


def test_without_psycopg_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` raises ImportError
    with pytest.raises(MissingDependencyError, match=r"plait\[postgres\]"):
        PostgresSessionStore("postgresql://nobody@127.0.0.1/db")


def test_importing_plait_memory_loads_no_database_driver() -> None:
    code = "import sys, plait.memory; print([m for m in ('psycopg', 'sqlite3') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
