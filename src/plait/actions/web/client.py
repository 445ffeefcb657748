"""`WebClient`: the one IO path of the web tools (aiohttp), and `SyncBridge` for sync callers.

`WebClient.send` keeps one pooled ``aiohttp.ClientSession`` per event loop, applies a
timeout, retries connection errors, timeouts, 408/425/429 and 5xx with backoff (honouring
``Retry-After``), caches successful responses, and, with a `URLGuard`, checks every URL and
every resolved address (redirects included). Sync tools run the same coroutines on a
private loop thread through `SyncBridge`, so the two modes never drift apart.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import Coroutine, Mapping, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urljoin

import aiohttp
from typing_extensions import TypedDict, Unpack

from ...exceptions import HTTPStatusError, UserError, WebConnectionError, WebError, WebTimeoutError
from ...utils._aio import LoopThread
from ...utils._session_pool import SessionPool
from .errors import redact
from .messages import HTTPRequest, HTTPResponse
from .policy import RetryConfig, TTLCache

if TYPE_CHECKING:
    from .ssrf import URLGuard

__all__ = ["RETRYABLE_STATUS", "SyncBridge", "WebClient"]

logger = logging.getLogger("plait.actions.web")

T = TypeVar("T")

DEFAULT_USER_AGENT = "Mozilla/5.0 (compatible; plait-web/0.1; +https://pypi.org/project/plait/)"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


async def _read_limited(resp: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(64 * 1024):
        chunks.append(chunk)
        size += len(chunk)
        if limit and size >= limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return None


_RAW_LIMIT = 64 * 1024
"""The most bytes of an error answer's body an `HTTPStatusError` keeps (``raw``)."""


def _status_phrase(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _error_detail(body: bytes) -> str:
    """The server's own error text, if the body has one (JSON ``message``/``error`` fields)."""
    text = body[:4096].decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:300]
    for path in (("error", "message"), ("Response", "Error", "Message"), ("message",), ("error",), ("errorDetails",)):
        node: object = data
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if isinstance(node, str) and node:
            return node[:300]
        if isinstance(node, list) and node:
            return "; ".join(map(str, node))[:300]
    return " ".join(text.split())[:300]


class ClientOptions(TypedDict, total=False):
    """The `WebClient` arguments `WebClient.build` passes on."""

    guard: URLGuard | None
    max_bytes: int
    max_redirects: int
    proxy: str | None
    user_agent: str


class WebClient:
    """Sends `HTTPRequest`s: pooled sessions, timeout, retries, TTL cache, optional SSRF guard.

    Args:
        timeout: Seconds for one attempt (connect + read).
        retry: The retry policy (connection errors, timeouts, 408/425/429/5xx).
        cache: A cache of successful responses (None: no caching).
        guard: Checks every URL and every resolved address (redirects included); None for
            trusted endpoints configured by the developer.
        max_bytes: Bodies are cut after this many bytes (0: no limit).
        max_redirects: Redirects followed.
        proxy: An HTTP proxy URL for every request.
        user_agent: The ``User-Agent`` header, unless a request sets its own.
    """

    def __init__(
        self,
        *,
        timeout: float = 5.0,
        retry: RetryConfig | None = None,
        cache: TTLCache[str, HTTPResponse] | None = None,
        guard: URLGuard | None = None,
        max_bytes: int = 5 * 1024 * 1024,
        max_redirects: int = 5,
        proxy: str | None = None,
        user_agent: str = DEFAULT_USER_AGENT,
    ) -> None:
        if guard is not None and proxy is not None:
            raise UserError("a URL guard cannot check the addresses a proxy connects to; use one or the other")
        self.timeout = float(timeout)
        self.retry = retry or RetryConfig()
        self.cache = cache
        self.guard = guard
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.proxy = proxy
        self.user_agent = user_agent
        self._sessions = SessionPool(connector_factory=self._connector)

    @classmethod
    def build(
        cls,
        *,
        timeout: float,
        max_retry: int,
        backoff: float = 0.5,
        cache_ttl: float = 0.0,
        cache_size: int = 100,
        **options: Unpack[ClientOptions],
    ) -> WebClient:
        """A client from a tool's usual knobs: retries, and a cache of successful responses.

        The cache keeps `cache_size` responses for `cache_ttl` seconds (nothing when `cache_ttl` is 0).

        Args:
            timeout: Seconds for one attempt.
            max_retry: Attempts per request.
            backoff: The first wait between attempts, in seconds (doubles each time).
            cache_ttl: Seconds a successful response is reused.
            cache_size: Most responses cached.
            **options: The other `WebClient` arguments (``guard``, ``max_bytes``, ``proxy``...).
        """
        return cls(
            timeout=timeout,
            retry=RetryConfig(max_attempts=max_retry, backoff=backoff),
            cache=TTLCache(maxsize=cache_size if cache_ttl > 0 else 0, ttl=cache_ttl),
            **options,
        )

    def _connector(self) -> aiohttp.BaseConnector:
        resolver = self.guard.resolver() if self.guard is not None else None
        return aiohttp.TCPConnector(limit=100, resolver=resolver, ttl_dns_cache=60 if resolver is None else None)

    async def send(self, request: HTTPRequest) -> HTTPResponse:
        """Send `request` (cached, retried) and return a 2xx response.

        Raises:
            HTTPStatusError: The final answer was an error status.
            WebTimeoutError: Every attempt timed out.
            WebConnectionError: The server could not be reached.
            BlockedURLError: The guard refused the URL (never retried).
        """
        key = request.cache_key() if self.cache is not None else ""
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                return cached
        attempt = 0
        while True:
            attempt += 1
            retry_after: float | None = None
            try:
                response = await self._send_once(request)
            except (WebTimeoutError, WebConnectionError) as exc:
                error: WebError = exc
            else:
                if response.status < 400:
                    if self.cache is not None:
                        self.cache.set(key, response)
                    return response
                error = self._status_error(request, response)
                if response.status not in RETRYABLE_STATUS:
                    raise error
                retry_after = _retry_after(response.headers)
            if attempt >= self.retry.max_attempts:
                raise error
            wait = self.retry.delay(attempt, retry_after)
            logger.debug("%s failed (%s); retry %d/%d in %.2fs", request, error, attempt, self.retry.max_attempts, wait)
            await asyncio.sleep(wait)

    def _status_error(self, request: HTTPRequest, response: HTTPResponse) -> HTTPStatusError:
        detail = redact(_error_detail(response.body), request.secrets)
        message = f"{request.label} answered HTTP {_status_phrase(response.status)}"
        if detail:
            message += f": {detail}"
        raw = redact(response.body[:_RAW_LIMIT].decode("utf-8", errors="replace"), request.secrets)
        return HTTPStatusError(message, status=response.status, body=detail, raw=raw)

    async def _send_once(self, request: HTTPRequest) -> HTTPResponse:
        session = await self._sessions.get()
        method, url, body = request.method, request.full_url, request.body
        headers = dict(request.headers)
        headers.setdefault("User-Agent", self.user_agent)
        for _ in range(self.max_redirects + 1):
            if self.guard is not None:
                self.guard.check_url(url)
            try:
                async with session.request(
                    method,
                    url,
                    headers=headers,
                    data=body,
                    timeout=aiohttp.ClientTimeout(total=self.timeout),
                    allow_redirects=self.guard is None,
                    max_redirects=self.max_redirects,
                    proxy=self.proxy,
                ) as resp:
                    location = resp.headers.get("Location")
                    if self.guard is not None and resp.status in _REDIRECTS and location:
                        url = urljoin(url, location)
                        if resp.status == 303 or (resp.status in (301, 302) and method == "POST"):
                            method, body = "GET", None
                        continue
                    data, truncated = await _read_limited(resp, self.max_bytes)
                    return HTTPResponse(
                        status=resp.status,
                        url=str(resp.url),
                        headers={k.lower(): v for k, v in resp.headers.items()},
                        body=data,
                        truncated=truncated,
                    )
            except (asyncio.TimeoutError, TimeoutError):  # distinct classes before Python 3.11
                raise WebTimeoutError(f"{request.label} did not answer within {self.timeout:g} s") from None
            except aiohttp.ClientConnectorError as exc:
                blocked = self.guard.blocked_error(exc, url) if self.guard is not None else None
                if blocked is not None:
                    raise blocked from None
                raise WebConnectionError(
                    f"could not connect to {request.label}: {redact(str(exc.os_error), request.secrets)}"
                ) from None
            except aiohttp.TooManyRedirects:
                raise WebConnectionError(f"{request.label}: too many redirects") from None
            except (aiohttp.ClientError, OSError) as exc:
                detail = redact(str(exc) or type(exc).__name__, request.secrets)
                raise WebConnectionError(f"the connection to {request.label} failed: {detail}") from None
        raise WebConnectionError(f"{request.label}: more than {self.max_redirects} redirects")

    async def aclose(self) -> None:
        """Close this client's session on the running loop (other loops close theirs at shutdown)."""
        await self._sessions.aclose()

    def __repr__(self) -> str:
        return f"WebClient(timeout={self.timeout:g}, guard={self.guard!r})"


class SyncBridge:
    """Runs a tool's async core for its sync API on a private loop thread (started on first use).

    The thread and the clients' sessions on it are closed when `close` is called or when
    `owner` is garbage-collected.

    Args:
        owner: The object whose lifetime bounds the thread.
        clients: The clients whose sessions to close with it.
        name: The thread name.
    """

    def __init__(self, owner: object, clients: Sequence[WebClient], name: str = "plait-web") -> None:
        self._io = LoopThread(name=name)
        self._clients = list(clients)
        self._finalizer = weakref.finalize(owner, SyncBridge._shutdown, self._io, self._clients)

    @staticmethod
    def _shutdown(io: LoopThread, clients: list[WebClient]) -> None:
        async def close_all() -> None:
            for client in clients:
                await client.aclose()

        io.close(close_all)

    def run(self, coro: Coroutine[object, object, T]) -> T:
        """Run `coro` on the private loop and block until it is done."""
        return self._io.run(coro)

    def close(self) -> None:
        """Close the clients' sessions and stop the thread (a later `run` starts it again)."""
        SyncBridge._shutdown(self._io, self._clients)
