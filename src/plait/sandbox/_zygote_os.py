"""OS primitives of the sandbox's child side: framing, processes of a uid, exposure, confinement.

Standard library only, like the rest of the child side (see `_zygote`): the zygote script
loads this file as a top-level module, and plait imports it as ``plait.sandbox._zygote_os``
(the parent uses the frame format).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import socket
import struct
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING or __package__:
    from . import _cgroup as zcg
else:
    import _cgroup as zcg

HEADER = struct.Struct("!I")
MAX_RECORD = 1 << 20

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18


# -- the wire format (JSON) ------------------------------------------------------------------------
class ChildLimits(TypedDict, total=False):
    """The `plait.sandbox.limits.Limits` fields a child reads (``Limits.for_child`` sends them all)."""

    network: bool
    cpu_seconds: float | None
    cpu_seconds_total: float | None
    memory_bytes: int | None
    max_processes: int | None
    max_output_bytes: int
    max_file_bytes: int | None
    max_open_files: int | None


class Hello(TypedDict):
    """A started child's first frame (`confine` returns it)."""

    pid: int
    uid: int
    network_isolated: bool
    memory_cap: str  # 'session' (a cgroup holds all its processes), 'process' (RLIMIT_AS each) or 'none'


class ChildSpec(TypedDict, total=False):
    """How to start a child: what the parent sends (``spawn_op``), what the zygote adds, the hello."""

    dir: str
    limits: ChildLimits
    env: dict[str, str]
    parent_uid: int
    kill_background: bool
    connection: dict[str, str | int]  # a kernel's Jupyter connection info
    uid: int
    gid: int
    switch_user: bool
    expose: list[list[str]]
    cgroup: str | None  # the session's memory cgroup, made by the zygote
    hello: Hello


class ScriptAnswer(TypedDict, total=False):
    """Where a ``'script'`` request reads its answer (the first one set wins)."""

    from_stdout: bool
    symbol: str | None
    expr: str | None


class WorkerRequest(TypedDict, total=False):
    """A request to a worker: ``{'op': 'reset'}`` or ``{'op': 'exec', 'code', 'mode', 'answer'}``."""

    op: str
    code: str
    mode: str
    answer: ScriptAnswer


class WorkerReply(TypedDict, total=False):
    """A worker's answer to a request (or a child's start-up failure, ``{'error': ...}``)."""

    ok: bool
    result: str | None
    error: str | None
    interrupted: bool
    ename: str


_LIBC: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def prctl(option: int, value: int) -> bool:
    """Set a process attribute with the prctl system call; False when it failed."""
    return bool(_libc().prctl(option, value, 0, 0, 0) == 0)


# -- framing on stream sockets (worker channel) ----------------------------------------------
def send_frame(sock: socket.socket, obj: Mapping[str, object]) -> None:
    """Send one length-prefixed JSON frame (blocking)."""
    data = json.dumps(obj).encode()
    sock.sendall(HEADER.pack(len(data)) + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket) -> WorkerRequest | None:
    """Receive one request frame (blocking); None at end of stream."""
    head = _recv_exact(sock, HEADER.size)
    if head is None:
        return None
    body = _recv_exact(sock, HEADER.unpack(head)[0])
    return None if body is None else json.loads(body)


# -- processes of a uid ------------------------------------------------------------------------
def _proc_files(name: str, size: int = -1) -> Iterator[tuple[int, bytes]]:
    """``(pid, the first `size` bytes of /proc/<pid>/<name>)`` for every process that can be read."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/{name}", "rb") as fh:
                yield int(entry), fh.read(size)
        except OSError:
            continue


def pids_of_uid(uid: int) -> list[int]:
    """Live (non-zombie) processes whose real uid is `uid`."""
    found = []
    for pid, text in _proc_files("status", 2048):
        state = uid_line = b""
        for line in text.split(b"\n"):
            if line.startswith(b"State:"):
                state = line
            elif line.startswith(b"Uid:"):
                uid_line = line
                break
        parts = uid_line.split()
        if len(parts) > 1 and int(parts[1]) == uid and b"Z" not in state.split()[1:2]:
            found.append(pid)
    return found


def pids_of_session(sid: int) -> list[int]:
    """Live processes whose session id is `sid` (used when no private uid is available)."""
    found = []
    for pid, stat in _proc_files("stat"):
        fields = stat.rsplit(b")", 1)[1].split() if b")" in stat else []
        if len(fields) > 3 and fields[0] != b"Z" and int(fields[3]) == sid:
            found.append(pid)
    return found


def sweep_uid(uid: int, attempts: int = 200) -> bool:
    """Kill every process of `uid` (called as root); True when none is left."""
    for _ in range(attempts):
        if not pids_of_uid(uid):
            return True
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the forked sweeper
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.002)
    return not pids_of_uid(uid)


def sweep_session(sid: int, attempts: int = 50) -> bool:
    """Kill the processes of session `sid` (no private uid: best effort)."""
    for _ in range(attempts):
        pids = pids_of_session(sid)
        if not pids:
            return True
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.002)
    return not pids_of_session(sid)


# -- making the interpreter readable to an unprivileged uid -----------------------------------
def exposure_plan(paths: list[str]) -> list[list[str]]:
    """``[[dir, child], ...]``: directories others cannot traverse on the way to `paths`.

    A Python installed under ``/root`` (mode 0700) cannot import its standard library once
    the process has switched to an unprivileged uid. The child hides each such directory
    behind an empty tmpfs in its own mount namespace and bind-mounts back only the entries
    on the way to the interpreter's files, so the code can import them and sees nothing
    else there.
    """
    plan: set[tuple[str, str]] = set()
    for path in paths:
        real = os.path.realpath(path)
        if not os.path.exists(real):
            continue
        parts = [p for p in real.split("/") if p]
        for depth in range(len(parts) - 1 + 1):
            ancestor = "/" + "/".join(parts[:depth])
            if depth >= len(parts):
                break
            try:
                mode = os.stat(ancestor).st_mode
            except OSError:
                break
            if not mode & 0o001:
                plan.add((ancestor, parts[depth]))
    return [list(item) for item in sorted(plan, key=lambda item: (item[0].count("/"), item))]


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    def enc(value: str | None) -> bytes | None:
        return None if value is None else value.encode()

    if _libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def expose(plan: list[list[str]]) -> None:
    """Apply an `exposure_plan` in a new mount namespace (as root, before dropping privileges)."""
    if not plan:
        return
    if _libc().unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    handles = []  # opened inside the new namespace, before anything is hidden
    for directory, name in plan:
        path = os.path.join(directory, name)
        handles.append((directory, name, os.open(path, os.O_PATH), os.path.isdir(path)))
    mounted: set[str] = set()
    for directory, name, fd, is_dir in handles:
        if directory not in mounted:
            _mount("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
            mounted.add(directory)
        target = os.path.join(directory, name)
        if is_dir:
            os.makedirs(target, exist_ok=True)
        else:
            open(target, "a").close()
        _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC, None)
    for _, _, fd, _ in handles:
        os.close(fd)


# -- confinement -------------------------------------------------------------------------------
def _set_limit(kind: int, soft: float | None, hard: float | None = None) -> None:
    inf = resource.RLIM_INFINITY
    s = inf if soft is None else int(soft)
    h = inf if hard is None else max(int(hard), s if s != inf else 0)
    if hard is None and soft is not None:
        h = s
    try:
        resource.setrlimit(kind, (s, h))
    except (ValueError, OSError):
        pass


def set_cpu_limit(seconds: float, total: float | None) -> None:
    """Allow `seconds` more CPU time from now (SIGXCPU), never more than `total` (SIGKILL)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime + seconds + 1)
    hard = resource.RLIM_INFINITY if total is None else max(int(total), soft)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ValueError, OSError):
        hard_now = resource.getrlimit(resource.RLIMIT_CPU)[1]  # it cannot be raised again: stay under it
        capped = soft if hard_now == resource.RLIM_INFINITY else min(soft, hard_now)
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (capped, hard_now))
        except (ValueError, OSError):
            pass


def confine(spec: ChildSpec) -> Hello:
    """Confine the current (freshly forked) process as `spec` says; return facts for the hello."""
    os.setsid()
    limits = spec["limits"]
    uid, gid = spec["uid"], spec["gid"]
    directory = spec["dir"]
    isolated_net = False
    if not limits.get("network", True):
        isolated_net = _libc().unshare(CLONE_NEWNET) == 0
    os.makedirs(directory, mode=0o700, exist_ok=True)
    if spec["switch_user"]:
        expose(spec.get("expose") or [])
        os.chown(directory, uid, gid)
    os.chmod(directory, 0o700)
    _set_limit(resource.RLIMIT_CORE, 0)
    memory_cap = "none"
    if memory := limits.get("memory_bytes"):
        _set_limit(resource.RLIMIT_AS, memory)
        cgroup = spec.get("cgroup")
        memory_cap = "session" if cgroup and zcg.join(cgroup) else "process"
    if cpu := limits.get("cpu_seconds"):
        set_cpu_limit(cpu, limits.get("cpu_seconds_total"))
    if file_bytes := limits.get("max_file_bytes"):
        _set_limit(resource.RLIMIT_FSIZE, file_bytes)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if open_files := limits.get("max_open_files"):
        _set_limit(resource.RLIMIT_NOFILE, open_files)
    nproc = limits.get("max_processes")
    if nproc:
        if not spec["switch_user"]:  # RLIMIT_NPROC counts every process of the uid: leave room for ours
            nproc += len(pids_of_uid(os.getuid())) + 16
        _set_limit(resource.RLIMIT_NPROC, nproc)
    if spec["switch_user"]:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        prctl(PR_SET_DUMPABLE, 1)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.umask(0o077)
    os.chdir(directory)
    os.environ.clear()
    os.environ.update(spec["env"])
    return {"pid": os.getpid(), "uid": os.getuid(), "network_isolated": isolated_net, "memory_cap": memory_cap}
