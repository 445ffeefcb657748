"""Web search backends for `WebBrowser`, picked by name from a registry (no ``eval``).

Backends: `DuckDuckGoSearch` (DuckDuckGo's HTML endpoint, no key), `BingSearch` (Bing Web /
News Search v7), `BraveSearch`, `GoogleSearch` (serper.dev), `TencentSearch` (Tencent Cloud,
TC3-HMAC-SHA256 signed), `SearxngSearch` (a self-hosted SearXNG). Each returns
``{0: {'url', 'summ', 'title'}, ...}``: black-listed domains and PDF links dropped, at most
``topk`` results, answers cached per query for ``cache_ttl`` seconds.

Register your own backend by subclassing `BaseSearch` (registered under its class name) or
with `register_searcher`. Keys: an explicit ``api_key=`` always wins; the environment
variable named by the class's ``env_key`` is only a fallback. Keys never appear in logs,
errors or results.
"""

from __future__ import annotations

from .base import (
    DEFAULT_BLACK_LIST,
    SEARCHERS,
    BaseSearch,
    SearchHit,
    clean_snippet,
    get_searcher,
    register_searcher,
    search_all,
    searcher_names,
)
from .bing import BingSearch
from .brave import BraveSearch
from .duckduckgo import DuckDuckGoSearch
from .searxng import SearxngSearch
from .serper import GoogleSearch, serper_hits
from .tencent import TencentSearch

__all__ = [
    "DEFAULT_BLACK_LIST",
    "SEARCHERS",
    "BaseSearch",
    "BingSearch",
    "BraveSearch",
    "DuckDuckGoSearch",
    "GoogleSearch",
    "SearchHit",
    "SearxngSearch",
    "TencentSearch",
    "clean_snippet",
    "get_searcher",
    "register_searcher",
    "search_all",
    "searcher_names",
    "serper_hits",
]
