"""Brave Search API (web and news)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from typing_extensions import Unpack

from ....exceptions import APIResponseError
from ..messages import HTTPRequest, HTTPResponse, as_dict, as_list
from .base import DEFAULT_BLACK_LIST, BaseSearch, SearchHit, SearchOptions, clean_snippet


class BraveSearch(BaseSearch):
    """Brave Search API (web or news).

    Args:
        api_key: The ``X-Subscription-Token`` (else ``$BRAVE_SEARCH_API_KEY``).
        region: The ``country`` code (``'ALL'`` for every country).
        language: The ``search_lang`` code.
        extra_snippets: Ask for up to 5 more excerpts per result (joined into the summary).
        topk: Most results per query.
        black_list: Result URLs containing any of these strings are dropped.
        search_type: ``'web'`` or ``'news'``.
        endpoint: The API base URL (``/{search_type}/search`` is appended).
        params: More query parameters for the API.
        **kwargs: `BaseSearch` options.
    """

    service = "Brave Search"
    env_key = "BRAVE_SEARCH_API_KEY"

    def __init__(
        self,
        api_key: str | None = None,
        region: str = "ALL",
        language: str = "zh-hans",
        extra_snippets: bool = True,
        topk: int = 3,
        black_list: Iterable[str] | None = DEFAULT_BLACK_LIST,
        *,
        search_type: str = "web",
        endpoint: str = "https://api.search.brave.com/res/v1",
        params: Mapping[str, object] | None = None,
        **kwargs: Unpack[SearchOptions],
    ) -> None:
        super().__init__(topk, black_list, **kwargs)
        self._use_key(api_key, search_type, ("web", "news"))
        self.market = region
        self.language = language
        self.extra_snippets = extra_snippets
        self.endpoint = endpoint.rstrip("/")
        self.params = dict(params or {})

    def build_request(self, query: str) -> HTTPRequest:
        """GET ``{endpoint}/{search_type}/search`` with the token in a header."""
        params = {
            "q": query,
            "country": self.market,
            "search_lang": self.language,
            "extra_snippets": self.extra_snippets,
            "count": self.topk,
            **self.params,
        }
        url = f"{self.endpoint}/{self.search_type}/search"
        return self._keyed_request(
            "GET", url, "X-Subscription-Token", params=params, headers={"Accept": "application/json"}
        )

    def parse_response(self, response: HTTPResponse) -> list[SearchHit]:
        """``web.results`` (web) or ``results`` (news): title, url, description + extra snippets."""
        data = as_dict(self._json(response))
        if data.get("type") == "ErrorResponse":
            error = as_dict(data.get("error"))
            raise APIResponseError(f"Brave Search reported an error: {error.get('detail') or error.get('code')}")
        items = (
            as_list(as_dict(data.get("web")).get("results"))
            if self.search_type == "web"
            else as_list(data.get("results"))
        )
        hits: list[SearchHit] = []
        for item in map(as_dict, items):
            parts = [item.get("description"), *as_list(item.get("extra_snippets"))]
            summary = " ".join(clean_snippet(p) for p in parts if p)
            hits.append((str(item.get("url", "")), summary, clean_snippet(item.get("title", ""))))
        return hits
