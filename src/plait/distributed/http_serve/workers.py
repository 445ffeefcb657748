"""``plait serve --workers N``: N server processes sharing one port and one session store, kept running.

The supervisor (`Supervisor`) opens the listening socket on ``host:port`` itself, then starts N
copies of the same ``plait serve`` command. Each inherits the socket (its descriptor, and a pipe
to say it is ready, travel in ``$PLAIT_WORKER_FDS``) and accepts from it: the kernel hands each
new connection to one of the workers that wait. A worker that dies (a crash, ``kill -9``) is
replaced; the connections it held are cut and clients retry them (the official ``openai``
client does by itself), landing on another worker.

Every worker keeps its sessions in one store opened with ``shared=True`` (`--store`: a SQLite
file on this machine, or PostgreSQL), so any turn of a session may land on any worker: each call
reads its session back when another worker changed it (`plait.memory.backend`). Without a store
each worker would hold its own copy of a conversation, so ``--workers`` above 1 needs one. A
turn acknowledged to a client is stored before the answer leaves (the turn's commit point); a
turn cut by a worker's death is left out when the session is read back.

SIGTERM or Ctrl-C stops the workers (each finishes or cancels what it runs, as one server does),
then the supervisor.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ...exceptions import UserError
from .access import check_exposure

if TYPE_CHECKING:
    from ...agents.module import AgentModule
    from ...memory.backend import SessionBackend
    from .requests import ServerLimits

__all__ = [
    "STORE_ENV",
    "WORKER_ENV",
    "Listening",
    "Supervisor",
    "open_store",
    "serve",
    "store_setting",
    "supervise",
    "worker_socket",
]

logger = logging.getLogger(__name__)

WORKER_ENV = "PLAIT_WORKER_FDS"
"""Where a worker finds the shared socket's descriptor and its ready pipe's (``"LISTEN,READY"``)."""

STORE_ENV = "PLAIT_STORE"
"""The session store when ``--store`` is not given (where a database password may be kept)."""

START_S = 600.0
"""How long the workers may take to start (an embedded model loads first)."""

STOP_S = 10.0
"""How long a worker may take to stop after SIGTERM before it is killed."""

_RESTARTS = 5
"""Restarts per worker within `_RESTART_WINDOW_S` before the supervisor gives up."""
_RESTART_WINDOW_S = 60.0


@dataclass
class Listening:
    """A worker's share of the supervisor's socket.

    Attributes:
        sock: The listening socket every worker accepts from.
        ready_fd: The pipe this worker writes its pid to once it serves.
    """

    sock: socket.socket
    ready_fd: int

    def ready(self) -> None:
        """Tell the supervisor this worker serves."""
        os.write(self.ready_fd, f"{os.getpid()}\n".encode())
        os.close(self.ready_fd)


def worker_socket(environ: dict[str, str] | None = None) -> Listening | None:
    """In a worker of `Supervisor`: the shared socket (taken out of the environment); None elsewhere."""
    env = os.environ if environ is None else environ
    value = env.pop(WORKER_ENV, None)
    if not value:
        return None
    listen_fd, ready_fd = (int(part) for part in value.split(","))
    return Listening(socket.socket(fileno=listen_fd), ready_fd)


def open_store(where: str, *, shared: bool = False) -> SessionBackend:
    """The session store `where` names: a ``postgresql://`` URL (or ``postgres://``), else a SQLite file.

    Raises:
        MissingDependencyError: A PostgreSQL URL without the ``postgres`` extra.
        SessionStoreError: The store could not be opened (it is named, never its password).
    """
    if urlsplit(where).scheme in ("postgresql", "postgres"):
        from ...memory.postgres_store import PostgresSessionStore

        return PostgresSessionStore(where, shared=shared)
    from ...memory.session_store import SessionStore

    return SessionStore(where, shared=shared)


def store_setting(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> str | None:
    """The store ``plait serve`` keeps sessions in: ``--store``, else ``$PLAIT_STORE``.

    Raises:
        UserError: A password in ``--store`` (every user of the machine can read a command line).
    """
    env = os.environ if environ is None else environ
    given = getattr(args, "store", None)
    if given:
        if urlsplit(given).password:
            raise UserError(
                f"--store: keep the database password out of the command line (anyone on the machine can read it): "
                f"put the URL in ${STORE_ENV}, or the password in $PGPASSWORD or ~/.pgpass"
            )
        return str(given)
    return env.get(STORE_ENV) or None


def serve(
    agent: AgentModule,
    args: argparse.Namespace,
    token: str | dict[str, str] | None,
    limits: ServerLimits,
) -> None:
    """``plait serve``'s one server process, or one worker of `Supervisor` (see the module docstring)."""
    from .app import AgentAPIServer
    from .openai_route import DEFAULT_MODEL_NAME

    where = store_setting(args)
    if where:
        open_store(where, shared=args.workers > 1).attach(agent)
    listening = worker_socket()
    if listening is not None:  # which worker said what
        for handler in logging.getLogger().handlers:
            handler.setFormatter(logging.Formatter(f"%(levelname)s [worker {os.getpid()}] %(name)s: %(message)s"))
    server = AgentAPIServer(
        agent,
        args.host,
        args.port,
        token=token,
        limits=limits,
        insecure=args.insecure,
        sock=None if listening is None else listening.sock,
        a2a=bool(getattr(args, "a2a", False)),
        model_name=getattr(args, "model_name", None) or DEFAULT_MODEL_NAME,
    )
    server.serve_forever(on_ready=None if listening is None else listening.ready)


class Supervisor:
    """Runs `command` as `workers` processes sharing one listening socket (see the module docstring).

    Args:
        command: The worker's command line (``python -m plait.cli serve ...``).
        host: The address to listen on.
        port: The port (0: a free one; see `port` once started).
        workers: How many processes.
        has_token: Whether the workers ask for a token (an address beyond loopback needs one).
        insecure: Serve an address beyond loopback without a token.

    Raises:
        UserError: Fewer than 2 workers, or an exposed address without a token.
    """

    def __init__(
        self,
        command: Sequence[str],
        host: str,
        port: int,
        workers: int,
        *,
        has_token: bool,
        insecure: bool = False,
    ) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 2:
            raise UserError(f"--workers must be 2 or more for a supervisor, got {workers!r}")
        check_exposure(host, has_token=has_token, insecure=insecure, what="use the agent")
        self.command = list(command)
        self.host = host
        self.workers = workers
        self.sock = socket.create_server((host, port), backlog=1024)
        self.sock.set_inheritable(True)
        self.port = int(self.sock.getsockname()[1])
        self._ready_r, self._ready_w = os.pipe()
        os.set_blocking(self._ready_r, False)
        self.processes: list[subprocess.Popen[bytes]] = []
        self.restarts: list[float] = []
        self._stopping = False
        self._closed = False

    def _start(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env[WORKER_ENV] = f"{self.sock.fileno()},{self._ready_w}"
        return subprocess.Popen(self.command, env=env, pass_fds=(self.sock.fileno(), self._ready_w))

    def _ready_count(self, seen: set[int]) -> None:
        try:
            data = os.read(self._ready_r, 65536)
        except BlockingIOError:
            return
        seen.update(int(line) for line in data.decode().split())

    def start(self) -> None:
        """Start the workers and wait until each serves.

        Raises:
            UserError: A worker exited before it served (its settings cannot work; it said why
                on stderr), or the workers did not start within `START_S`.
        """
        self.processes = [self._start() for _ in range(self.workers)]
        ready: set[int] = set()
        deadline = time.monotonic() + START_S
        while len(ready & {p.pid for p in self.processes}) < self.workers:
            for process in self.processes:
                if process.poll() is not None:
                    self.stop()
                    raise UserError(f"a worker exited before it served (exit {process.returncode})")
            if time.monotonic() > deadline:
                self.stop()
                raise UserError(f"the workers did not start within {START_S:.0f} s")
            self._ready_count(ready)
            time.sleep(0.05)

    def watch(self) -> int:
        """Replace workers that die until asked to stop (SIGTERM, SIGINT); the exit status."""
        while not self._stopping:
            for index, process in enumerate(self.processes):
                if process.poll() is None or self._stopping:
                    continue
                now = time.monotonic()
                self.restarts = [t for t in self.restarts if now - t < _RESTART_WINDOW_S] + [now]
                if len(self.restarts) > _RESTARTS * self.workers:
                    logger.error("workers keep dying (%d restarts in a minute): stopping", len(self.restarts))
                    self.stop()
                    return 1
                sys.stderr.write(f"plait: worker {process.pid} exited ({_how(process.returncode)}); starting another\n")
                self.processes[index] = self._start()
            self._ready_count(set())
            time.sleep(0.1)
        return 0

    def stop(self) -> None:
        """Ask every worker to stop (SIGTERM), kill those still running after `STOP_S`, close the socket."""
        self._stopping = True
        if self._closed:
            return
        self._closed = True
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_S
        for process in self.processes:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.sock.close()
        for fd in (self._ready_r, self._ready_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def run(self) -> int:
        """Start, announce, and watch the workers until SIGTERM or Ctrl-C; the exit status."""

        def ask_stop(signum: int, frame: object) -> None:
            self._stopping = True

        previous = {signum: signal.signal(signum, ask_stop) for signum in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.start()
            sys.stdout.write(f"plait agent server running on http://{self.host}:{self.port} ({self.workers} workers)\n")
            sys.stdout.flush()
            status = self.watch()
        finally:
            self.stop()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return status


def _how(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"signal {-returncode}"
    return f"exit {returncode}"


def supervise(
    args: argparse.Namespace,
    argv: Sequence[str],
    token: str | Mapping[str, str] | None,
    limits: ServerLimits,
    build: Callable[[], object],
) -> int:
    """``plait serve --workers N`` (N > 1) or ``--ray``: check the settings, then serve; the exit status.

    Args:
        args: ``plait serve``'s settings.
        argv: Its command line (each worker runs it again).
        token: The token(s) the workers ask for.
        limits: The server's limits.
        build: Builds the agent (in each Ray Serve replica).

    Raises:
        UserError: No session store for several workers, or settings they cannot serve with.
    """
    store = store_setting(args)
    if args.workers > 1 and not store:
        raise UserError(
            "--workers needs --store (a SQLite file or a postgresql:// URL; or $PLAIT_STORE): "
            "each turn of a session may land on any worker, and only a shared store holds the whole conversation"
        )
    if args.ray:
        from .ray_deployment import run_deployment

        run_deployment(
            build,
            replicas=args.workers,
            store=store,
            host=args.host,
            port=args.port,
            token=token,
            limits=limits,
            insecure=args.insecure,
            a2a=bool(getattr(args, "a2a", False)),
            model_name=getattr(args, "model_name", None),
        )
        return 0
    command = [sys.executable, "-m", "plait.cli", *argv]
    return Supervisor(command, args.host, args.port, args.workers, has_token=bool(token), insecure=args.insecure).run()
