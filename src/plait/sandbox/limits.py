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
``memory_bytes``          ``RLIMIT_AS`` (address space) of each process: large allocations fail
                          with ``MemoryError``; and, where memory cgroups are writable, the
                          cap of the session's processes *together* (past it the kernel
                          kills one of them; `Child.memory_cap` says which holds)
``max_processes``         ``RLIMIT_NPROC`` (processes *and threads*) of the session's private uid
``max_output_bytes``      output kept per call; the rest is dropped and a marker says how much
``max_file_bytes``        ``RLIMIT_FSIZE``: a larger write fails with ``EFBIG``
``network``               False: the process gets an empty network namespace (``unshare``)
``kill_background``       processes the code started are killed when the call ends
========================  =====================================================================

Isolation between sessions needs plait to run as root (as in CI containers): each session
process then runs under its own uid from a reserved range (``uid_base``), so
``RLIMIT_NPROC`` is enforced (Linux ignores it for root), its directory (mode 0700) cannot
be read by other sessions, and everything it started can be killed at once. When plait is
*not* root, the sandbox still runs the code in a separate, killable process group with the
same rlimits and private working directory, but: the process runs under plait's own uid
(other sessions' directories are readable, as are the user's files), ``RLIMIT_NPROC`` counts
every process of that user (plait sets it to the user's current count plus
``max_processes``), a process that leaves its session (``setsid``) escapes the final kill,
and ``network=False`` has no effect (the session reports ``network_isolated=False``).
`sandbox_capabilities` reports what this machine allows.
"""

from __future__ import annotations

import dataclasses
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

    Attributes:
        timeout: Wall-clock seconds per call.
        grace: Seconds between the interrupt and the kill when the code does not stop.
        cpu_seconds: CPU seconds per call (None: no limit).
        cpu_seconds_total: CPU seconds per session process (None: no limit).
        memory_bytes: Address-space limit per process (None: no limit).
        max_processes: Processes and threads the session may run at once (None: no limit).
        max_output_bytes: Output kept per call.
        max_file_bytes: Largest file the code may write (None: no limit).
        max_open_files: File descriptors per process.
        network: Whether the code may use the network.
        kill_background: Kill the processes the code started when a call ends.
        start_timeout: Seconds to wait for a new interpreter process to be ready.
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

    def replace(self, **changes: Any) -> Limits:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def for_child(self) -> dict[str, JSONValue]:
        """The limits as the child process reads them."""
        return dataclasses.asdict(self)


_CAPS: dict[str, bool] | None = None


def sandbox_capabilities() -> dict[str, bool]:
    """What the sandbox can enforce on this machine.

    Returns:
        ``{'private_uid': ..., 'network_namespace': ..., 'session_memory_cap': ...}``: the
        first two need plait to run as root (and, for the namespace, a kernel that allows
        ``unshare(CLONE_NEWNET)``); the third a writable memory cgroup hierarchy, without
        which ``memory_bytes`` holds per process only.
    """
    global _CAPS
    if _CAPS is None:
        import shutil
        import subprocess

        netns = False
        unshare = shutil.which("unshare")
        if unshare and os.geteuid() == 0:
            args = [unshare, "-n", "true"]
            try:
                netns = subprocess.run(args, capture_output=True, timeout=10).returncode == 0
            except (OSError, subprocess.SubprocessError):
                netns = False
        from . import _cgroup

        _CAPS = {
            "private_uid": os.geteuid() == 0,
            "network_namespace": netns,
            "session_memory_cap": _cgroup.available(),
        }
    return dict(_CAPS)
