"""`Pool`: one sandboxed process per session, warm spares, a bound on live processes.

A session is served by the process it was given until it is reset or closed; nothing is
ever handed from one session to another: a released process is killed (with everything
it started) and replaced by a *fresh* spare, started in a background thread. So a new
session starts on a process that has already booted, and never sees another session's
variables, modules, environment or files.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from ._io import Op, Sleep, drive
from .process import SandboxError

__all__ = ["Pool", "PooledProcess"]


class PooledProcess(Protocol):
    """What a pool needs from the processes it holds."""

    def dead(self) -> bool:
        """Whether the process has exited."""
        ...

    def release(self) -> None:
        """Kill the process and everything it started."""
        ...


H = TypeVar("H", bound=PooledProcess)


class Pool(Generic[H]):
    """Sandboxed processes by session id.

    Args:
        start: Makes the op that starts one process.
        spares: How many started, unused processes to keep ready.
        max_live: The most processes alive at once (sessions + spares + starting); None: no bound.
        acquire_timeout: Seconds a new session waits for room under `max_live`.
    """

    def __init__(
        self,
        start: Callable[[], Op[H]],
        spares: int = 1,
        max_live: int | None = 64,
        acquire_timeout: float = 60.0,
    ) -> None:
        self._start = start
        self.spares = max(0, spares)
        self.max_live = max_live
        self.acquire_timeout = acquire_timeout
        self._ready: deque[H] = deque()
        self._sessions: dict[Hashable, H] = {}
        self._warming = 0
        self._starting = 0
        self._lock = threading.Lock()
        self._closed = False
        self._threads: set[threading.Thread] = set()

    # -- inspection ---------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """Whether `close` ran."""
        return self._closed

    def _live(self) -> int:
        return len(self._sessions) + len(self._ready) + self._warming + self._starting

    @property
    def live(self) -> int:
        """Processes alive or starting."""
        with self._lock:
            return self._live()

    @property
    def ready(self) -> int:
        """Spares ready to be handed to a new session."""
        with self._lock:
            return len(self._ready)

    def sessions(self) -> list[Hashable]:
        """Session ids that hold a process."""
        with self._lock:
            return list(self._sessions)

    def get(self, session_id: Hashable) -> H | None:
        """The process of `session_id`, if it has one."""
        with self._lock:
            return self._sessions.get(session_id)

    # -- sessions -------------------------------------------------------------------------------
    def acquire_op(self, session_id: Hashable) -> Op[H]:
        """The process of `session_id`: its own, else a spare, else a newly started one.

        Raises:
            SandboxError: No room under ``max_live`` within ``acquire_timeout``, or the start failed.
        """
        deadline = time.monotonic() + self.acquire_timeout
        stale: list[H] = []
        while True:
            reserved = False
            with self._lock:
                if self._closed:
                    raise SandboxError("the interpreter has been shut down")
                proc = self._take_locked(session_id, stale)
                if proc is None and (self.max_live is None or self._live() < self.max_live):
                    self._starting += 1
                    reserved = True
            for old in stale:
                old.release()
            stale.clear()
            if proc is not None:
                return proc
            if reserved:
                break
            if time.monotonic() > deadline:
                raise SandboxError(f"no room for another session: {self.max_live} interpreter processes are live")
            yield Sleep(0.02)
        try:
            proc = yield from self._start()
        finally:
            with self._lock:
                self._starting -= 1
        with self._lock:
            if not self.closed:
                self._sessions[session_id] = proc
                self._refill_locked()
                return proc
        proc.release()
        raise SandboxError("the interpreter has been shut down")

    def _take_locked(self, session_id: Hashable, stale: list[H]) -> H | None:
        proc = self._sessions.get(session_id)
        if proc is not None:
            if not proc.dead():
                return proc
            del self._sessions[session_id]
            stale.append(proc)
        while self._ready:
            spare = self._ready.popleft()
            if spare.dead():
                stale.append(spare)
                continue
            self._sessions[session_id] = spare
            self._refill_locked()
            return spare
        return None

    def release(self, session_id: Hashable) -> bool:
        """Kill the process of `session_id` (the next call starts on a fresh one); True if it had one."""
        with self._lock:
            proc = self._sessions.pop(session_id, None)
            if not self._closed:
                self._refill_locked()
        if proc is None:
            return False
        proc.release()
        return True

    def discard(self, session_id: Hashable, proc: H) -> None:
        """Forget `proc` (dead or killed) if it still serves `session_id`."""
        with self._lock:
            if self._sessions.get(session_id) is proc:
                del self._sessions[session_id]
            if not self._closed:
                self._refill_locked()
        proc.release()

    # -- spares -----------------------------------------------------------------------------------
    def prewarm(self, wait: bool = False, timeout: float = 60.0) -> None:
        """Start the spares now (optionally waiting until they are ready)."""
        with self._lock:
            self._refill_locked()
        if wait:
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                with self._lock:
                    if len(self._ready) >= self.spares or self._closed:
                        return
                    if self.max_live is not None and self._live() >= self.max_live and not self._warming:
                        return
                time.sleep(0.01)

    def _refill_locked(self) -> None:
        while len(self._ready) + self._warming < self.spares and (
            self.max_live is None or self._live() < self.max_live
        ):
            self._warming += 1
            thread = threading.Thread(target=self._warm, name="plait-sandbox-warm", daemon=True)
            self._threads.add(thread)
            thread.start()

    def _warm(self) -> None:
        proc: H | None = None
        try:
            proc = drive(self._start())
        except Exception:
            proc = None
        finally:
            with self._lock:
                self._warming -= 1
                self._threads.discard(threading.current_thread())
                kept = proc if proc is not None and not self._closed else None
                if kept is not None:
                    self._ready.append(kept)
        if proc is not None and kept is None:
            proc.release()

    # -- shutdown -----------------------------------------------------------------------------------
    def close(self, timeout: float = 30.0) -> None:
        """Kill every process of the pool (sessions and spares). Idempotent."""
        with self._lock:
            self._closed = True
            procs = list(self._sessions.values()) + list(self._ready)
            self._sessions.clear()
            self._ready.clear()
            threads = list(self._threads)
        for proc in procs:
            proc.release()
        end = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, end - time.monotonic()))
