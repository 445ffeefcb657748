"""`SessionPool`: one pooled `aiohttp.ClientSession` per event loop (a `PerLoop`).

Its own module so that importing the rest of `plait.utils._aio` does not import aiohttp
(plait's model clients reach plain ``http://`` servers without it).
"""

from __future__ import annotations

from collections.abc import Callable

import aiohttp

from ._aio import PerLoop

__all__ = ["SessionPool"]


class SessionPool(PerLoop[aiohttp.ClientSession]):
    """One `aiohttp.ClientSession` (with its connection pool) per event loop.

    Args:
        max_connections: Connection limit of each session (0 = unlimited); used by the
            default connector.
        trust_env: Let aiohttp read proxy settings from the environment.
        connector_factory: Makes each new session's connector (default: a
            `aiohttp.TCPConnector` limited to `max_connections`).
    """

    def __init__(
        self,
        *,
        max_connections: int = 1024,
        trust_env: bool = False,
        connector_factory: Callable[[], aiohttp.BaseConnector] | None = None,
    ) -> None:
        super().__init__(self._new_session)
        self.max_connections = max_connections
        self.trust_env = trust_env
        self._connector_factory = connector_factory or self._default_connector

    def _default_connector(self) -> aiohttp.BaseConnector:
        return aiohttp.TCPConnector(limit=self.max_connections, limit_per_host=0)

    def _new_session(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(connector=self._connector_factory(), trust_env=self.trust_env)

    def __repr__(self) -> str:
        return f"SessionPool(loops={len(self._sessions)}, max_connections={self.max_connections})"
