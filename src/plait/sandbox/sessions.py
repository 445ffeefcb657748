"""`Sessions`: what an interpreter tool owns — a pool of sandboxed processes keyed by session.

The tools in `plait.actions` (``PythonInterpreter``, ``IPythonInteractive``,
``IPythonInterpreter`` and their async twins) each hold one `Sessions`. Its methods return
ops (`plait.sandbox._io`), so a sync tool runs them with `drive` and an async tool with
`adrive`: the logic exists once. Calls of one session are serialised (a per-session lock
of the caller's kind); calls of different sessions run concurrently.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar, cast

from ..types import JSONValue
from ._io import Op
from .kernel import Kernel, start_kernel_op
from .limits import Limits
from .pool import Pool, PooledProcess
from .process import Child, new_session_dir, spawn_op
from .worker import ExecResult, exec_op

__all__ = ["SessionProcess", "Sessions", "lazy_sessions"]

_CREATE = threading.Lock()


class SessionProcess(PooledProcess, Protocol):
    """What a session runs on: a pooled process with a private working directory."""

    @property
    def dir(self) -> str:
        """The process's private working directory."""
        ...


H = TypeVar("H", bound=SessionProcess)


def _cleanup(pool: Pool[H], root: str) -> None:
    pool.close()
    shutil.rmtree(root, ignore_errors=True)


class Sessions(Generic[H]):
    """Sandboxed processes of one tool, one per session.

    Args:
        kind: ``'worker'`` (plain Python, `exec_op`) or ``'kernel'`` (Jupyter, `Kernel.execute_op`).
        limits: The limits every process of this tool runs under.
        spares: Started processes kept ready for new sessions.
        max_live: The most live processes (None: no bound).
        env: Extra environment variables for the processes.
        root: Where the per-session directories are made (default: a new temporary directory,
            removed at shutdown).
        readable: Host paths the processes may read (as root they see nothing else of the
            host but what the interpreter needs).
    """

    def __init__(
        self,
        kind: str,
        limits: Limits,
        spares: int = 1,
        max_live: int | None = 64,
        env: dict[str, str] | None = None,
        root: str | None = None,
        readable: Sequence[str] = (),
    ) -> None:
        self.kind = kind
        self.limits = limits
        self.env = dict(env or {})
        self.readable = list(readable)
        if root is None:
            root = tempfile.mkdtemp(prefix=f"plait-{kind}-")
        else:
            os.makedirs(root, exist_ok=True)
        os.chmod(root, 0o711)  # session uids may traverse, not list
        self.root = root
        self.pool: Pool[H] = Pool(self._start, spares=spares, max_live=max_live, acquire_timeout=limits.start_timeout)
        self._locks: dict[Hashable, threading.Lock] = {}
        self._alocks: dict[Hashable, asyncio.Lock] = {}
        self._locks_guard = threading.Lock()
        self._finalizer: weakref.finalize[[Pool[H], str], Sessions[H]]
        self._finalizer = weakref.finalize(self, _cleanup, self.pool, root)

    def _start(self) -> Op[H]:
        directory = new_session_dir(self.root, "s")
        if self.kind == "kernel":  # a kernel tool's sessions are Sessions[Kernel], a worker tool's Sessions[Child]
            return cast("Op[H]", start_kernel_op(directory, self.limits, self.env, self.readable))
        return cast("Op[H]", spawn_op("worker", directory, self.limits, env=self.env, readable=self.readable))

    # -- locks ------------------------------------------------------------------------------
    def lock(self, session_id: Hashable) -> threading.Lock:
        """The lock that serialises sync calls of `session_id`."""
        with self._locks_guard:
            return self._locks.setdefault(session_id, threading.Lock())

    def alock(self, session_id: Hashable) -> asyncio.Lock:
        """The lock that serialises async calls of `session_id`."""
        with self._locks_guard:
            return self._alocks.setdefault(session_id, asyncio.Lock())

    # -- calls --------------------------------------------------------------------------------
    def run_op(self, session_id: Hashable, call: Callable[[H], Op[ExecResult]]) -> Op[ExecResult]:
        """Run `call` on the process of `session_id` (started or taken from the spares as needed)."""
        proc = yield from self.pool.acquire_op(session_id)
        result = yield from call(proc)
        if result.restarted:
            self.pool.discard(session_id, proc)
        return result

    def exec_op(
        self: Sessions[Child], session_id: Hashable, request: Mapping[str, JSONValue], timeout: float | None = None
    ) -> Op[ExecResult]:
        """Run a worker request for `session_id`."""
        return self.run_op(session_id, lambda child: exec_op(child, request, self.limits, timeout))

    def execute_op(
        self: Sessions[Kernel], session_id: Hashable, code: str, timeout: float | None = None
    ) -> Op[ExecResult]:
        """Execute code on the kernel of `session_id`."""
        return self.run_op(session_id, lambda kernel: kernel.execute_op(code, self.limits, timeout))

    def once_op(
        self: Sessions[Child], request: Mapping[str, JSONValue], timeout: float | None = None
    ) -> Op[ExecResult]:
        """Run `request` on a fresh process that is killed afterwards (stateless calls)."""
        token = object()
        try:
            return (yield from self.exec_op(token, request, timeout))
        finally:
            self.pool.release(token)

    # -- lifecycle -------------------------------------------------------------------------------
    def directory(self, session_id: Hashable) -> str | None:
        """The private working directory of `session_id` (None before its first call)."""
        proc = self.pool.get(session_id)
        return None if proc is None else str(proc.dir)

    def close_session(self, session_id: Hashable) -> bool:
        """Kill the process of `session_id` and remove its directory; True if it had one."""
        with self._locks_guard:
            self._locks.pop(session_id, None)
            self._alocks.pop(session_id, None)
        return self.pool.release(session_id)

    def reset(self, session_id: Hashable | None = None) -> None:
        """Forget the state of `session_id` (of every session when None)."""
        targets = self.pool.sessions() if session_id is None else [session_id]
        for sid in targets:
            self.pool.release(sid)

    def prewarm(self, wait: bool = False) -> None:
        """Start the spare processes now."""
        self.pool.prewarm(wait=wait, timeout=self.limits.start_timeout)

    def shutdown(self) -> None:
        """Kill every process of this tool and remove its directories. Idempotent."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        """Whether `shutdown` ran."""
        return not self._finalizer.alive


def lazy_sessions(owner: object, factory: Callable[[], Sessions[H]]) -> Sessions[H]:
    """``owner._sessions``, made by `factory` on first use (once, even under concurrent first calls)."""
    current: Sessions[H] | None = owner.__dict__.get("_sessions")
    if current is not None and not current.closed:
        return current
    with _CREATE:
        current = owner.__dict__.get("_sessions")
        if current is None or current.closed:
            current = factory()
            owner.__dict__["_sessions"] = current
        return current
