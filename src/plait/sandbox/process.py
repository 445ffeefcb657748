"""The parent side of the fork server: start it, spawn confined children, release them.

One zygote serves the whole plait process (`get_zygote`); it is started on first use and
stopped at interpreter exit, and its children die with it. See `plait.sandbox._zygote`
for the child side and the wire format.
"""

from __future__ import annotations

import atexit
import errno
import itertools
import json
import logging
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypedDict, TypeVar

from ..exceptions import SandboxError
from . import _zygote, _zygote_fs, _zygote_os
from ._io import Op, Wait
from .limits import Limits

__all__ = ["Child", "FrameReader", "SandboxError", "Zygote", "get_zygote", "shutdown_zygote", "spawn_op"]

ZYGOTE_SCRIPT = _zygote.__file__
UID_BASE = int(os.environ.get("PLAIT_SANDBOX_UID_BASE", "990000"))
UID_COUNT = int(os.environ.get("PLAIT_SANDBOX_UID_COUNT", "2048"))
logger = logging.getLogger("plait.sandbox")


F = TypeVar("F")


class _HelloFrame(TypedDict, total=False):
    """A child's first frame: its `plait.sandbox._zygote_os.Hello`, or why it could not start."""

    pid: int
    uid: int
    network_isolated: bool
    memory_cap: str
    isolation: _zygote_fs.Isolation
    isolation_error: str | None
    error: str


class FrameReader(Generic[F]):
    """Collects length-prefixed JSON frames (of type `F`) from non-blocking reads."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.eof = False

    def read_from(self, sock: socket.socket) -> list[F]:
        """Read what is available from `sock`; return the complete frames."""
        while True:
            try:
                chunk = sock.recv(1 << 20, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self.eof = True
                break
            if not chunk:
                self.eof = True
                break
            self._buf += chunk
        frames: list[F] = []
        size = _zygote_os.HEADER.size
        while len(self._buf) >= size:
            (length,) = _zygote_os.HEADER.unpack_from(self._buf)
            if len(self._buf) < size + length:
                break
            frames.append(json.loads(bytes(self._buf[size : size + length])))
            del self._buf[: size + length]
        return frames


class Zygote:
    """A running fork server and the channel to it."""

    def __init__(self, preload_kernel: bool = False) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config: _zygote.ZygoteConfig = {
            "uid_base": UID_BASE,
            "uid_count": UID_COUNT,
            "lock_dir": os.path.join(tempfile.gettempdir(), "plait-sandbox-uids"),
            "preload_kernel": preload_kernel,
        }
        debug = os.environ.get("PLAIT_SANDBOX_DEBUG")
        self._proc = subprocess.Popen(
            [sys.executable, "-u", ZYGOTE_SCRIPT, str(child.fileno()), json.dumps(config)],
            pass_fds=[child.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=None if debug else subprocess.DEVNULL,
            stderr=None if debug else subprocess.DEVNULL,
            start_new_session=True,
            cwd="/",
            env=zygote_env(),
        )
        child.close()
        self._sock = parent
        self._lock = threading.Lock()
        self._exits: dict[int, int] = {}
        self.pid = self._proc.pid
        self.owner = os.getpid()
        self.closed = False

    def send(self, message: Mapping[str, object], fds: Sequence[int] = ()) -> None:
        """Send one request (with file descriptors for the child)."""
        data = json.dumps(message).encode()
        with self._lock:
            if self.closed:
                raise SandboxError("the sandbox has been shut down")
            try:
                if fds:
                    socket.send_fds(self._sock, [data], list(fds))
                else:
                    self._sock.send(data)
            except OSError as exc:
                raise SandboxError(f"the sandbox fork server is gone: {exc}") from exc

    def _poll(self) -> None:
        with self._lock:
            while not self.closed:
                try:
                    data = self._sock.recv(1 << 16, socket.MSG_DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    return
                if not data:
                    return
                msg = json.loads(data)
                if msg.get("op") == "exit":
                    self._exits[int(msg["pid"])] = int(msg["status"])

    def exit_status(self, pid: int) -> int | None:
        """The exit status the zygote reported for `pid` (negative: killed by that signal)."""
        self._poll()
        with self._lock:
            return self._exits.pop(pid, None)

    @property
    def alive(self) -> bool:
        """Whether the fork server still runs."""
        return not self.closed and self._proc.poll() is None

    def release(self, pid: int, remove: str | None = None) -> None:
        """Kill the child `pid` and everything it started, free its uid, remove `remove` (asynchronously)."""
        try:
            self.send({"op": "release", "pid": pid, "remove": remove})
        except SandboxError:
            pass

    def preload_kernel(self) -> None:
        """Ask the zygote to import ipykernel now."""
        self.send({"op": "preload", "kind": "kernel"})

    def close(self, timeout: float = 10.0) -> None:
        """Stop the fork server; it kills every child and what they started first."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


_ZYGOTE: Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()


def get_zygote() -> Zygote:
    """The process-wide fork server, started on first use (and again after a fork or a crash)."""
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        zygote = _ZYGOTE
        if zygote is None or zygote.owner != os.getpid() or not zygote.alive:
            if zygote is not None and zygote.owner == os.getpid():
                zygote.close(timeout=2)
            zygote = _ZYGOTE = Zygote()
        return zygote


def shutdown_zygote() -> None:
    """Stop the process-wide fork server (and every sandboxed process); used at exit."""
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        zygote, _ZYGOTE = _ZYGOTE, None
    if zygote is not None and zygote.owner == os.getpid():
        zygote.close()


atexit.register(shutdown_zygote)


def _pidfd_open(pid: int) -> int:
    try:
        return os.pidfd_open(pid)
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            raise SandboxError(f"process {pid} exited before it could be watched") from exc
        raise


@dataclass(eq=False)
class Child:
    """A confined process the zygote started.

    Attributes:
        pid: Its process id (also its process group and session id).
        uid: The uid it runs under (private to it when plait is root).
        dir: Its private working directory.
        network_isolated: Whether it runs in an empty network namespace.
        memory_cap: How ``memory_bytes`` holds: ``'session'`` (one memory cgroup for all its
            processes), ``'process'`` (``RLIMIT_AS`` of each process) or ``'none'``.
        isolation: What holds of its filesystem isolation (``private_tmp``, ``host_hidden``,
            ``private_proc``, ``disk_quota``; see `plait.sandbox.sandbox_capabilities`).
    """

    zygote: Zygote
    kind: str
    pid: int
    uid: int
    dir: str
    network_isolated: bool
    pidfd: int
    channel: socket.socket
    output: int | None = None
    memory_cap: str = "none"
    isolation: _zygote_fs.Isolation = field(default_factory=_zygote_fs.NO_ISOLATION.copy)
    released: bool = False
    info: dict[str, object] = field(default_factory=dict)

    def dead(self) -> bool:
        """Whether the process has exited."""
        if self.released:
            return True
        return bool(select.select([self.pidfd], [], [], 0)[0])

    def interrupt(self) -> None:
        """Send SIGINT (KeyboardInterrupt in Python code)."""
        if not self.released:
            try:  # through the pidfd: never a recycled pid
                signal.pidfd_send_signal(self.pidfd, signal.SIGINT)
            except OSError:
                pass

    def exit_status(self) -> int | None:
        """The exit status, when known (negative: the signal that killed it)."""
        return self.zygote.exit_status(self.pid)

    def release(self, keep_dir: bool = False) -> None:
        """Kill it and everything it started; its uid (and directory) are freed. Idempotent.

        A size-capped working directory (``isolation['disk_quota']``) is unmounted here, before
        this returns, so the directory can be removed at once; with `keep_dir` it stays
        mounted (its files readable) until the fork server stops.
        """
        if self.released:
            return
        self.released = True
        if self.isolation["disk_quota"] and not keep_dir:
            _zygote_fs.unmount(self.dir)  # detached: freed when the session's processes are gone
        self.zygote.release(self.pid, None if keep_dir else self.dir)
        try:
            os.close(self.pidfd)
        except OSError:
            pass
        self.channel.close()
        if self.output is not None:
            try:
                os.close(self.output)
            except OSError:
                pass


_COUNTER = itertools.count(1)


ZYGOTE_ENV_KEYS = (
    "PATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "LD_LIBRARY_PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "PLAIT_SANDBOX_DEBUG",
)
"""What the zygote inherits of plait's environment: what Python needs to start, nothing else.

Sandboxed processes fork from the zygote, so the environment block it was started with is
what their ``/proc/self/environ`` shows whatever they later set; API keys and tokens of the
parent must never be in it.
"""


def zygote_env() -> dict[str, str]:
    """The zygote's environment: the `ZYGOTE_ENV_KEYS` of ours that are set."""
    return {key: os.environ[key] for key in ZYGOTE_ENV_KEYS if key in os.environ}


def child_env(directory: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a sandboxed process starts with (nothing of plait's own environment leaks)."""
    bindir = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    env = {
        "PATH": f"{bindir}:{path}" if bindir not in path.split(":") else path,
        "HOME": directory,
        "TMPDIR": directory,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLCONFIGDIR": os.path.join(directory, ".matplotlib"),
        "IPYTHONDIR": os.path.join(directory, ".ipython"),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
    }
    env.update(extra or {})
    return env


def new_session_dir(root: str, prefix: str) -> str:
    """A fresh directory name under `root` (the child creates it with the right owner)."""
    return os.path.join(root, f"{prefix}{next(_COUNTER)}-{secrets.token_hex(3)}")


_WARNED: set[str] = set()


def _report_isolation(hello: _HelloFrame) -> None:
    """Log, once per process and reason, that a root-mode session lacks part of its isolation."""
    why = hello.get("isolation_error")
    if why and why not in _WARNED:
        _WARNED.add(why)
        missing = [name for name, held in hello.get("isolation", _zygote_fs.NO_ISOLATION).items() if not held]
        logger.warning(
            "sandboxed sessions lack %s on this machine (%s); sandbox_capabilities() says what holds",
            ", ".join(missing) or "part of their isolation",
            why,
        )


def spawn_op(
    kind: str,
    directory: str,
    limits: Limits,
    extra: Mapping[str, object] | None = None,
    env: dict[str, str] | None = None,
    zygote: Zygote | None = None,
    readable: Sequence[str] = (),
) -> Op[Child]:
    """Start a confined child (``kind``: ``'worker'`` or ``'kernel'``) and wait for its hello.

    `readable` are host paths the child may read (as root it sees nothing else of the host
    but what the interpreter needs).

    Raises:
        SandboxError: It could not be started within ``limits.start_timeout``.
    """
    zygote = zygote or get_zygote()
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    out_r = out_w = None
    fds = [child.fileno()]
    if kind == "worker":
        out_r, out_w = os.pipe()
        os.set_blocking(out_r, False)
        fds.append(out_w)
    spec = {
        "dir": directory,
        "limits": limits.for_child(),
        "env": child_env(directory, env),
        "parent_uid": os.getuid(),
        "kill_background": limits.kill_background,
        "readable": [os.path.abspath(path) for path in readable],
        **(extra or {}),
    }
    ok = False
    try:
        try:
            zygote.send({"op": "spawn", "kind": kind, "spec": spec}, fds)
        finally:
            child.close()
            if out_w is not None:
                os.close(out_w)
        reader = FrameReader[_HelloFrame]()
        loop = _deadline(limits.start_timeout)
        while True:
            remaining = loop()
            if remaining <= 0:
                raise SandboxError(f"the sandboxed {kind} did not start within {limits.start_timeout} s")
            yield Wait((parent.fileno(),), remaining)
            frames = reader.read_from(parent)
            if frames:
                hello = frames[0]
                if "error" in hello:
                    if "pid" in hello:  # free what the zygote holds for it (uid, cgroup, working directory)
                        _zygote_fs.unmount(directory)
                        zygote.release(int(hello["pid"]), directory)
                    raise SandboxError(f"the sandboxed {kind} failed to start: {hello['error']}")
                _report_isolation(hello)
                pid = int(hello["pid"])
                result = Child(
                    zygote=zygote,
                    kind=kind,
                    pid=pid,
                    uid=int(hello["uid"]),
                    dir=directory,
                    network_isolated=bool(hello.get("network_isolated")),
                    pidfd=_pidfd_open(pid),
                    channel=parent,
                    output=out_r,
                    memory_cap=str(hello.get("memory_cap", "none")),
                    isolation=hello.get("isolation", _zygote_fs.NO_ISOLATION),
                )
                ok = True
                return result
            if reader.eof:
                raise SandboxError(f"the sandboxed {kind} exited while starting")
    finally:
        if not ok:
            parent.close()
            if out_r is not None:
                os.close(out_r)


def _deadline(seconds: float) -> Callable[[], float]:
    import time

    end = time.monotonic() + seconds
    return lambda: end - time.monotonic()
