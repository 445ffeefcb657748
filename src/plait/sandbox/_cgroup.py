"""A memory cap per sandbox session that holds across its processes: a memory cgroup (standard library only).

``RLIMIT_AS`` bounds each process, so code that forks four children may use four times
the limit. Where this process may create memory cgroups (cgroup v2 with the ``memory``
controller delegated, or a writable v1 ``memory`` hierarchy — the case when plait runs as
root in a container), the zygote makes one cgroup per session process with the session's
``memory_bytes`` as its limit; the session process joins it before it drops privileges and
every process it starts stays in it. When the cgroup's limit is reached the kernel's
OOM killer ends a process of that session only. Without a writable hierarchy the cap is
per process (``RLIMIT_AS``) and `available` says so.

This file is imported by the zygote script, so it uses the standard library only.
"""

from __future__ import annotations

import contextlib
import os
import time

__all__ = ["available", "create", "join", "peak", "remove"]

_ROOT = "/sys/fs/cgroup"


def _own_path(version: str) -> str | None:
    """This process's cgroup path in the hierarchy `version` ('v2' or 'memory')."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if version == "v2" and controllers == "":
            return path
        if version == "memory" and "memory" in controllers.split(","):
            return path
    return None


def _base() -> tuple[str, str] | None:
    """The directory new cgroups go under and the hierarchy kind ('v2' or 'v1'), when writable."""
    v1 = _own_path("memory")
    if v1 is not None:
        base = os.path.join(_ROOT, "memory", v1.lstrip("/"))
        if os.access(base, os.W_OK) and os.path.exists(os.path.join(base, "memory.limit_in_bytes")):
            return base, "v1"
    v2 = _own_path("v2")
    if v2 is not None:
        base = os.path.join(_ROOT, v2.lstrip("/"))
        try:
            with open(os.path.join(base, "cgroup.subtree_control"), encoding="utf-8") as fh:
                delegated = "memory" in fh.read().split()
        except OSError:
            delegated = False
        if delegated and os.access(base, os.W_OK):
            return base, "v2"
    return None


def available() -> bool:
    """Whether per-session memory cgroups can be made here."""
    return _base() is not None


def _write(path: str, value: str) -> bool:
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(value)
    except OSError:
        return False
    return True


def create(name: str, limit_bytes: int) -> str | None:
    """A new cgroup `name` limited to `limit_bytes` (swap included where the kernel counts it); None if not possible."""
    found = _base()
    if found is None:
        return None
    base, kind = found
    path = os.path.join(base, name)
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    except OSError:
        return None
    if kind == "v1":
        ok = _write(os.path.join(path, "memory.limit_in_bytes"), str(limit_bytes))
        _write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(limit_bytes))  # absent without swap accounting
    else:
        ok = _write(os.path.join(path, "memory.max"), str(limit_bytes))
        _write(os.path.join(path, "memory.swap.max"), "0")
    if not ok:
        remove(path, attempts=1)
        return None
    return path


def join(path: str) -> bool:
    """Move the calling process into the cgroup at `path` (its future children follow)."""
    return _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))


def peak(path: str) -> int | None:
    """The most memory the cgroup's processes used together (bytes), where the kernel reports it."""
    for name in ("memory.max_usage_in_bytes", "memory.peak"):
        with contextlib.suppress(OSError, ValueError), open(os.path.join(path, name), encoding="utf-8") as fh:
            return int(fh.read().strip())
    return None


def remove(path: str, attempts: int = 50) -> bool:
    """Remove the cgroup once its processes are gone (they must have been killed)."""
    for _ in range(attempts):
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.01)
    return False
