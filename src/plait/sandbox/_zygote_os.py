"""OS primitives of the sandbox's child side: framing, processes of a uid, confinement.

Standard library only, like the rest of the child side (see `_zygote`): the zygote script
loads this file as a top-level module, and plait imports it as ``plait.sandbox._zygote_os``
(the parent uses the frame format).
"""

from __future__ import annotations

import errno
import json
import math
import os
import resource
import signal
import socket
import struct
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING or __package__:
    from . import _cgroup as zcg, _zygote_fs as zfs
else:
    import _cgroup as zcg
    import _zygote_fs as zfs

HEADER = struct.Struct("!I")
MAX_RECORD = 1 << 20

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNET = 0x40000000


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
    max_disk_bytes: int | None


class Hello(TypedDict):
    """A started child's first frame (`confine` returns it)."""

    pid: int
    uid: int
    network_isolated: bool
    memory_cap: str  # 'session' (a cgroup holds all its processes), 'process' (RLIMIT_AS each) or 'none'
    isolation: zfs.Isolation
    isolation_error: str | None  # why part of the isolation did not hold (as root)


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
    readable: list[str]  # host paths the session may read (a tool's shared files)
    view: zfs.View  # what the session sees of the host (as root), computed once by the zygote
    stage: str  # where the child builds its root (`zfs.prepare_stage`)
    expose: list[list[str]]  # the fallback when a root of its own cannot be built
    work_mounted: bool  # the zygote mounted a tmpfs of max_disk_bytes on ``dir``
    cgroup: str | None  # the session's memory cgroup, made by the zygote
    space_note: str  # what a full filesystem means here (added to ENOSPC errors)
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


def prctl(option: int, value: int) -> bool:
    """Set a process attribute with the prctl system call; False when it failed."""
    return bool(zfs.libc().prctl(option, value, 0, 0, 0) == 0)


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


def arm_cpu(limits: ChildLimits) -> None:
    """Set the CPU limits for the next call (`set_cpu_limit`), if there are any."""
    seconds, total = limits.get("cpu_seconds"), limits.get("cpu_seconds_total")
    if seconds or total:
        set_cpu_limit(seconds, total)


def set_cpu_limit(seconds: float | None, total: float | None) -> None:
    """Allow `seconds` more CPU time from now (SIGXCPU), never more than `total` in all (SIGKILL)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    inf = resource.RLIM_INFINITY
    soft = inf if seconds is None else math.ceil(usage.ru_utime + usage.ru_stime + seconds)
    hard = inf if total is None else math.ceil(total)
    if hard != inf:
        soft = hard if soft == inf else min(soft, hard)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ValueError, OSError):
        hard_now = resource.getrlimit(resource.RLIMIT_CPU)[1]  # it cannot be raised again: stay under it
        capped = soft if hard_now == resource.RLIM_INFINITY else min(soft, hard_now)
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (capped, hard_now))
        except (ValueError, OSError):
            pass


def _no_space_note(limits: ChildLimits, isolation: zfs.Isolation) -> str:
    """What a full filesystem means in this session: which caps there are (for `explain_no_space`)."""
    parts = []
    if isolation["disk_quota"]:
        quota = _size(limits.get("max_disk_bytes"))
        parts.append(f"working directory holds at most {quota} (Limits.max_disk_bytes)")
    if isolation["private_tmp"]:
        scratch = _size(zfs.scratch_bytes(limits.get("memory_bytes")))
        parts.append(f"/tmp, /var/tmp and /dev/shm hold at most {scratch} together (half of Limits.memory_bytes)")
    return "this session's " + "; its ".join(parts) if parts else ""


def _size(n: int | None) -> str:
    if n is None:
        return "what the machine has"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} bytes"


def confine(spec: ChildSpec) -> Hello:
    """Confine the current (freshly forked) process as `spec` says; return facts for the hello."""
    os.setsid()
    limits = spec["limits"]
    uid, gid = spec["uid"], spec["gid"]
    directory = spec["dir"]
    isolated_net = False
    if not limits.get("network", True):
        isolated_net = zfs.libc().unshare(CLONE_NEWNET) == 0
    os.makedirs(directory, mode=0o700, exist_ok=True)
    memory_cap = "none"
    if memory := limits.get("memory_bytes"):
        _set_limit(resource.RLIMIT_AS, memory)
        cgroup = spec.get("cgroup")  # joined before the root changes: /sys/fs/cgroup is not in the session's view
        memory_cap = "session" if cgroup and zcg.join(cgroup) else "process"
    isolation, why = zfs.NO_ISOLATION, None
    if spec["switch_user"]:
        scratch = zfs.scratch_bytes(memory)
        isolation, why = zfs.isolate(
            spec["stage"], spec["view"], directory, spec.get("readable", []), scratch, spec.get("work_mounted", False)
        )
        if not isolation["host_hidden"]:
            zfs.expose(spec.get("expose") or [])
        os.chown(directory, uid, gid)
    spec["space_note"] = _no_space_note(limits, isolation)
    os.chmod(directory, 0o700)
    _set_limit(resource.RLIMIT_CORE, 0)
    arm_cpu(limits)
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
    return {
        "pid": os.getpid(),
        "uid": os.getuid(),
        "network_isolated": isolated_net,
        "memory_cap": memory_cap,
        "isolation": isolation,
        "isolation_error": why,
    }


def explain_no_space(exc: BaseException | None, note: str) -> None:
    """Say what a full filesystem means in this session, in an ``ENOSPC`` error (and those it caused)."""
    seen = 0
    while exc is not None and note and seen < 8:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT) and note not in str(exc.strerror):
            exc.strerror = f"{exc.strerror} ({note})"
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
