"""A real PostgreSQL server for the tests (`PostgresServer`), from the server binaries on the machine.

`PostgresServer().start()` runs Debian's ``initdb`` into a fresh temporary directory, then the
``postgres`` server on it: TCP on 127.0.0.1 only, on a free port; its unix socket in that private
directory; trust authentication for those two ways in and nothing else (pg_hba.conf); fsync off,
since nothing in it outlives the test run. `create_database` gives each test a database of its own.

**Running as root.** PostgreSQL refuses to run as root (``initdb``: "cannot be run as root"). Under
root, ``initdb`` and the server run as the ``postgres`` system account that Debian's ``postgresql``
package creates, and the temporary directory is handed to it: `subprocess.Popen`'s ``user``,
``group`` and ``extra_groups=[]`` switch the real and effective ids and drop root's supplementary
groups in the child between fork and exec (no shell, no PAM session as ``runuser`` or ``su`` open,
no Python code in the child as a ``preexec_fn`` would run). Anyone else runs them as themselves.

**Nothing left running.** The server is a direct child of the process that starts it (not the
daemon ``pg_ctl start`` makes), started through ``setpriv --pdeathsig SIGQUIT``: when the thread
that started it dies, even by SIGKILL (a crashed or killed test run), the kernel sends the server
SIGQUIT, its immediate shutdown, which ends its own children too. `stop` asks for a fast shutdown
(SIGINT), then an immediate one, then kills. The data directory's name starts with `DIR_PREFIX`,
which tests/conftest.py's end-of-run sweep looks for in command lines: a server a run forgot to
stop is reported, killed and fails the run.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from typing_extensions import LiteralString

__all__ = ["DIR_PREFIX", "SETUP_HINT", "PostgresServer", "PostgresUnavailable", "find_bindir"]

DIR_PREFIX = "plait-test-postgres-"
SETUP_HINT = (
    "run the README's test setup: `make test` (it installs Debian's postgresql package when initdb is missing, "
    "with scripts/ensure_postgresql.sh) or `bash scripts/ensure_postgresql.sh` as root"
)
SUPERUSER = "postgres"
_BINARIES = Path("/usr/lib/postgresql")
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",  # a throwaway cluster: nothing to keep through a power cut
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "'16MB'",
    "max_connections": "100",
    "log_min_messages": "warning",
    "timezone": "'UTC'",
}
# Only loopback TCP and the socket in the private directory get in; any other address is refused.
_HBA = "local all all trust\nhost all all 127.0.0.1/32 trust\n"
_BIND_FAILED = "could not create any TCP/IP sockets"


class PostgresUnavailable(RuntimeError):
    """PostgreSQL's server binaries are not on this machine."""


def find_bindir(root: Path = _BINARIES) -> Path:
    """The newest ``<root>/<version>/bin`` (Debian's ``/usr/lib/postgresql/15/bin``) with ``initdb`` and ``postgres``.

    Raises:
        PostgresUnavailable: No version is installed (the message says how to install one).
    """
    found = []
    for bindir in root.glob("*/bin"):
        version = bindir.parent.name
        if version.isdigit() and (bindir / "initdb").is_file() and (bindir / "postgres").is_file():
            found.append((int(version), bindir))
    if not found:
        raise PostgresUnavailable(f"PostgreSQL's server binaries are missing (no {root}/*/bin/initdb): {SETUP_HINT}")
    return max(found)[1]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.strip().splitlines()[-lines:]) or "(empty log)"


def _start_time(pid: int) -> str | None:
    """A process's start time in clock ticks (None: gone, or a zombie: it runs nothing any more)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in (b"Z", b"X") else fields[19].decode()


class PostgresServer:
    """One PostgreSQL server on 127.0.0.1 in a temporary directory, for the tests (see the module docstring).

    Args:
        deadline: Seconds `start` waits for the server to accept connections (and `stop` for it to end).
        bindir: The directory of ``initdb`` and ``postgres`` (None: `find_bindir`).
        settings: Server settings over the defaults here, as postgresql.conf spells them
            (``{"max_connections": "20"}``).

    Attributes:
        port: Its TCP port (0 before `start`).
        directory: The temporary directory: ``data/``, the unix socket, ``server.log`` (None before `start`).
        start_seconds: How long `start` took, initdb included.
    """

    def __init__(
        self, *, deadline: float = 60.0, bindir: Path | None = None, settings: Mapping[str, str] | None = None
    ) -> None:
        self.deadline = deadline
        self.bindir = bindir
        self.settings = {**_SETTINGS, **(settings or {})}
        self.port = 0
        self.directory: Path | None = None
        self.start_seconds = 0.0
        self._process: subprocess.Popen[bytes] | None = None
        self._account: tuple[int, int] | None = None

    # -- addresses -------------------------------------------------------------------------------

    @property
    def dsn(self) -> str:
        """The superuser's DSN for the ``postgres`` database (``postgresql://postgres@127.0.0.1:PORT/postgres``)."""
        return self.dsn_for("postgres")

    def dsn_for(self, database: str) -> str:
        """The superuser's DSN for `database` on this server."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    @property
    def pid(self) -> int | None:
        """The server's (postmaster's) process id while it runs."""
        return None if self._process is None else self._process.pid

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> PostgresServer:
        """Create the cluster and start the server; returns once it accepts connections.

        Raises:
            PostgresUnavailable: The binaries are missing.
            RuntimeError: initdb or the server failed, or it did not get ready within `deadline`
                (the reason quoted from their output).
        """
        if self._process is not None:
            return self
        began = time.monotonic()
        bindir = self.bindir or find_bindir()
        self._account = self._server_account()
        self.directory = Path(tempfile.mkdtemp(prefix=DIR_PREFIX))
        try:
            self._initdb(bindir)
            for _ in range(5):  # another program may take the free port before the server binds it
                self.port = _free_port()
                if self._launch(bindir):
                    break
            else:
                raise RuntimeError(f"PostgreSQL found no free port to bind: {_tail(self._log)}")
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop the server (fast shutdown, then immediate, then SIGKILL) and delete its directory."""
        process, self._process = self._process, None
        if process is not None:
            for sig, grace in ((signal.SIGINT, self.deadline), (signal.SIGQUIT, 10.0), (signal.SIGKILL, None)):
                if process.poll() is not None:
                    break
                process.send_signal(sig)
                try:
                    process.wait(grace)
                except subprocess.TimeoutExpired:
                    continue
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # -- databases -------------------------------------------------------------------------------

    def create_database(self, name: str) -> str:
        """Create an empty database `name` (lower-case letters, digits, ``_``); returns its DSN."""
        self._execute("CREATE DATABASE {}", name)
        return self.dsn_for(name)

    def drop_database(self, name: str) -> None:
        """Drop database `name` if it exists, ending the sessions still connected to it."""
        self._execute("DROP DATABASE IF EXISTS {} WITH (FORCE)", name)

    def processes(self) -> dict[int, str]:
        """The server's running processes: the postmaster and its children, as ``{pid: start time}``."""
        if self._process is None:
            return {}
        postmaster = self._process.pid
        found = {postmaster: _start_time(postmaster)}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", "rb") as fh:
                        parent = fh.read().rsplit(b")", 1)[1].split()[1]
                except (OSError, IndexError):
                    continue
                if int(parent) == postmaster:
                    found[int(entry)] = _start_time(int(entry))
        return {pid: start for pid, start in found.items() if start is not None}

    @staticmethod
    def running(processes: dict[int, str]) -> dict[int, str]:
        """Those of `processes` (from `processes`) still running: same pid, same start time, not a zombie."""
        return {pid: start for pid, start in processes.items() if _start_time(pid) == start}

    # -- internals -------------------------------------------------------------------------------

    @property
    def _log(self) -> Path:
        assert self.directory is not None
        return self.directory / "server.log"

    @staticmethod
    def _server_account() -> tuple[int, int] | None:
        """The ``(uid, gid)`` to run as under root (Debian's ``postgres`` account); None for anyone else."""
        if os.geteuid() != 0:
            return None
        try:
            account = pwd.getpwnam("postgres")
        except KeyError:
            raise PostgresUnavailable(
                f"running as root and there is no 'postgres' account to run PostgreSQL as: {SETUP_HINT}"
            ) from None
        return account.pw_uid, account.pw_gid

    def _spawn(self, argv: list[str], output: int) -> subprocess.Popen[bytes]:
        assert self.directory is not None
        uid, gid = self._account or (None, None)
        env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
        for name in [name for name in env if name.startswith("PG")]:
            del env[name]  # PGDATA, PGPORT, PGHOST... of the caller's shell are not this server's
        return subprocess.Popen(
            argv,
            cwd=self.directory,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            user=uid,
            group=gid,
            extra_groups=None if uid is None else [],
        )

    def _initdb(self, bindir: Path) -> None:
        assert self.directory is not None
        if self._account is not None:
            os.chown(self.directory, *self._account)
        data = self.directory / "data"
        argv = [str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8"]
        argv += ["--locale=C", "--no-sync", "--no-instructions"]
        log = self.directory / "initdb.log"
        with open(log, "wb") as out:
            process = self._spawn(argv, out.fileno())
        try:
            code = process.wait(self.deadline)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise RuntimeError(f"initdb did not finish within {self.deadline:.0f} s: {_tail(log)}") from None
        if code != 0:
            raise RuntimeError(f"initdb failed (exit {code}): {_tail(log)}")
        settings = "".join(f"{name} = {value}\n" for name, value in self.settings.items())
        settings += f"unix_socket_directories = '{self.directory}'\n"
        with open(data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write(settings)
        (data / "pg_hba.conf").write_text(_HBA, "utf-8")

    def _launch(self, bindir: Path) -> bool:
        """Start the server on `port`; True once it is ready, False when the port was taken."""
        assert self.directory is not None
        argv = ["setpriv", "--pdeathsig", "SIGQUIT", "--", str(bindir / "postgres")]
        argv += ["-D", str(self.directory / "data"), "-p", str(self.port)]
        with open(self._log, "wb") as out:
            self._process = self._spawn(argv, out.fileno())
        pid_file = self.directory / "data" / "postmaster.pid"
        deadline = time.monotonic() + self.deadline
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                self._process = None
                log = _tail(self._log)
                if _BIND_FAILED in log:
                    return False
                raise RuntimeError(f"PostgreSQL exited (code {code}) before it was ready: {log}")
            if self._ready(pid_file):
                return True
            time.sleep(0.01)
        raise RuntimeError(f"PostgreSQL was not ready within {self.deadline:.0f} s: {_tail(self._log)}")

    @staticmethod
    def _ready(pid_file: Path) -> bool:
        """Whether the postmaster says it accepts connections (line 8 of postmaster.pid: ``ready``)."""
        try:
            lines = pid_file.read_text("utf-8", errors="replace").splitlines()
        except OSError:
            return False
        return len(lines) >= 8 and lines[7].strip() == "ready"

    def _execute(self, template: LiteralString, name: str) -> None:
        """Run `template` with the database `name` (checked) quoted into it, on the ``postgres`` database."""
        if not _NAME.fullmatch(name):
            raise ValueError(f"database name {name!r}: use 1 to 63 lower-case letters, digits and '_'")
        try:
            import psycopg
            from psycopg import sql
        except ImportError as exc:
            raise RuntimeError(f"psycopg is not installed ({exc}): pip install -e '.[test]'") from exc
        if self._process is None:
            raise RuntimeError("the PostgreSQL server is not running: call start() first")
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL(template).format(sql.Identifier(name)))

    def __repr__(self) -> str:
        state = f"running, pid {self.pid}" if self._process is not None else "stopped"
        return f"PostgresServer(port={self.port}, {state})"
