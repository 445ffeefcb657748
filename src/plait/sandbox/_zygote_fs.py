"""What a sandboxed session sees of the filesystem: a root of its own, built in a private mount namespace.

Standard library only, like the rest of the child side (see `_zygote`). When plait runs as
root, each child, before it drops privileges, builds a new root on a small tmpfs and pivots
into it (`isolate`):

* read-only binds of what the interpreter needs and nothing else of the host: ``/usr`` (and
  ``/bin``, ``/lib``... as the host has them), a short list of ``/etc`` entries (`ETC`:
  loader, time zone, users, name resolution, certificates), Python's prefixes with the
  ``sys.path`` entries inside them, ``/sys/devices/system/cpu``, and the paths a tool shares
  with its sessions (``readable``). No project files, no home directories, no other
  session's directory, no host sockets;
* ``/tmp``, ``/var/tmp`` and ``/dev/shm``: directories of one private tmpfs of
  `scratch_bytes` (half of ``memory_bytes``; its pages count against the session's memory
  cgroup), which disappears with the session's last process;
* ``/dev`` with ``null``, ``zero``, ``full``, ``random`` and ``urandom``; ``/proc`` a new
  procfs with ``hidepid=2``: the session sees its own processes (its private uid) only;
* the session's working directory, read-write, at its host path. The zygote mounts a tmpfs
  of ``max_disk_bytes`` there on the host (`mount_work_dir`), so plait sees the same files
  and the session's disk use has a hard cap (``ENOSPC``); plait unmounts it when it releases
  the session (``Child.release``), the zygote those left when plait goes away, and a zygote
  that starts those of zygotes that died (`sweep_stale_mounts`).

After the pivot the old root is detached, so the namespace holds nothing else of the host's
mounts (a tmpfs the host unmounts is freed even while this session lives). Where the kernel
refuses a step, `isolate` falls back to the older, weaker view (`expose`: the host's
filesystem, with the interpreter made reachable) and the hello says what held.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
from typing import TypedDict

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PIVOT_ROOT = {
    "x86_64": 155,
    "aarch64": 41,
    "riscv64": 41,
    "loongarch64": 41,
    "ppc64le": 203,
    "ppc64": 203,
    "s390x": 217,
}

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys/devices/system/cpu")
ETC = tuple(
    f"/etc/{name}"
    for name in (
        "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "passwd", "group",
        "nsswitch.conf", "hosts", "host.conf", "resolv.conf", "gai.conf", "protocols", "services",
        "ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies", "alternatives",
        "mime.types", "fonts", "os-release", "locale.alias",
    )
)  # fmt: skip
DEVICES = ("null", "zero", "full", "random", "urandom")
MOUNT_SOURCE = "plait-sandbox-"  # + the zygote's pid: the source name of a working-directory tmpfs


class Isolation(TypedDict):
    """What holds for one session (its hello carries it; `plait.sandbox.sandbox_capabilities` probes it)."""

    private_tmp: bool  # /tmp, /var/tmp, /dev/shm: the session's own size-capped tmpfs
    host_hidden: bool  # a read-only view of what the interpreter needs; no other host files or sockets
    private_proc: bool  # /proc shows the session's own processes only
    disk_quota: bool  # the working directory is a size-capped filesystem


class View(TypedDict):
    """The host paths a session sees (read-only), the symlinks on the way, the mount points to make first."""

    binds: list[str]
    links: list[list[str]]  # [where, what it points to]
    dirs: list[str]  # parents first
    files: list[str]  # binds of single files


NO_ISOLATION: Isolation = {"private_tmp": False, "host_hidden": False, "private_proc": False, "disk_quota": False}

_LIBC: ctypes.CDLL | None = None


def libc() -> ctypes.CDLL:
    """The C library (loaded once)."""
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    """The mount system call; OSError when it fails."""

    def enc(value: str | None) -> bytes | None:
        return None if value is None else value.encode()

    _check(libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def unmount(target: str) -> bool:
    """Detach the mount at `target` (lazily: it is freed once nothing uses it); False if there was none."""
    return bool(libc().umount2(target.encode(), MNT_DETACH) == 0)


def _bind(source: str, target: str, readonly: bool) -> None:
    mount(source, target, None, MS_BIND, None)
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | (MS_RDONLY if readonly else 0)
    mount(None, target, None, flags, None)


def _tmpfs(target: str, size: int | None, mode: str, extra: str = "") -> None:
    options = f"mode={mode}" + (f",size={size}" if size else "") + extra
    mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, options)


# -- the working directory (host side, in the zygote) -------------------------------------------
def mount_work_dir(directory: str, size: int, uid: int, gid: int) -> bool:
    """Mount a tmpfs of `size` bytes, owned by `uid`, at `directory` (made if missing); False if refused."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    inodes = max(4096, size // 16384)
    options = f"mode=0700,uid={uid},gid={gid},size={size},nr_inodes={inodes}"
    try:
        mount(f"{MOUNT_SOURCE}{os.getpid()}", directory, "tmpfs", MS_NOSUID | MS_NODEV, options)
    except OSError:
        return False
    return True


def sweep_stale_mounts() -> None:
    """Unmount the working directories of zygotes that are gone (killed before they could clean up)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return
    pattern = re.compile(rf" - tmpfs {MOUNT_SOURCE}(\d+) ")
    for line in lines:
        found = pattern.search(line)
        if found is None:
            continue
        owner = int(found.group(1))
        try:
            with open(f"/proc/{owner}/cmdline", "rb") as fh:
                if b"_zygote" in fh.read():
                    continue  # a live zygote's
        except OSError:
            pass
        target = line.split(" ")[4].encode().decode("unicode_escape")  # mountinfo escapes spaces as \040
        unmount(target)


# -- the view of the host ----------------------------------------------------------------------
def _resolve(path: str, links: set[tuple[str, str]], depth: int = 0) -> str:
    """The real path of `path`, adding each symlink met on the way (at its real location) to `links`."""
    current = "/"
    for part in [p for p in os.path.normpath(path).split("/") if p]:
        candidate = os.path.join(current, part)
        if os.path.islink(candidate) and depth < 40:
            text = os.readlink(candidate)
            links.add((candidate, text))
            current = _resolve(os.path.normpath(os.path.join(current, text)), links, depth + 1)
        else:
            current = candidate
    return current


def view_plan(paths: list[str]) -> View:
    """The binds and symlinks that show `paths` (those that exist) at their host locations, read-only.

    Computed once (in the zygote) down to the directories and files to make as mount points,
    so that a starting child only makes them, in order.
    """
    links: set[tuple[str, str]] = set()
    reals = {_resolve(path, links) for path in paths}
    reals = {real for real in reals if os.path.exists(real) and not real.startswith(("/proc", "/dev"))}
    binds = [r for r in reals if not any(r.startswith(other + "/") for other in reals if other != r)]
    kept = [list(link) for link in links if not any(link[0].startswith(b + "/") for b in binds)]
    dirs: set[str] = set()
    for place in [*binds, *(where for where, _ in kept)]:
        parent = os.path.dirname(place)
        while parent != "/":
            dirs.add(parent)
            parent = os.path.dirname(parent)
    dirs.update(b for b in binds if os.path.isdir(b))

    def depth(path: str) -> tuple[int, str]:
        return path.count("/"), path

    return {
        "binds": sorted(binds, key=depth),
        "links": sorted(kept, key=lambda link: depth(link[0])),
        "dirs": sorted(dirs - {where for where, _ in kept}, key=depth),
        "files": sorted((b for b in binds if not os.path.isdir(b)), key=depth),
    }


def host_paths(interpreter: list[str], prefixes: list[str]) -> list[str]:
    """What a session needs of the host: `SYSTEM`, `ETC`, Python's `prefixes`, and some ``sys.path`` entries.

    Of the `interpreter`'s ``sys.path`` entries, those inside the prefixes or that are
    package directories; not the others (a project's own sources).
    """
    roots = [os.path.realpath(p) for p in prefixes]

    def needed(path: str) -> bool:
        real = os.path.realpath(path)
        packages = os.path.basename(real) in ("site-packages", "dist-packages")
        return packages or any(real == r or real.startswith(r + "/") for r in roots)

    return [*SYSTEM, *ETC, *prefixes, *(p for p in interpreter if needed(p))]


def scratch_bytes(memory_bytes: int | None) -> int | None:
    """The size of a session's /tmp + /var/tmp + /dev/shm: half of its memory (None: the tmpfs default)."""
    return memory_bytes // 2 if memory_bytes else None


def _show(root: str, view: View, writable: frozenset[str] = frozenset()) -> None:
    for directory in view["dirs"]:
        if not os.path.isdir(root + directory):
            os.mkdir(root + directory, 0o755)
    for name in view["files"]:
        os.close(os.open(root + name, os.O_CREAT | os.O_WRONLY, 0o644))
    for where, text in view["links"]:
        if not os.path.lexists(root + where):
            os.symlink(text, root + where)
    for real in view["binds"]:
        _bind(real, root + real, readonly=real not in writable)


def prepare_stage(stage: str) -> None:
    """Make `stage` (root's only): the empty mount points ``root`` and ``scratch`` `isolate` builds on."""
    for name in ("root", "scratch"):
        os.makedirs(os.path.join(stage, name), mode=0o700, exist_ok=True)


def _dev(root: str) -> None:
    os.mkdir(root + "/dev", 0o755)
    _tmpfs(root + "/dev", 65536, "0755")
    for node in (node for node in DEVICES if os.path.exists(f"/dev/{node}")):
        os.close(os.open(f"{root}/dev/{node}", os.O_CREAT | os.O_WRONLY, 0o644))
        mount(f"/dev/{node}", f"{root}/dev/{node}", None, MS_BIND, None)
    links = {
        "fd": "/proc/self/fd",
        "stdin": "/proc/self/fd/0",
        "stdout": "/proc/self/fd/1",
        "stderr": "/proc/self/fd/2",
    }
    for name, target in links.items():
        os.symlink(target, f"{root}/dev/{name}")


def _scratch(root: str, stage: str, size: int | None) -> None:
    """One tmpfs of `size` (mounted at `stage`, outside the new root) for /tmp, /var/tmp and /dev/shm (1777 each)."""
    _tmpfs(stage, size, "0755", f",nr_inodes={max(4096, (size or 1 << 30) // 16384)}")
    for name, at in (("tmp", "/tmp"), ("var-tmp", "/var/tmp"), ("shm", "/dev/shm")):
        os.mkdir(f"{stage}/{name}")
        os.chmod(f"{stage}/{name}", 0o1777)
        if not os.path.isdir(root + at):
            os.makedirs(root + at, 0o755)
        _bind(f"{stage}/{name}", root + at, readonly=False)


def _proc(root: str) -> bool:
    """A procfs that shows the session's own processes only; else (False) the host's."""
    os.makedirs(root + "/proc", exist_ok=True)
    try:
        mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
        return True
    except OSError:
        mount("/proc", root + "/proc", None, MS_BIND | MS_REC, None)
        return False


def _pivot(root: str) -> None:
    number = PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(errno.ENOSYS, f"pivot_root: no system call number known for {os.uname().machine}")
    os.chdir(root)
    _check(libc().syscall(ctypes.c_long(number), b".", b"."), "pivot_root")
    _check(libc().umount2(b".", MNT_DETACH), "unmount the host's root")  # the old root, stacked on the new one
    os.chdir("/")


def isolate(
    stage: str, view: View, directory: str, readable: list[str], scratch: int | None, quota: bool
) -> tuple[Isolation, str | None]:
    """Build the session's root on `stage` (see `prepare_stage`) and pivot into it; as root, in a fresh process.

    Returns:
        What holds, and why the rest does not (None when everything held). On failure the
        process stays in its own mount namespace with the host's filesystem.
    """
    _check(libc().unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    root = os.path.join(stage, "root")
    try:
        _tmpfs(root, 1 << 20, "0755", ",nr_inodes=4096")
        _dev(root)
        _scratch(root, os.path.join(stage, "scratch"), scratch)  # its mount leaves with the host's, below
        _show(root, view)
        own = view_plan([directory, *readable])
        _show(root, own, writable=frozenset(view_plan([directory])["binds"]))
        private_proc = _proc(root)
        mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
        _pivot(root)
    except OSError as exc:
        return {**NO_ISOLATION, "disk_quota": quota}, str(exc)
    facts: Isolation = {"private_tmp": True, "host_hidden": True, "private_proc": private_proc, "disk_quota": quota}
    return facts, None if private_proc else "a private /proc could not be mounted"


# -- the fallback: the host's filesystem, with the interpreter reachable ---------------------------
def exposure_plan(paths: list[str]) -> list[list[str]]:
    """``[[dir, child], ...]``: directories others cannot traverse on the way to `paths`.

    A Python installed under ``/root`` (mode 0700) cannot import its standard library once
    the process has switched to an unprivileged uid. Without a root of its own (`isolate`
    failed) the child hides each such directory behind an empty tmpfs in its own mount
    namespace and bind-mounts back only the entries on the way to the interpreter's files.
    """
    plan: set[tuple[str, str]] = set()
    for path in paths:
        real = os.path.realpath(path)
        if not os.path.exists(real):
            continue
        parts = [p for p in real.split("/") if p]
        for depth in range(len(parts)):
            ancestor = "/" + "/".join(parts[:depth])
            try:
                mode = os.stat(ancestor).st_mode
            except OSError:
                break
            if not mode & 0o001:
                plan.add((ancestor, parts[depth]))
    return [list(item) for item in sorted(plan, key=lambda item: (item[0].count("/"), item))]


def expose(plan: list[list[str]]) -> None:
    """Apply an `exposure_plan` in a new mount namespace (as root, before dropping privileges)."""
    if not plan:
        return
    _check(libc().unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    handles = []  # opened inside the new namespace, before anything is hidden
    for directory, name in plan:
        path = os.path.join(directory, name)
        handles.append((directory, name, os.open(path, os.O_PATH), os.path.isdir(path)))
    mounted: set[str] = set()
    for directory, name, fd, is_dir in handles:
        if directory not in mounted:
            _tmpfs(directory, 65536, "0755")
            mounted.add(directory)
        target = os.path.join(directory, name)
        if is_dir:
            os.makedirs(target, exist_ok=True)
        else:
            open(target, "a").close()
        mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC, None)
    for _, _, fd, _ in handles:
        os.close(fd)
