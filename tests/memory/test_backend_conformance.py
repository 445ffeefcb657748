"""The session backend conformance suite (`plait.testing.session_backends`) on SQLite and on a real PostgreSQL.

Every check runs on both backends, on an empty store of its own: a SQLite file in the test's
folder, or a fresh database on the session's PostgreSQL server (tests/_postgres.py). The
cross-process checks start real child processes and kill them with SIGKILL.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.testing.session_backends import CHECKS, BackendSpec, Check


@pytest.fixture(params=["sqlite", "postgres"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> BackendSpec:
    if request.param == "sqlite":
        return BackendSpec("plait.memory:SessionStore", (str(tmp_path / "sessions.db"),))
    dsn = request.getfixturevalue("postgres_dsn")
    return BackendSpec("plait.memory:PostgresSessionStore", (dsn,))


@pytest.mark.parametrize("check", list(CHECKS.values()), ids=list(CHECKS))
def test_backend_conformance(spec: BackendSpec, check: Check, tmp_path: Path) -> None:
    check(spec, tmp_path)
