"""Helpers to prove that sandboxed processes do not outlive their tools."""

from __future__ import annotations

import os
import time


def processes_under(roots: list[str]) -> list[tuple[int, str]]:
    """Live processes whose working directory is inside one of `roots`."""
    found = []
    real_roots = [os.path.realpath(r) for r in roots]
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
            with open(f"/proc/{name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state == b"Z":
            continue
        if any(cwd == r or cwd.startswith(r + "/") for r in real_roots):
            found.append((int(name), cwd))
    return found


def processes_of_uid(uid: int, exclude: tuple[int, ...] = ()) -> list[int]:
    """Live (non-zombie) processes of `uid`."""
    from plait.sandbox._zygote_os import pids_of_uid

    return [p for p in pids_of_uid(uid) if p not in exclude]


def wait_until(predicate: object, timeout: float = 5.0) -> bool:
    """Poll `predicate()` until it is true or `timeout` passes."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return bool(predicate())  # type: ignore[operator]


def pid_alive(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False
