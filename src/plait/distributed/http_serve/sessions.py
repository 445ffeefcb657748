"""Which sessions a served agent keeps in memory, per tenant, and when they leave it (private).

`SessionTable` notes every session a request uses, by tenant, most recently used last. A
session unused for ``ttl`` seconds is dropped from memory by the server's sweep, and a
tenant over ``max_per_tenant`` sessions drops its own least recently used ones; a session
that a request is using is never dropped. Dropping is the agent's `AgentModule.evict`: with
a `SessionStore` attached the session stays stored and is read back on its next request;
without one it is forgotten. One tenant's sessions never make room for another's.

Everything runs on the server's event loop: no lock.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator

from ...types import SessionId

__all__ = ["SessionTable"]

logger = logging.getLogger(__name__)


class _Entry:
    __slots__ = ("busy", "used")

    def __init__(self, used: float) -> None:
        self.used = used
        self.busy = 0


class SessionTable:
    """The sessions a server holds in memory (see the module docstring).

    Args:
        evict: Drops a session from memory; False when it cannot now (a call is running on it).
        ttl: Seconds a session may stay unused (None: no limit).
        max_per_tenant: Sessions one tenant keeps at once (None: no cap).
        clock: The monotonic clock (seconds).
    """

    def __init__(
        self,
        evict: Callable[[SessionId], bool],
        ttl: float | None = None,
        max_per_tenant: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.evict = evict
        self.ttl = ttl
        self.max_per_tenant = max_per_tenant
        self.clock = clock
        self.evicted = 0
        self._tenants: dict[str, OrderedDict[SessionId, _Entry]] = {}

    @property
    def enabled(self) -> bool:
        """Whether sessions ever leave memory (a ttl or a cap)."""
        return self.ttl is not None or self.max_per_tenant is not None

    def __len__(self) -> int:
        return sum(len(sessions) for sessions in self._tenants.values())

    def __repr__(self) -> str:
        held, cap = len(self), self.max_per_tenant
        return f"SessionTable(held={held}, evicted={self.evicted}, ttl={self.ttl}, max_per_tenant={cap})"

    def held(self, tenant: str = "") -> list[SessionId]:
        """A tenant's sessions in memory, least recently used first."""
        return list(self._tenants.get(tenant, ()))

    @contextlib.contextmanager
    def use(self, tenant: str, session: SessionId) -> Iterator[None]:
        """A request uses `session` of `tenant` while inside: never dropped then, most recently used after."""
        if not self.enabled:
            yield
            return
        entry = self._note(tenant, session)
        entry.busy += 1
        try:
            yield
        finally:
            entry.busy -= 1
            entry.used = self.clock()
            sessions = self._tenants.setdefault(tenant, OrderedDict())
            sessions[session] = entry  # back in, had a DELETE dropped it meanwhile
            sessions.move_to_end(session)
            self._fit(tenant)

    def touch(self, tenant: str, session: SessionId) -> None:
        """A request read `session`: noted when new (read back from a store); a read does not count as use."""
        if self.enabled and session not in self._tenants.get(tenant, {}):
            self._note(tenant, session)
            self._fit(tenant)

    def forget(self, tenant: str, session: SessionId) -> None:
        """`session` was deleted."""
        sessions = self._tenants.get(tenant)
        if sessions is not None:
            entry = sessions.get(session)
            if entry is not None and not entry.busy:
                del sessions[session]
            if not sessions:
                del self._tenants[tenant]

    def sweep(self) -> int:
        """Drop every idle session unused for `ttl` seconds; how many were dropped."""
        if self.ttl is None:
            return 0
        cutoff = self.clock() - self.ttl
        dropped = 0
        for tenant in list(self._tenants):
            sessions = self._tenants[tenant]
            stale = []
            for session, entry in sessions.items():  # least recently used first
                if entry.used > cutoff:
                    break
                if not entry.busy:
                    stale.append(session)
            dropped += sum(self._drop(tenant, session) for session in stale)
        return dropped

    def _note(self, tenant: str, session: SessionId) -> _Entry:
        """The session's entry, noted as used now (made room for first when it is new and the tenant is full)."""
        sessions = self._tenants.get(tenant)
        entry = sessions.get(session) if sessions is not None else None
        if entry is None:
            if self.max_per_tenant is not None:
                self._fit(tenant, self.max_per_tenant - 1)
            entry = self._tenants.setdefault(tenant, OrderedDict())[session] = _Entry(self.clock())
        else:
            entry.used = self.clock()
            self._tenants[tenant].move_to_end(session)
        return entry

    def _fit(self, tenant: str, room: int | None = None) -> None:
        """Drop the tenant's least recently used idle sessions until it holds at most `room` (its cap)."""
        cap = self.max_per_tenant if room is None else room
        sessions = self._tenants.get(tenant)
        if cap is None or sessions is None or len(sessions) <= cap:
            return
        idle = [session for session, entry in sessions.items() if not entry.busy]
        for session in idle[: len(sessions) - cap]:
            self._drop(tenant, session)

    def _drop(self, tenant: str, session: SessionId) -> bool:
        sessions = self._tenants[tenant]
        if not self.evict(session):
            sessions.move_to_end(session)  # a call outside the server's requests holds it: later
            return False
        del sessions[session]
        if not sessions:
            del self._tenants[tenant]
        self.evicted += 1
        logger.debug("session %s dropped from memory", session)
        return True
