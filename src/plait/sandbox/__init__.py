"""Process-isolated, killable execution of untrusted code: plait's sandbox engine.

The pieces, bottom up:

* `Limits`: what one session's code may use (time, CPU, memory, processes, output, files,
  network), with safe defaults;
* a fork server (``process.get_zygote``) that starts confined processes in milliseconds,
  each under a private uid when plait runs as root;
* workers (`exec_op`) for plain Python and Jupyter kernels (`start_kernel_op`,
  `Kernel.execute_op`), written as sans-IO ops run by `drive` (sync) or `adrive` (async);
* `Pool`: one process per session, warm spares, a bound on live processes; a process is
  never handed from one session to another.

The tools built on it live in `plait.actions` (``PythonInterpreter``,
``IPythonInteractive``, ``IPythonInterpreter`` and their async twins).
"""

from __future__ import annotations

from ._io import Op, Sleep, Wait, adrive, drive
from .kernel import Kernel, clean_traceback, start_kernel_op
from .limits import Limits, sandbox_capabilities
from .pool import Pool
from .process import Child, SandboxError, get_zygote, shutdown_zygote, spawn_op
from .worker import ExecResult, exec_op

__all__ = [
    "Child",
    "ExecResult",
    "Kernel",
    "Limits",
    "Op",
    "Pool",
    "SandboxError",
    "Sleep",
    "Wait",
    "adrive",
    "clean_traceback",
    "drive",
    "exec_op",
    "get_zygote",
    "sandbox_capabilities",
    "shutdown_zygote",
    "spawn_op",
    "start_kernel_op",
]
