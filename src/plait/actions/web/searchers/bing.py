"""Bing Web Search / Bing News Search API v7."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar

from typing_extensions import Unpack

from ....exceptions import APIResponseError
from ....types import JSONValue
from ..messages import HTTPRequest, HTTPResponse, as_dict, as_list
from .base import DEFAULT_BLACK_LIST, BaseSearch, SearchHit, SearchOptions, clean_snippet


class BingSearch(BaseSearch):
    """Bing Web Search API v7 (web pages and news), or Bing News Search.

    Args:
        api_key: The ``Ocp-Apim-Subscription-Key`` (else ``$BING_SEARCH_API_KEY``).
        region: The market (``mkt``), e.g. ``'zh-CN'``, ``'en-US'``.
        topk: Most results per query.
        black_list: Result URLs containing any of these strings are dropped.
        search_type: ``'web'`` or ``'news'``.
        endpoint: The API endpoint (defaults per `search_type`).
        **kwargs: `BaseSearch` options.
    """

    service = "Bing Search"
    env_key = "BING_SEARCH_API_KEY"
    ENDPOINTS: ClassVar[dict[str, str]] = {
        "web": "https://api.bing.microsoft.com/v7.0/search",
        "news": "https://api.bing.microsoft.com/v7.0/news/search",
    }

    def __init__(
        self,
        api_key: str | None = None,
        region: str = "zh-CN",
        topk: int = 3,
        black_list: Iterable[str] | None = DEFAULT_BLACK_LIST,
        *,
        search_type: str = "web",
        endpoint: str | None = None,
        **kwargs: Unpack[SearchOptions],
    ) -> None:
        super().__init__(topk, black_list, **kwargs)
        self._use_key(api_key, search_type, self.ENDPOINTS)
        self.market = region
        self.endpoint = endpoint or self.ENDPOINTS[search_type]

    def build_request(self, query: str) -> HTTPRequest:
        """GET with ``q``, ``mkt`` and ``count``; the key goes in a header."""
        params = {"q": query, "mkt": self.market, "count": self.topk * 2}
        return self._keyed_request("GET", self.endpoint, "Ocp-Apim-Subscription-Key", params=params)

    def parse_response(self, response: HTTPResponse) -> list[SearchHit]:
        """Web pages and news, in ``rankingResponse.mainline`` order when the answer has one."""
        data = as_dict(self._json(response))
        if data.get("_type") == "ErrorResponse":
            errors = as_list(data.get("errors"))
            message = "; ".join(str(as_dict(e).get("message", e)) for e in errors) or "unknown error"
            raise APIResponseError(f"Bing Search reported an error: {message}")
        if data.get("_type") == "News":
            return [_bing_news(item) for item in as_list(data.get("value"))]
        pages = [as_dict(p) for p in as_list(as_dict(data.get("webPages")).get("value"))]
        news_block = as_dict(data.get("news"))
        news = [_bing_news(item) for item in as_list(news_block.get("value"))]
        by_id = {p.get("id"): p for p in pages}
        mainline = as_list(as_dict(as_dict(data.get("rankingResponse")).get("mainline")).get("items"))
        if not mainline:
            return [_bing_page(p) for p in pages] + news
        hits: list[SearchHit] = []
        for item in map(as_dict, mainline):
            value_id = as_dict(item.get("value")).get("id")
            if item.get("answerType") == "WebPages":
                index = item.get("resultIndex")
                page = by_id.get(value_id) if value_id in by_id else None
                if page is None and isinstance(index, int) and 0 <= index < len(pages):
                    page = pages[index]
                if page is not None:
                    hits.append(_bing_page(page))
            elif item.get("answerType") == "News" and value_id == news_block.get("id"):
                hits.extend(news)
        return hits


def _bing_page(page: Mapping[str, JSONValue]) -> SearchHit:
    return (str(page.get("url", "")), clean_snippet(page.get("snippet", "")), clean_snippet(page.get("name", "")))


def _bing_news(item: object) -> SearchHit:
    news = as_dict(item)
    return (str(news.get("url", "")), clean_snippet(news.get("description", "")), clean_snippet(news.get("name", "")))
