"""The MCP sessions a Streamable HTTP endpoint keeps: a cap per tenant under one ceiling (private).

A tenant is who a request's bearer token names (`plait.distributed.http_serve.access`): each
named token is one tenant; one token, or none, makes every client the same tenant ``''``.
One tenant must never end or crowd out another's sessions, so:

* **per tenant**, at most `SessionPool.per_tenant` sessions. A tenant at its cap that opens
  another ends its own least recently used *idle* session (no request in flight) to make
  room, as a client that never ends its sessions expects; when every one of its sessions
  has a request in flight, the new one is refused (`NoRoom`, HTTP 429).
* **overall**, at most `SessionPool.total`. By default the ceiling is split evenly between
  the tenants (``total // tenants`` each, at least one), so it is not reached while there
  are no more tenants than sessions allowed; when caps are set
  higher than that and it is reached, a new session is refused (`NoRoom`, HTTP 503):
  another tenant's session is never ended for it.
"""

from __future__ import annotations

from collections import OrderedDict

from ...exceptions import UserError
from .server import ServerSession

__all__ = ["NoRoom", "SessionPool"]


class NoRoom(Exception):
    """No room for a new session.

    Attributes:
        status: The HTTP status to answer with (429: the tenant's own cap, 503: the server's).
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class SessionPool:
    """Live sessions by tenant, each tenant's least recently used first.

    Args:
        total: The most sessions kept at once.
        per_tenant: The most sessions one tenant keeps at once.

    Raises:
        UserError: A cap under 1, or `per_tenant` over `total`.
    """

    def __init__(self, total: int, per_tenant: int) -> None:
        for name, value in (("max_sessions", total), ("max_sessions_per_tenant", per_tenant)):
            if value < 1:
                raise UserError(f"{name} must be at least 1, not {value}")
        if per_tenant > total:
            raise UserError(f"max_sessions_per_tenant ({per_tenant}) exceeds max_sessions ({total})")
        self.total = total
        self.per_tenant = per_tenant
        self._tenants: dict[str, OrderedDict[str, ServerSession]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def get(self, owner: str, session_id: str) -> ServerSession | None:
        """`owner`'s session `session_id`, now its most recently used (None: unknown, ended or another's)."""
        kept = self._tenants.get(owner)
        session = kept.get(session_id) if kept is not None else None
        if kept is not None and session is not None:
            kept.move_to_end(session_id)
        return session

    def admit(self, session: ServerSession) -> ServerSession | None:
        """Keep `session`; returns the session of the same tenant it replaces, for the caller to close.

        Raises:
            NoRoom: Its tenant is at its cap with a request in flight in every session, or the
                server is at its ceiling.
        """
        kept = self._tenants.setdefault(session.owner, OrderedDict())
        evicted = None
        if len(kept) >= self.per_tenant:
            evicted = next((old for old in kept.values() if not old.calls), None)
            if evicted is None:
                raise NoRoom(429, f"this tenant's {self.per_tenant} MCP sessions are all busy; end one, or retry later")
            del kept[evicted.id]
            self._count -= 1
        if self._count >= self.total:
            raise NoRoom(503, f"the server holds its maximum of {self.total} MCP sessions; retry later")
        kept[session.id] = session
        self._count += 1
        return evicted

    def remove(self, session: ServerSession) -> None:
        """Forget `session` (ended by its client)."""
        kept = self._tenants.get(session.owner)
        if kept is not None and kept.pop(session.id, None) is not None:
            self._count -= 1

    def drain(self) -> list[ServerSession]:
        """Every session, forgotten (the server is stopping)."""
        sessions = [session for kept in self._tenants.values() for session in kept.values()]
        self._tenants.clear()
        self._count = 0
        return sessions
