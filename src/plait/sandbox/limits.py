"""`Limits`: what the code of one session may use.

Every limit applies to the sandboxed process (and what it starts), never to plait's own
process. The defaults are meant to be safe for model-written code on a shared machine:

========================  =====================================================================
limit                     how it is enforced
========================  =====================================================================
``timeout``               wall clock per call: SIGINT (KeyboardInterrupt in the code), then after
                          ``grace`` seconds every process of the session is killed
``cpu_seconds``           ``RLIMIT_CPU`` re-armed before each call (SIGXCPU becomes an error in
                          the code); ``cpu_seconds_total`` is the hard cap for the session
                          (SIGKILL)
``memory_bytes``          ``RLIMIT_AS`` (address space) of each process: large allocations fail
                          with ``MemoryError``; and, where memory cgroups are writable, the
                          cap of the session's processes *together* (past it the kernel
                          kills one of them; `Child.memory_cap` says which holds). As root,
                          half of it bounds the session's ``/tmp``, ``/var/tmp`` and
                          ``/dev/shm`` together (one private tmpfs; ``ENOSPC`` past it)
``max_processes``         ``RLIMIT_NPROC`` (processes *and threads*) of the session's private uid
``max_output_bytes``      output kept per call; the rest is dropped and a marker says how much
``max_file_bytes``        ``RLIMIT_FSIZE``: a larger write fails with ``EFBIG``
``max_open_files``        ``RLIMIT_NOFILE``
``max_disk_bytes``        as root, the working directory is a tmpfs of this size: past it a
                          write fails with ``ENOSPC`` (its files count in the session's memory)
``network``               False: the process gets an empty network namespace (``unshare``)
``kill_background``       processes the code started are killed when the call ends
========================  =====================================================================

Isolation between sessions needs plait to run as root (as in CI containers): each session
process then runs under its own uid from a reserved range (``uid_base``), so
``RLIMIT_NPROC`` is enforced (Linux ignores it for root), its directory (mode 0700) cannot
be read by other sessions, and everything it started can be killed at once; and it gets a
root filesystem of its own (`plait.sandbox._zygote_fs`): private ``/tmp``, ``/var/tmp``,
``/dev/shm`` and ``/proc``, and a read-only view of only what the interpreter needs of the
host. When plait is *not* root, the sandbox still runs the code in a separate, killable
process group with the same rlimits and private working directory, but: the process runs
under plait's own uid and sees the host's filesystem (other sessions' directories are
readable, as are the user's files, ``/tmp`` and ``/proc``), ``max_disk_bytes`` does not
hold, ``RLIMIT_NPROC`` counts every process of that user (plait sets it to the user's
current count plus ``max_processes``), a process that leaves its session (``setsid``)
escapes the final kill, and ``network=False`` has no effect (the session reports
``network_isolated=False``). `sandbox_capabilities` reports what this machine allows.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

from ..types import JSONValue

__all__ = ["Limits", "sandbox_capabilities"]

GiB = 1 << 30
MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Resource limits for sandboxed code (see the module docstring for how each is enforced).

    Every value is checked when the `Limits` is made: a negative, zero or out-of-range value
    raises `ValueError` (a wrong type `TypeError`) naming the field.

    Attributes:
        timeout: Wall-clock seconds per call.
        grace: Seconds between the interrupt and the kill when the code does not stop.
        cpu_seconds: CPU seconds per call (None: no limit); whole seconds, at least 1.
        cpu_seconds_total: CPU seconds per session process (None: no limit); at least 1.
        memory_bytes: Address-space limit per process, and the session's together where
            memory cgroups are writable (None: no limit). Half of it bounds the session's
            ``/tmp``, ``/var/tmp`` and ``/dev/shm`` together (as root).
        max_processes: Processes and threads the session may run at once (None: no limit).
        max_output_bytes: Output kept per call.
        max_file_bytes: Largest file the code may write (None: no limit).
        max_open_files: File descriptors per process (None: no limit).
        network: Whether the code may use the network.
        kill_background: Kill the processes the code started when a call ends.
        start_timeout: Seconds to wait for a new interpreter process to be ready.
        max_disk_bytes: What the session's working directory may hold (as root: a tmpfs of
            this size, counted in the session's memory; None: no limit).
    """

    timeout: float = 20.0
    grace: float = 0.5
    cpu_seconds: float | None = 60.0
    cpu_seconds_total: float | None = None
    memory_bytes: int | None = 4 * GiB
    max_processes: int | None = 64
    max_output_bytes: int = 1 * MiB
    max_file_bytes: int | None = 1 * GiB
    max_open_files: int | None = 1024
    network: bool = False
    kill_background: bool = True
    start_timeout: float = 60.0
    max_disk_bytes: int | None = 1 * GiB

    def __post_init__(self) -> None:
        for name, (kind, minimum, optional) in _RULES.items():
            value = getattr(self, name)
            if value is None and optional:
                continue
            if kind is bool:
                if not isinstance(value, bool):
                    raise TypeError(f"Limits.{name} must be True or False, got {value!r}")
                continue
            kinds = (int,) if kind is int else (int, float)
            if isinstance(value, bool) or not isinstance(value, kinds):
                wanted = ("an int" if kind is int else "a number") + (" or None" if optional else "")
                raise TypeError(f"Limits.{name} must be {wanted}, got {value!r}")
            strict = name in _POSITIVE
            if not math.isfinite(value) or value < minimum or (strict and value == minimum):
                bound = f"> {minimum:,}" if strict else f">= {minimum:,}"
                raise ValueError(f"Limits.{name} must be {bound}{_WHY.get(name, '')}, got {value!r}")

    def replace(self, **changes: Any) -> Limits:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def for_child(self) -> dict[str, JSONValue]:
        """The limits as the child process reads them."""
        return dataclasses.asdict(self)


_RULES: dict[str, tuple[type, float, bool]] = {  # field: (type, smallest value, None allowed)
    "timeout": (float, 0, False),
    "grace": (float, 0, False),
    "cpu_seconds": (float, 1, True),
    "cpu_seconds_total": (float, 1, True),
    "memory_bytes": (int, 64 * MiB, True),
    "max_processes": (int, 1, True),
    "max_output_bytes": (int, 0, False),
    "max_file_bytes": (int, 1, True),
    "max_open_files": (int, 16, True),
    "network": (bool, 0, False),
    "kill_background": (bool, 0, False),
    "start_timeout": (float, 0, False),
    "max_disk_bytes": (int, 1 * MiB, True),
}
_POSITIVE = {"timeout", "start_timeout"}  # must be greater than their minimum (0), not equal
_WHY = {
    "cpu_seconds": " (RLIMIT_CPU counts whole seconds)",
    "cpu_seconds_total": " (RLIMIT_CPU counts whole seconds)",
    "memory_bytes": " (the interpreter itself needs more)",
    "max_open_files": " (the interpreter itself needs more)",
}


_CAPS: dict[str, bool] | None = None


def sandbox_capabilities() -> dict[str, bool]:
    """What the sandbox can enforce on this machine (probed once, by a confined child as a session's).

    Returns:
        ``private_uid``, ``network_namespace`` (need plait to run as root, and for the
        namespace a kernel that allows ``unshare(CLONE_NEWNET)``), ``session_memory_cap`` (a
        writable memory cgroup hierarchy, without which ``memory_bytes`` holds per process
        only), and, as root with mount namespaces: ``private_tmp`` (``/tmp``, ``/var/tmp``,
        ``/dev/shm`` are the session's own tmpfs), ``host_hidden`` (the session sees a
        read-only view of what the interpreter needs; no other host files or sockets),
        ``private_proc`` (``/proc`` shows the session's processes only) and ``disk_quota``
        (``max_disk_bytes`` holds).
    """
    global _CAPS
    if _CAPS is None:
        import json
        import subprocess
        import sys

        from . import _cgroup, _zygote

        probed: dict[str, bool] = {}
        try:
            args = [sys.executable, "-S", _zygote.__file__, "--probe"]
            done = subprocess.run(args, capture_output=True, timeout=30, cwd="/", env={})
            probed = json.loads(done.stdout) if done.returncode == 0 else {}
        except (OSError, ValueError, subprocess.SubprocessError):
            probed = {}
        _CAPS = {
            "private_uid": os.geteuid() == 0,
            "network_namespace": bool(probed.get("network_namespace")),
            "session_memory_cap": _cgroup.available(),
            **{name: bool(probed.get(name)) for name in ("private_tmp", "host_hidden", "private_proc", "disk_quota")},
        }
    return dict(_CAPS)
