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
root filesystem of its own (`_zygote_fs`: private /tmp, /var/tmp, /dev/shm and /proc, a
read-only view of what the interpreter needs; the zygote first mounts a size-capped tmpfs on
its working directory) and a uid of its own from a reserved range (so ``RLIMIT_NPROC``
applies, its files are private and everything it starts can be killed at once with
``kill(-1)`` from that uid). The child says hello on its channel: ``{"pid", "uid",
"network_isolated", "memory_cap", "isolation", "isolation_error"}``.

Releasing a child (the parent has unmounted its working directory's tmpfs) forks a
short-lived *sweeper* that switches to the child's uid and sends ``SIGKILL`` to every
process of that uid until none is left; only then is the uid free for another session. When
the parent goes away (its end of the socket closes), the zygote sweeps every uid it handed
out, unmounts the working directories still mounted and exits.

The code is split into four stdlib-only files: this one (the zygote loop and the script's
entry point), `_zygote_os` (framing, uid sweeps, `confine`), `_zygote_fs` (the session's
filesystem) and `_zygote_child` (the worker loop and the kernel child). ``python _zygote.py
--probe`` prints what isolation holds on this machine (`probe`).
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from typing import TYPE_CHECKING, TypedDict

# Stdlib-only siblings, loaded as package modules when imported (``plait.sandbox``) and as
# top-level modules when this folder runs as the zygote script (it is then ``sys.path[0]``).
if TYPE_CHECKING or __package__:
    from . import _cgroup as zcg, _zygote_child as zchild, _zygote_fs as zfs, _zygote_os as zos
else:
    import _cgroup as zcg
    import _zygote_child as zchild
    import _zygote_fs as zfs
    import _zygote_os as zos


# -- the zygote ------------------------------------------------------------------------------------
class ZygoteConfig(TypedDict, total=False):
    """The zygote's command-line configuration (JSON)."""

    uid_base: int
    uid_count: int
    lock_dir: str
    preload_kernel: bool
    switch_user: bool
    expose: list[str]


class Request(TypedDict, total=False):
    """A request from the parent: ``spawn`` (``kind``, ``spec``), ``release`` (``pid``, ``remove``) or ``preload``."""

    op: str
    kind: str
    spec: zos.ChildSpec
    pid: int
    remove: str | None


class ChildInfo(TypedDict):
    """What the zygote remembers of a child it started."""

    uid: int
    sid: int
    kind: str
    private: bool
    released: bool
    exited: bool
    cgroup: str | None
    work_dir: str | None  # where the zygote mounted the session's working-directory tmpfs


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
            if not zos.sweep_uid(uid):  # left over by a process that died without cleaning up
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

    def __init__(self, ctl: socket.socket, config: ZygoteConfig) -> None:
        self.ctl = ctl
        self.config = config
        self.root = os.getuid() == 0 and config.get("switch_user", True)
        self.uids = UidPool(config["uid_base"], config["uid_count"], config["lock_dir"]) if self.root else None
        self.children: dict[int, ChildInfo] = {}
        self.spawned = 0
        self.sweepers: dict[int, int] = {}  # sweeper pid -> uid being freed
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        zos.prctl(zos.PR_SET_CHILD_SUBREAPER, 1)
        self.kernel_ready = False
        self.view: zfs.View = {"binds": [], "links": [], "dirs": [], "files": []}
        self.expose: list[list[str]] = []
        self.stage = os.path.join(config["lock_dir"], "stage")
        self.mounts: set[str] = set()  # working directories this zygote mounted and nobody unmounted yet
        if self.root:
            paths = self._interpreter_paths(config.get("expose", []))
            self.view = zfs.view_plan(paths)
            self.expose = zfs.exposure_plan(paths)
            zfs.prepare_stage(self.stage)
            zfs.sweep_stale_mounts()

    @staticmethod
    def _interpreter_paths(extra: list[str]) -> list[str]:
        """What a session sees of the host: the system, Python, the packages on its path and `extra`."""
        prefixes = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
        prefixes.append(os.path.dirname(os.path.realpath(sys.executable)))
        return zfs.host_paths([p for p in sys.path if p], prefixes) + list(extra)

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
                    data, fds, _, _ = socket.recv_fds(self.ctl, zos.MAX_RECORD, 8)
                except OSError:
                    data, fds = b"", []
                if not data:
                    self.shutdown()
                    return
                self.handle(json.loads(data), fds)

    def notify(self, obj: dict[str, object]) -> None:
        try:
            self.ctl.send(json.dumps(obj).encode())
        except OSError:
            pass

    def handle(self, msg: Request, fds: list[int]) -> None:
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

    def spawn(self, msg: Request, fds: list[int]) -> None:
        kind = msg["kind"]
        spec = msg["spec"].copy()
        if kind == "kernel":
            self.preload_kernel()
        if self.uids is not None:
            try:
                uid = self.uids.acquire()
            except RuntimeError as exc:
                with socket.socket(fileno=os.dup(fds[0])) as chan:
                    zos.send_frame(chan, {"error": str(exc)})
                return
            spec.update({"uid": uid, "gid": uid, "switch_user": True, "expose": self.expose})
            spec.update({"view": self.view, "stage": self.stage})
            quota = spec["limits"].get("max_disk_bytes")
            spec["work_mounted"] = bool(quota) and zfs.mount_work_dir(spec["dir"], quota or 0, uid, uid)
            if spec["work_mounted"]:
                self.mounts.add(spec["dir"])
        else:
            spec.update({"uid": os.getuid(), "gid": os.getgid(), "switch_user": False, "work_mounted": False})
        memory = spec["limits"].get("memory_bytes")
        self.spawned += 1
        spec["cgroup"] = zcg.create(f"plait-{os.getpid()}-{self.spawned}", memory) if memory else None
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 0
            try:
                self._child(kind, spec, fds)
            except BaseException:
                code = 1
                try:
                    with socket.socket(fileno=os.dup(fds[0])) as chan:
                        zos.send_frame(chan, {"error": traceback.format_exc(), "pid": os.getpid()})
                except Exception:
                    pass
            finally:
                os._exit(code)
        self.children[pid] = {
            "uid": spec["uid"],
            "sid": pid,
            "kind": kind,
            "private": self.uids is not None,
            "released": False,
            "exited": False,
            "cgroup": spec["cgroup"],
            "work_dir": spec["dir"] if spec["work_mounted"] else None,
        }

    def _child(self, kind: str, spec: zos.ChildSpec, fds: list[int]) -> None:
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
        spec["hello"] = zos.confine(spec)
        sock = socket.socket(fileno=fds[0])
        sock.setblocking(True)
        if kind == "worker":
            zchild.worker_main(spec, sock, fds[1])
        else:
            zchild.kernel_main(spec, sock)

    def release(self, pid: int, remove: str | None = None) -> None:
        info = self.children.get(pid)
        if info is None or info["released"]:
            return
        info["released"] = True
        if remove and info["work_dir"]:
            self.mounts.discard(info["work_dir"])  # the parent unmounted it (`Child.release`)
        if info["exited"]:
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
                ok = zos.sweep_uid(info["uid"]) if info["private"] else zos.sweep_session(info["sid"])
                if info["cgroup"]:
                    zcg.remove(info["cgroup"])
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
            if info["released"]:
                del self.children[pid]

    def shutdown(self) -> None:
        for pid, info in list(self.children.items()):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            if info["private"]:
                zos.sweep_uid(info["uid"])
            else:
                zos.sweep_session(info["sid"])
            if info["cgroup"]:
                zcg.remove(info["cgroup"], attempts=10)
        for directory in self.mounts:  # of sessions still running, or released with their directory kept
            zfs.unmount(directory)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.005)


def probe() -> dict[str, object]:
    """What isolation holds here: a child confined as a session would be (as root; nothing when not root).

    Returns:
        ``{'network_namespace': ..., **Isolation}`` (see `zfs.Isolation`).
    """
    import tempfile

    facts: dict[str, object] = {"network_namespace": False, **zfs.NO_ISOLATION}
    if os.getuid() != 0:
        return facts
    read, write = os.pipe()
    with tempfile.TemporaryDirectory(prefix="plait-probe-") as scratch:
        stage, work = os.path.join(scratch, "stage"), os.path.join(scratch, "work")
        zfs.prepare_stage(stage)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the probe child, in namespaces of its own
            try:
                os.close(read)
                found = dict(facts, network_namespace=zfs.libc().unshare(zos.CLONE_NEWNET) == 0)
                zfs.libc().unshare(zfs.CLONE_NEWNS)  # the working directory's tmpfs stays in here
                zfs.mount(None, "/", None, zfs.MS_REC | zfs.MS_PRIVATE, None)
                quota = zfs.mount_work_dir(work, 1 << 20, 0, 0)
                paths = Zygote._interpreter_paths([])
                isolation, _ = zfs.isolate(stage, zfs.view_plan(paths), work, [], 1 << 20, quota)
                found.update(isolation)
                os.write(write, json.dumps(found).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as fh:
            data = fh.read()
        os.waitpid(pid, 0)
    return {**facts, **json.loads(data)} if data else facts


def main() -> None:
    """Run the zygote: ``python _zygote.py FD CONFIG_JSON`` (or ``python _zygote.py --probe``)."""
    if sys.argv[1] == "--probe":
        sys.stdout.write(json.dumps(probe()) + "\n")
        return
    ctl = socket.socket(fileno=int(sys.argv[1]))
    config = json.loads(sys.argv[2])
    zygote = Zygote(ctl, config)
    if config.get("preload_kernel"):
        zygote.preload_kernel()
    zygote.run()


if __name__ == "__main__":
    main()
