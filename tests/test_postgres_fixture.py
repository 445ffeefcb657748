"""The real PostgreSQL of the tests (`_postgres.PostgresServer`, the ``postgres`` / ``postgres_dsn`` fixtures).

psycopg talks to it for real, sync and async and through a pool; each test's database is its own;
it listens on 127.0.0.1 only; and neither `stop` nor a test process killed outright leaves a
server process behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import _postgres
from _postgres import DIR_PREFIX, PostgresServer, PostgresUnavailable, find_bindir

TESTS = Path(__file__).resolve().parent


def test_a_sync_connection_creates_inserts_and_selects(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute("CREATE TABLE turns (session text, n int, body jsonb)")
        conn.execute("INSERT INTO turns VALUES (%s, %s, %s)", ("s1", 1, Jsonb({"role": "user"})))
        conn.commit()
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT session, n, body FROM turns").fetchall() == [("s1", 1, {"role": "user"})]


def test_an_async_connection_creates_inserts_and_selects(postgres_dsn: str) -> None:
    async def main() -> list[tuple[object, ...]]:
        async with await psycopg.AsyncConnection.connect(postgres_dsn) as conn:
            await conn.execute("CREATE TABLE turns (session text, n int)")
            async with conn.cursor() as cur:
                await cur.executemany("INSERT INTO turns VALUES (%s, %s)", [("s1", 1), ("s1", 2)])
            await conn.commit()
            cur = await conn.execute("SELECT session, n FROM turns ORDER BY n")
            return await cur.fetchall()

    assert asyncio.run(main()) == [("s1", 1), ("s1", 2)]


@pytest.mark.parametrize("run", [1, 2])
def test_each_test_has_a_fresh_database(postgres_dsn: str, run: int) -> None:
    # Both runs create the same table: the second would meet the first's if they shared a database.
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,)
        conn.execute("CREATE TABLE shared_name (run int)")
        conn.execute("INSERT INTO shared_name VALUES (%s)", (run,))


def test_two_databases_of_one_server_are_isolated(postgres: PostgresServer, postgres_dsn: str) -> None:
    other = postgres.create_database("isolation_other")
    try:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE secrets (v text)")
            conn.execute("INSERT INTO secrets VALUES ('mine')")
            mine = conn.execute("SELECT current_database()").fetchone()
        with psycopg.connect(other, autocommit=True) as conn:
            assert conn.execute("SELECT current_database()").fetchone() != mine
            assert conn.execute("SELECT to_regclass('secrets')").fetchone() == (None,)
    finally:
        postgres.drop_database("isolation_other")


def test_a_database_name_is_checked(postgres: PostgresServer) -> None:
    with pytest.raises(ValueError, match="lower-case letters"):
        postgres.create_database('x"; DROP DATABASE postgres; --')


def test_it_listens_on_127_0_0_1_only(postgres: PostgresServer) -> None:
    with psycopg.connect(postgres.dsn) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
        rules = conn.execute("SELECT type, address, auth_method FROM pg_hba_file_rules ORDER BY line_number").fetchall()
    assert rules == [("local", None, "trust"), ("host", "127.0.0.1", "trust")]
    # Other addresses of this machine have no listener on the port: loopback's 127.0.0.2 and ::1.
    for address in ("127.0.0.2", "::1"):
        with pytest.raises(OSError):  # refused (or no IPv6 at all)
            socket.create_connection((address, postgres.port), timeout=10).close()


def test_the_end_of_run_sweep_finds_the_server(postgres: PostgresServer, request: pytest.FixtureRequest) -> None:
    # tests/conftest.py's finder of what a run leaves running: at the end of the run it reports,
    # kills and fails on those it finds that were started during the run.
    conftest = request.config.pluginmanager.get_plugin(str(TESTS / "conftest.py"))
    assert conftest is not None
    assert postgres.pid in conftest._servers()


def test_a_connection_pool_serves_threads(postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE hits (worker int)")
    with ConnectionPool(postgres_dsn, min_size=2, max_size=4, open=False) as pool:

        def work(worker: int) -> None:
            for _ in range(5):
                with pool.connection() as conn:
                    conn.execute("INSERT INTO hits VALUES (%s)", (worker,))

        threads = [threading.Thread(target=work, args=(worker,)) for worker in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with pool.connection() as conn:
            rows = conn.execute("SELECT worker, count(*) FROM hits GROUP BY worker ORDER BY worker").fetchall()
        assert pool.get_stats()["pool_max"] == 4
    assert rows == [(worker, 5) for worker in range(6)]


def test_an_async_connection_pool_serves_tasks(postgres_dsn: str) -> None:
    async def main() -> int:
        async with AsyncConnectionPool(postgres_dsn, min_size=1, max_size=3, open=False) as pool:

            async def one() -> int:
                async with pool.connection() as conn:
                    cur = await conn.execute("SELECT pg_backend_pid()")
                    row = await cur.fetchone()
                    assert row is not None
                    return int(row[0])

            return len(await asyncio.gather(*(one() for _ in range(12))))

    assert asyncio.run(main()) == 12


def test_stop_leaves_no_process_and_no_directory() -> None:
    server = PostgresServer().start()
    conn = psycopg.connect(server.dsn, autocommit=True)
    try:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()
        processes = server.processes()
        directory = server.directory
        # The postmaster, its helpers (checkpointer, writers...) and this connection's backend.
        assert backend is not None and backend[0] in processes and server.pid in processes
        assert len(processes) >= 3
        server.stop()  # with the connection still open: a fast shutdown ends its backend
    finally:
        server.stop()
        conn.close()
    assert server.running(processes) == {}
    assert directory is not None and not directory.exists()
    assert server.pid is None


def test_a_server_that_cannot_start_fails_with_its_own_words_and_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[str] = []
    mkdtemp = tempfile.mkdtemp

    def recording_mkdtemp(**options: str) -> str:
        made.append(mkdtemp(**options))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", recording_mkdtemp)
    server = PostgresServer(settings={"shared_buffers": "'plenty'"})
    with pytest.raises(RuntimeError, match=r"exited \(code 1\) before it was ready: .*shared_buffers"):
        server.start()
    assert server.pid is None and server.directory is None
    assert len(made) == 1 and not os.path.exists(made[0])


def test_missing_binaries_name_the_setup_command(tmp_path: Path) -> None:
    (tmp_path / "15" / "bin").mkdir(parents=True)  # a version directory without initdb
    with pytest.raises(PostgresUnavailable, match=r"binaries are missing .*make test.*ensure_postgresql\.sh"):
        find_bindir(tmp_path)
    assert find_bindir().parent.name.isdigit()  # this machine has them


def test_a_port_taken_before_the_server_binds_it_is_traded_for_another(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = iter([taken.getsockname()[1]])
        real = _postgres._free_port
        monkeypatch.setattr(_postgres, "_free_port", lambda: next(ports, None) or real())
        with PostgresServer() as server, psycopg.connect(server.dsn) as conn:
            assert server.port != taken.getsockname()[1]
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert next(ports, None) is None  # the taken port was tried first


_CRASHING_RUN = textwrap.dedent(
    """
    import json, os, signal, sys
    sys.path.insert(0, sys.argv[1])
    from _postgres import PostgresServer

    server = PostgresServer().start()
    print(json.dumps({"processes": server.processes(), "directory": str(server.directory)}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # a test run killed outright: no finalizer, no stop()
    """
)


def test_a_test_process_killed_outright_leaves_no_server() -> None:
    run = subprocess.run(
        [sys.executable, "-c", _CRASHING_RUN, str(TESTS)], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == -signal.SIGKILL, run.stderr
    started = json.loads(run.stdout)
    processes = {int(pid): start for pid, start in started["processes"].items()}
    try:
        assert len(processes) >= 2  # the postmaster and its helpers were running when the process died
        deadline = time.monotonic() + 60  # the kernel's SIGQUIT: an immediate shutdown
        while PostgresServer.running(processes) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert PostgresServer.running(processes) == {}
    finally:
        for pid in PostgresServer.running(processes):
            os.kill(pid, signal.SIGKILL)
        directory = Path(started["directory"])
        assert directory.name.startswith(DIR_PREFIX)
        shutil.rmtree(directory)  # the killed process could not delete it
