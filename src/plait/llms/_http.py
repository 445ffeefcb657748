"""The HTTP exchanges of the model clients, written against one small interface.

`client_for` picks the client of an endpoint once: the lean HTTP/1.1 client
(`plait.llms._http1`) for plain ``http://`` URLs without a proxy or credentials (local
model servers, where the client's own CPU is what a run costs), aiohttp for everything
else (``https://``, proxies given or from the environment, ``user:password@`` URLs).
Both give a `Response`-like object with ``status``, ``headers``, ``read()`` and
``chunks()``, used as an async context manager, and both keep one pool per event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from ..utils._aio import PerLoop
from ._http1 import Connections, Limits

if TYPE_CHECKING:
    import aiohttp

__all__ = ["HTTPClient", "HTTPResponse", "Limits", "client_for"]


class HTTPResponse(Protocol):
    """A reply whose status and headers arrived; leave it (``async with``) to free its connection."""

    @property
    def status(self) -> int:
        """The HTTP status code."""

    @property
    def headers(self) -> Mapping[str, str]:
        """The reply's headers (names case-insensitive)."""

    async def read(self) -> bytes:
        """The whole body."""

    def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives."""

    async def __aenter__(self) -> HTTPResponse: ...

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class HTTPClient(Protocol):
    """Sends requests to one endpoint's origin; one connection pool per event loop."""

    async def request(
        self, method: str, url: str, body: bytes, headers: Mapping[str, str], limits: Limits
    ) -> HTTPResponse:
        """Send one request; returns once the reply's status and headers arrived."""

    async def aclose(self) -> None:
        """Close the running loop's connections; ask other live loops to close theirs."""


class LeanClient:
    """`plait.llms._http1` connections, one pool per event loop."""

    def __init__(self, url: str, max_connections: int) -> None:
        self.pool: PerLoop[Connections] = PerLoop(lambda: Connections(url, max_connections))
        self.origin = urlsplit(url)[:2]
        self._targets: dict[str, str] = {}

    async def request(
        self, method: str, url: str, body: bytes, headers: Mapping[str, str], limits: Limits
    ) -> HTTPResponse:
        target = self._targets.get(url)
        if target is None:
            parts = urlsplit(url)
            if parts[:2] != self.origin:
                raise ValueError(f"this client sends to {self.origin[0]}://{self.origin[1]} only")
            target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
            if len(self._targets) < 64:  # the chat URL and the models listing, in practice
                self._targets[url] = target
        connections = self.pool.current() or await self.pool.get()
        return await connections.request(method, target, body, headers, limits)

    async def aclose(self) -> None:
        await self.pool.aclose()

    def __repr__(self) -> str:
        return f"LeanClient({self.pool!r})"


class _AiohttpResponse:
    """An aiohttp reply behind the `HTTPResponse` interface."""

    __slots__ = ("_response", "headers", "status")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status
        self.headers: Mapping[str, str] = response.headers

    async def read(self) -> bytes:
        return await self._response.read()

    def chunks(self) -> AsyncIterator[bytes]:
        return self._response.content.iter_any()

    async def __aenter__(self) -> _AiohttpResponse:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._response.__aexit__(kind, exc, tb)


class AiohttpClient:
    """aiohttp sessions, one per event loop, through a proxy when one is set."""

    def __init__(self, *, proxy: str | None, trust_env: bool, max_connections: int) -> None:
        from ..utils._session_pool import SessionPool  # imports aiohttp: only clients that need it pay

        self.proxy = proxy
        self.pool = SessionPool(max_connections=max_connections, trust_env=trust_env)
        self._timeouts: dict[Limits, aiohttp.ClientTimeout] = {}

    async def request(
        self, method: str, url: str, body: bytes, headers: Mapping[str, str], limits: Limits
    ) -> HTTPResponse:
        timeout = self._timeouts.get(limits)
        if timeout is None:
            import aiohttp

            timeout = self._timeouts[limits] = aiohttp.ClientTimeout(
                total=limits.total, sock_connect=limits.connect, sock_read=limits.read
            )
        session = await self.pool.get()
        response = await session.request(
            method, url, data=body or None, headers=headers, timeout=timeout, proxy=self.proxy
        )
        return _AiohttpResponse(response)

    async def aclose(self) -> None:
        await self.pool.aclose()

    def __repr__(self) -> str:
        return f"AiohttpClient({self.pool!r})"


def client_for(url: str, *, proxy: str | None, trust_env: bool, max_connections: int) -> HTTPClient:
    """The client for requests to `url`'s origin (see the module's text for which)."""
    parts = urlsplit(url)
    if parts.scheme == "http" and proxy is None and not trust_env and not parts.username and not parts.password:
        return LeanClient(url, max_connections)
    return AiohttpClient(proxy=proxy, trust_env=trust_env, max_connections=max_connections)
