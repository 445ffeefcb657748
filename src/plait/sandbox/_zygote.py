"""The child side of the sandbox: the fork server ("zygote"), confinement, and the worker loop.

This file runs as a script (``python _zygote.py FD``) in its own process and imports only
the standard library (ipykernel is imported on the first kernel request), so plait's own
modules never load there. The parent talks to it over a ``SOCK_SEQPACKET`` socket (one JSON
record per message, file descriptors attached with ``SCM_RIGHTS``):

parent -> zygote
    ``{"op": "spawn", "kind": "worker" | "kernel", "spec": {...}}`` + fds ``[channel, output?]``
    ``{"op": "release", "pid": PID}``  kill the child and everything its uid runs, free the uid
    ``{"op": "preload", "kind": "kernel"}``  import ipykernel now, before a kernel is needed
zygote -> parent
    ``{"op": "exit", "pid": PID, "status": CODE | -SIGNAL}``

Each child forks from the zygote, so it starts in a few milliseconds with the imports already
done. Before it runs anything it confines itself (`confine`): a new session (process group),
optionally a new network namespace, resource limits, then, when the zygote runs as root, a
uid of its own from a reserved range (so ``RLIMIT_NPROC`` applies, its files are private and
everything it starts can be killed at once with ``kill(-1)`` from that uid). The child says
hello on its channel: ``{"pid", "uid", "network_isolated"}``.

Releasing a child forks a short-lived *sweeper* that switches to the child's uid and sends
``SIGKILL`` to every process of that uid until none is left; only then is the uid free for
another session. When the parent goes away (its end of the socket closes), the zygote
sweeps every uid it handed out and exits.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import fcntl
import io
import json
import linecache
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
import traceback
from typing import Any

HEADER = struct.Struct("!I")
MAX_RECORD = 1 << 20

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18

_LIBC: Any = None


def _libc() -> Any:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def prctl(option: int, value: int) -> bool:
    """Set a process attribute with the prctl system call; False when it failed."""
    return bool(_libc().prctl(option, value, 0, 0, 0) == 0)


# -- framing on stream sockets (worker channel) ----------------------------------------------
def send_frame(sock: socket.socket, obj: Any) -> None:
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


def recv_frame(sock: socket.socket) -> Any:
    """Receive one frame (blocking); None at end of stream."""
    head = _recv_exact(sock, HEADER.size)
    if head is None:
        return None
    body = _recv_exact(sock, HEADER.unpack(head)[0])
    return None if body is None else json.loads(body)


# -- processes of a uid ------------------------------------------------------------------------
def pids_of_uid(uid: int) -> list[int]:
    """Live (non-zombie) processes whose real uid is `uid`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as fh:
                text = fh.read(2048)
        except OSError:
            continue
        state = uid_line = b""
        for line in text.split(b"\n"):
            if line.startswith(b"State:"):
                state = line
            elif line.startswith(b"Uid:"):
                uid_line = line
                break
        parts = uid_line.split()
        if len(parts) > 1 and int(parts[1]) == uid and b"Z" not in state.split()[1:2]:
            found.append(int(name))
    return found


def pids_of_session(sid: int) -> list[int]:
    """Live processes whose session id is `sid` (used when no private uid is available)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[0] != b"Z" and int(fields[3]) == sid:
            found.append(int(name))
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


def confine(spec: dict[str, Any]) -> dict[str, Any]:
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
    if limits.get("memory_bytes"):
        _set_limit(resource.RLIMIT_AS, limits["memory_bytes"])
    if limits.get("cpu_seconds"):
        set_cpu_limit(limits["cpu_seconds"], limits.get("cpu_seconds_total"))
    if limits.get("max_file_bytes"):
        _set_limit(resource.RLIMIT_FSIZE, limits["max_file_bytes"])
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if limits.get("max_open_files"):
        _set_limit(resource.RLIMIT_NOFILE, limits["max_open_files"])
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
    return {"pid": os.getpid(), "uid": os.getuid(), "network_isolated": isolated_net}


def _dup_to_std(fd: int) -> None:
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


# -- the worker: stateful exec with last-expression display -----------------------------------
class _Interrupted(BaseException):
    """Raised in user code by SIGINT while a cell runs (the parent's timeout)."""


class CPUTimeExceeded(Exception):
    """The call used more CPU seconds than its limit."""


def _clean_traceback(exc: BaseException) -> str:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb)
    return "".join(lines).rstrip("\n")


class Worker:
    """The loop a worker child runs: one namespace, cells executed in order."""

    def __init__(self, sock: socket.socket, spec: dict[str, Any]) -> None:
        self.sock = sock
        self.spec = spec
        self.pid = os.getpid()
        self.cells = 0
        self.running = False
        self.ns: dict[str, Any] = {}
        self.reset()
        signal.signal(signal.SIGINT, self._on_sigint)
        signal.signal(signal.SIGXCPU, self._on_sigxcpu)
        os.register_at_fork(after_in_child=self._after_fork)
        sys.stdout = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
        )
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
        )
        sys.stdin = io.TextIOWrapper(io.BytesIO(b""))
        sys.argv = [""]

    def reset(self) -> None:
        self.ns = {"__name__": "__main__", "__builtins__": builtins, "__doc__": None}

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.running:
            raise _Interrupted()

    def _on_sigxcpu(self, signum: int, frame: Any) -> None:
        if self.running:
            raise CPUTimeExceeded(f"the code used more than {self.spec['limits'].get('cpu_seconds')} s of CPU time")

    def _after_fork(self) -> None:
        # A process forked by user code must never speak on the channel.
        try:
            self.sock.close()
        except OSError:
            pass

    def _arm_cpu(self) -> None:
        cpu = self.spec["limits"].get("cpu_seconds")
        if cpu:
            set_cpu_limit(cpu, self.spec["limits"].get("cpu_seconds_total"))

    def serve(self) -> None:
        while True:
            request = recv_frame(self.sock)
            if request is None:
                return
            op = request.get("op")
            if op == "reset":
                self.reset()
                reply: dict[str, Any] = {"ok": True}
            else:
                reply = self.execute(request)
            if os.getpid() != self.pid:  # pragma: no cover - a fork of user code got here
                os._exit(0)
            self._flush()
            if self.spec.get("kill_background"):
                self._kill_background()
            send_frame(self.sock, reply)

    def _flush(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass

    def _kill_background(self) -> None:
        """Kill every other process of this private uid (what the code left running)."""
        if os.getuid() == 0 or os.getuid() == self.spec.get("parent_uid"):
            return
        for _ in range(100):
            others = [p for p in pids_of_uid(os.getuid()) if p != self.pid]
            if not others:
                return
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                return
            time.sleep(0.001)

    def execute(self, request: dict[str, Any]) -> dict[str, Any]:
        self.cells += 1
        code = request["code"]
        filename = f"<cell-{self.cells}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        mode = request.get("mode", "interactive")
        reply: dict[str, Any] = {"ok": True, "result": None, "error": None, "interrupted": False}
        if mode == "script":
            self.reset()
        self._arm_cpu()
        self.running = True
        try:
            value = self._run(code, filename, mode, request)
            self.running = False
            if value is not None:
                reply["result"] = value
        except _Interrupted:
            self.running = False
            reply.update(ok=False, interrupted=True, error="KeyboardInterrupt")
        except BaseException as exc:  # the user's code failed: report it, keep serving
            self.running = False
            if os.getpid() != self.pid:
                os._exit(1)
            reply.update(ok=False, error=_clean_traceback(exc), ename=type(exc).__name__)
        finally:
            self.running = False
        return reply

    def _run(self, code: str, filename: str, mode: str, request: dict[str, Any]) -> str | None:
        ns = self.ns
        if mode == "script":
            answer = request.get("answer") or {}
            if answer.get("from_stdout"):
                exec(compile(code, filename, "exec"), ns)
                return None
            if answer.get("symbol"):
                exec(compile(code, filename, "exec"), ns)
                return str(ns[answer["symbol"]])
            if answer.get("expr"):
                exec(compile(code, filename, "exec"), ns)
                return str(eval(answer["expr"], ns))
            lines = code.split("\n")
            exec(compile("\n".join(lines[:-1]), filename, "exec"), ns)
            return str(eval(compile(lines[-1], filename, "eval"), ns))
        tree = ast.parse(code, filename, "exec")
        last: ast.Expression | None = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body[-1].value)
            tree.body.pop()
        exec(compile(tree, filename, "exec"), ns)
        if last is None:
            return None
        value = eval(compile(last, filename, "eval"), ns)
        if value is None:
            return None
        ns["_"] = value
        return repr(value)


def worker_main(spec: dict[str, Any], sock: socket.socket, out_fd: int) -> None:
    """Entry point of a worker child (after `confine`)."""
    _dup_to_std(out_fd)
    os.close(out_fd)
    worker = Worker(sock, spec)
    send_frame(sock, spec["hello"])
    worker.serve()


# -- the kernel child ----------------------------------------------------------------------------
TRUNCATION = "\n... [output truncated: {n} more characters]"


def _cap_stream(stream: Any, state: dict[str, int]) -> Any:
    original = stream.write

    def write(text: str) -> int:
        left = state["left"]
        if left <= 0:
            state["dropped"] += len(text)
            return len(text)
        if len(text) > left:
            state["dropped"] += len(text) - left
            state["left"] = 0
            original(text[:left])
            return len(text)
        state["left"] = left - len(text)
        return int(original(text) or len(text))

    stream.write = write
    return original


def kernel_main(spec: dict[str, Any], sock: socket.socket) -> None:
    """Entry point of a kernel child: a real ipykernel on the connection the parent chose."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    conn = os.path.join(spec["dir"], ".kernel.json")
    fd = os.open(conn, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(spec["connection"], fh)
    from ipykernel.kernelapp import IPKernelApp

    app: Any = IPKernelApp.instance()
    app.initialize(["-f", conn, "--HistoryManager.enabled=False", "--IPKernelApp.quiet=True"])
    limits = spec["limits"]
    me = os.getpid()
    cap = {"left": limits.get("max_output_bytes") or 1 << 62, "dropped": 0}
    raw_write = _cap_stream(sys.stdout, cap)
    _cap_stream(sys.stderr, cap)

    def pre_run_cell(*_: Any) -> None:
        cap["left"] = limits.get("max_output_bytes") or 1 << 62
        cap["dropped"] = 0
        cpu = limits.get("cpu_seconds")
        if cpu:
            set_cpu_limit(cpu, limits.get("cpu_seconds_total"))

    def post_run_cell(*_: Any) -> None:
        if os.getpid() != me:  # a process forked by the cell: never return into the kernel loop
            os._exit(0)
        if cap["dropped"]:
            raw_write(TRUNCATION.format(n=cap["dropped"]))
            cap["dropped"] = 0
        if spec.get("kill_background") and os.getuid() not in (0, spec.get("parent_uid")):
            for _attempt in range(100):
                if not [p for p in pids_of_uid(os.getuid()) if p != me]:
                    break
                os.kill(-1, signal.SIGKILL)
                time.sleep(0.001)

    def on_sigxcpu(signum: int, frame: Any) -> None:
        raise CPUTimeExceeded(f"the code used more than {limits.get('cpu_seconds')} s of CPU time")

    signal.signal(signal.SIGXCPU, on_sigxcpu)
    app.shell.events.register("pre_run_cell", pre_run_cell)
    app.shell.events.register("post_run_cell", post_run_cell)
    app.shell.user_ns["input"] = _no_input
    send_frame(sock, spec["hello"])
    sock.close()
    app.start()


def _no_input(*args: Any, **kwargs: Any) -> str:
    raise NotImplementedError("input() is not available in this interpreter")


# -- the zygote ------------------------------------------------------------------------------------
class UidPool:
    """Private uids for sessions, shared between processes on this machine through lock files."""

    def __init__(self, base: int, count: int, lock_dir: str) -> None:
        self.base, self.count, self.lock_dir = base, count, lock_dir
        self.held: dict[int, int] = {}
        os.makedirs(lock_dir, mode=0o700, exist_ok=True)

    def acquire(self) -> int:
        for uid in range(self.base, self.base + self.count):
            if uid in self.held:
                continue
            fd = os.open(os.path.join(self.lock_dir, str(uid)), os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            if not sweep_uid(uid):  # left over by a process that died without cleaning up
                os.close(fd)
                continue
            self.held[uid] = fd
            return uid
        raise RuntimeError(f"no free sandbox uid in [{self.base}, {self.base + self.count})")

    def release(self, uid: int) -> None:
        fd = self.held.pop(uid, None)
        if fd is not None:
            os.close(fd)


class Zygote:
    """The fork server loop."""

    def __init__(self, ctl: socket.socket, config: dict[str, Any]) -> None:
        self.ctl = ctl
        self.config = config
        self.root = os.getuid() == 0 and config.get("switch_user", True)
        self.uids = UidPool(config["uid_base"], config["uid_count"], config["lock_dir"]) if self.root else None
        self.children: dict[int, dict[str, Any]] = {}  # pid -> {uid, sid, kind}
        self.sweepers: dict[int, int] = {}  # sweeper pid -> uid being freed
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        self.kernel_ready = False
        self.expose = exposure_plan(self._interpreter_paths() + list(config.get("expose", []))) if self.root else []

    @staticmethod
    def _interpreter_paths() -> list[str]:
        paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
        paths.append(os.path.dirname(os.path.realpath(sys.executable)))
        paths.extend(p for p in sys.path if p)
        return paths

    def preload_kernel(self) -> None:
        if self.kernel_ready:
            return
        import ipykernel.ipkernel
        import ipykernel.kernelapp  # noqa: F401

        self.kernel_ready = True

    def run(self) -> None:
        while True:
            try:
                ready = select.select([self.ctl.fileno(), self.wake_r], [], [])[0]
            except InterruptedError:
                continue
            if self.wake_r in ready:
                try:
                    os.read(self.wake_r, 4096)
                except BlockingIOError:
                    pass
            self.reap()
            if self.ctl.fileno() in ready:
                try:
                    data, fds, _, _ = socket.recv_fds(self.ctl, MAX_RECORD, 8)
                except OSError:
                    data, fds = b"", []
                if not data:
                    self.shutdown()
                    return
                self.handle(json.loads(data), fds)

    def notify(self, obj: dict[str, Any]) -> None:
        try:
            self.ctl.send(json.dumps(obj).encode())
        except OSError:
            pass

    def handle(self, msg: dict[str, Any], fds: list[int]) -> None:
        op = msg.get("op")
        if op == "spawn":
            try:
                self.spawn(msg, fds)
            finally:
                for fd in fds:
                    os.close(fd)
        elif op == "release":
            for fd in fds:
                os.close(fd)
            self.release(int(msg["pid"]), msg.get("remove"))
        elif op == "preload":
            self.preload_kernel()

    def spawn(self, msg: dict[str, Any], fds: list[int]) -> None:
        kind = msg["kind"]
        spec = dict(msg["spec"])
        if kind == "kernel":
            self.preload_kernel()
        if self.uids is not None:
            try:
                uid = self.uids.acquire()
            except RuntimeError as exc:
                with socket.socket(fileno=os.dup(fds[0])) as chan:
                    send_frame(chan, {"error": str(exc)})
                return
            spec.update(uid=uid, gid=uid, switch_user=True, expose=self.expose)
        else:
            spec.update(uid=os.getuid(), gid=os.getgid(), switch_user=False)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 0
            try:
                self._child(kind, spec, fds)
            except BaseException:
                code = 1
                try:
                    with socket.socket(fileno=os.dup(fds[0])) as chan:
                        send_frame(chan, {"error": traceback.format_exc()})
                except Exception:
                    pass
            finally:
                os._exit(code)
        self.children[pid] = {"uid": spec["uid"], "sid": pid, "kind": kind, "private": self.uids is not None}

    def _child(self, kind: str, spec: dict[str, Any], fds: list[int]) -> None:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        keep = set(fds)
        for fd in (self.ctl.fileno(), self.wake_r, self.wake_w):
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        for fd in list(self.uids.held.values()) if self.uids else []:
            os.close(fd)
        spec["hello"] = confine(spec)
        sock = socket.socket(fileno=fds[0])
        sock.setblocking(True)
        if kind == "worker":
            worker_main(spec, sock, fds[1])
        else:
            kernel_main(spec, sock)

    def release(self, pid: int, remove: str | None = None) -> None:
        info = self.children.get(pid)
        if info is None or info.get("released"):
            return
        info["released"] = True
        if info.get("exited"):
            del self.children[pid]
        else:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        sweeper = os.fork()
        if sweeper == 0:  # pragma: no cover - the sweeper
            ok = False
            try:
                ok = sweep_uid(info["uid"]) if info["private"] else sweep_session(info["sid"])
                if remove:
                    import shutil

                    shutil.rmtree(remove, ignore_errors=True)
            finally:
                os._exit(0 if ok else 1)
        self.sweepers[sweeper] = info["uid"] if info["private"] else -1

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = os.waitstatus_to_exitcode(status)
            if pid in self.sweepers:
                uid = self.sweepers.pop(pid)
                if uid >= 0 and self.uids is not None and code == 0:
                    self.uids.release(uid)
                continue
            info = self.children.get(pid)
            if info is None:
                continue  # an orphan of user code, reparented to us (subreaper)
            info["exited"] = True
            self.notify({"op": "exit", "pid": pid, "status": code})
            if info.get("released"):
                del self.children[pid]

    def shutdown(self) -> None:
        for pid, info in list(self.children.items()):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            if info["private"]:
                sweep_uid(info["uid"])
            else:
                sweep_session(info["sid"])
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.005)


def main() -> None:
    """Run the zygote: ``python _zygote.py FD CONFIG_JSON``."""
    ctl = socket.socket(fileno=int(sys.argv[1]))
    config = json.loads(sys.argv[2])
    zygote = Zygote(ctl, config)
    if config.get("preload_kernel"):
        zygote.preload_kernel()
    zygote.run()


if __name__ == "__main__":
    main()
