"""The search backend contract, its registry and the helpers every backend shares.

A backend is two pure functions, `BaseSearch.build_request` (query -> `HTTPRequest`) and
`BaseSearch.parse_response` (`HTTPResponse` -> hits), over one shared IO path
(`BaseSearch.asearch`; `search` for sync callers). Subclasses register themselves under
their class name; `get_searcher` looks them up (no ``eval``).
"""

from __future__ import annotations

import asyncio
import html
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import ClassVar
from urllib.parse import urlsplit

from typing_extensions import TypedDict

from ....exceptions import UserError
from ....types import JSONValue
from ....utils.names import did_you_mean
from ..client import SyncBridge, WebClient
from ..messages import HTTPRequest, HTTPResponse
from ..policy import RetryConfig, TTLCache
from ..tool import env_or, require

__all__ = [
    "DEFAULT_BLACK_LIST",
    "SEARCHERS",
    "BaseSearch",
    "SearchHit",
    "SearchOptions",
    "clean_snippet",
    "get_searcher",
    "register_searcher",
    "search_all",
    "searcher_names",
]

DEFAULT_BLACK_LIST: tuple[str, ...] = ("youtube.com", "bilibili.com", "researchgate.net")

SearchHit = tuple[str, str, str]
"""One search hit: ``(url, summary, title)``."""

SEARCHERS: dict[str, type[BaseSearch]] = {}
_LOCK = threading.Lock()
_TAGS = re.compile(r"<[^>]+>")
_WS = re.compile(r"\s+")


def register_searcher(cls: type[BaseSearch], name: str | None = None) -> type[BaseSearch]:
    """Register a search backend under `name` (its class name by default); returns it."""
    with _LOCK:
        SEARCHERS[name or cls.__name__] = cls
    return cls


def get_searcher(name: str) -> type[BaseSearch]:
    """The backend registered as `name`.

    Raises:
        UserError: No backend has that name; the message lists the close matches.
    """
    cls = SEARCHERS.get(name)
    if cls is None:
        hint = did_you_mean(str(name), list(SEARCHERS), n=3) or f"known: {', '.join(sorted(SEARCHERS))}"
        raise UserError(f"no search backend named {name!r}; {hint}")
    return cls


def clean_snippet(text: object) -> str:
    """A snippet as plain text: tags removed, entities decoded, whitespace collapsed."""
    if not isinstance(text, str):
        return "" if text is None else str(text)
    return _WS.sub(" ", html.unescape(_TAGS.sub("", text))).strip()


class SearchOptions(TypedDict, total=False):
    """The `BaseSearch` options every backend passes on (``**kwargs`` of the backends)."""

    timeout: float
    max_retry: int
    backoff: float
    cache_ttl: float
    cache_size: int
    proxy: str | Mapping[str, str] | None


class BaseSearch(ABC):
    """A web search backend (subclasses implement `build_request` and `parse_response`).

    Args:
        topk: Most results returned per query.
        black_list: Result URLs containing any of these strings are dropped.
        timeout: Seconds per HTTP attempt.
        max_retry: Attempts per query (timeouts, connection errors, 429 and 5xx are retried).
        backoff: First wait between attempts, in seconds (doubles each time).
        cache_ttl: Seconds a query's results are reused (0: no cache).
        cache_size: Most queries cached.
        proxy: An HTTP proxy URL, or Lagent's ``requests``-style ``{'http': url, 'https': url}``
            (its ``http`` entry, else its ``https`` one, as Lagent's async searchers use it).
    """

    service: ClassVar[str] = "search"
    env_key: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        register_searcher(cls)

    def __init__(
        self,
        topk: int = 3,
        black_list: Iterable[str] | None = DEFAULT_BLACK_LIST,
        *,
        timeout: float = 10.0,
        max_retry: int = 3,
        backoff: float = 0.5,
        cache_ttl: float = 600.0,
        cache_size: int = 100,
        proxy: str | Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(proxy, Mapping):
            proxy = proxy.get("http") or proxy.get("https") or None
        if topk < 1:
            raise UserError(f"topk must be at least 1, got {topk}")
        if max_retry < 1:
            raise UserError(f"max_retry must be at least 1, got {max_retry}")
        self.topk = topk
        self.black_list = [b for b in (black_list or ()) if b]
        self.client = WebClient(
            timeout=timeout, retry=RetryConfig(max_attempts=max_retry, backoff=backoff), proxy=proxy
        )
        self._cache: TTLCache[str, dict[int, dict[str, str]]] = TTLCache(
            maxsize=cache_size if cache_ttl > 0 else 0, ttl=cache_ttl
        )
        self._bridge: SyncBridge | None = None
        self._bridge_lock = threading.Lock()

    def _required_key(self, explicit: str | None) -> str:
        """The backend's key: `explicit` when given, else ``$<env_key>``.

        Raises:
            UserError: Neither is set.
        """
        return require(env_or(explicit, self.env_key), f"a {self.service} API key (api_key=)", self.env_key)

    def _use_key(self, api_key: str | None, search_type: str, search_types: Collection[str]) -> None:
        """Set up a keyed backend: its `search_type` (one of `search_types`) and its key (see `_required_key`).

        Raises:
            UserError: An unknown search type, or no key.
        """
        if search_type not in search_types:
            raise UserError(
                f"{type(self).__name__} search_type must be one of {sorted(search_types)}, got {search_type!r}"
            )
        self._api_key = self._required_key(api_key)
        self.search_type = search_type

    def _keyed_request(
        self,
        method: str,
        url: str,
        key_header: str,
        *,
        params: Mapping[str, object] | None = None,
        json_body: JSONValue = None,
        headers: Mapping[str, str] | None = None,
    ) -> HTTPRequest:
        """A request of a keyed backend (see `_use_key`): the key goes in `key_header`, before `headers`.

        The key is redacted from every error about the request.
        """
        return HTTPRequest.build(
            method,
            url,
            params=params,
            json_body=json_body,
            headers={key_header: self._api_key, **(headers or {})},
            secrets=[self._api_key],
            service=self.service,
        )

    # -- the two pure halves (per backend) ----------------------------------------------------
    @abstractmethod
    def build_request(self, query: str) -> HTTPRequest:
        """The HTTP request that searches `query`."""

    @abstractmethod
    def parse_response(self, response: HTTPResponse) -> list[SearchHit]:
        """The hits in a successful response, best first.

        Raises:
            APIResponseError: The body is not a valid answer (or reports an error).
        """

    # -- shared logic -------------------------------------------------------------------------
    def filter_results(self, hits: Iterable[SearchHit]) -> dict[int, dict[str, str]]:
        """Numbered ``{url, summ, title}`` results: black list and ``.pdf`` links dropped, at most `topk`."""
        results: dict[int, dict[str, str]] = {}
        for url, summ, title in hits:
            if any(blocked in url for blocked in self.black_list):
                continue
            if urlsplit(url).path.lower().endswith(".pdf"):
                continue
            results[len(results)] = {"url": url, "summ": summ, "title": title}
            if len(results) >= self.topk:
                break
        return results

    async def asearch(self, query: str) -> dict[int, dict[str, str]]:
        """Search `query` (cached for ``cache_ttl`` seconds).

        Raises:
            WebError: The request failed (see `plait.actions.web.errors`).
        """
        cached = self._cache.get(query)
        if cached is not None:
            return {i: dict(r) for i, r in cached.items()}
        response = await self.client.send(self.build_request(query))
        results = self.filter_results(self.parse_response(response))
        self._cache.set(query, results)
        return {i: dict(r) for i, r in results.items()}

    def search(self, query: str) -> dict[int, dict[str, str]]:
        """Sync `asearch` (runs on this searcher's private IO thread)."""
        with self._bridge_lock:
            if self._bridge is None:
                self._bridge = SyncBridge(self, [self.client], name=f"plait-{type(self).__name__}")
        return self._bridge.run(self.asearch(query))

    async def aclose(self) -> None:
        """Close the HTTP session of the running loop."""
        await self.client.aclose()

    def _json(self, response: HTTPResponse) -> JSONValue:
        return response.json(self.service)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(topk={self.topk})"


def searcher_names() -> Sequence[str]:
    """The registered backend names."""
    with _LOCK:
        return sorted(SEARCHERS)


async def search_all(searcher: BaseSearch, queries: Sequence[str]) -> list[dict[int, dict[str, str]] | BaseException]:
    """Search every query concurrently; each entry is the results or the exception it raised."""
    return list(await asyncio.gather(*(searcher.asearch(q) for q in queries), return_exceptions=True))
