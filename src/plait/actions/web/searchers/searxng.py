"""A self-hosted SearXNG instance (JSON output)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from typing_extensions import Unpack

from ..messages import HTTPRequest, HTTPResponse, as_dict, as_list
from ..tool import env_or
from .base import DEFAULT_BLACK_LIST, BaseSearch, SearchHit, SearchOptions, clean_snippet


class SearxngSearch(BaseSearch):
    """A self-hosted SearXNG instance (``/search?format=json``; JSON output must be enabled).

    Lagent's ``SearxngSearch`` signature (``lagent.actions.web_browser``): `url` may be the
    instance (``http://host:8888``, ``/search`` is appended) or its search endpoint, as Lagent
    writes it (``http://host:8888/search``, used as it is).

    Args:
        api_key: A token, sent in the `auth_name` header when given.
        auth_name: The header that carries `api_key` (Lagent's ``searxng``).
        language: The ``language`` parameter.
        categories: The ``categories`` parameter.
        url: The instance or its ``/search`` endpoint (else ``$SEARXNG_URL``, else Lagent's
            ``http://127.0.0.1:18883``).
        topk: Most results per query.
        black_list: Result URLs containing any of these strings are dropped.
        **kwargs: `BaseSearch` options.
    """

    service = "SearXNG"
    env_key = "SEARXNG_URL"

    def __init__(
        self,
        api_key: str | None = None,
        auth_name: str = "searxng",
        language: str = "zh",
        categories: str = "general",
        url: str | None = None,
        topk: int = 3,
        black_list: Iterable[str] | None = DEFAULT_BLACK_LIST,
        **kwargs: Unpack[SearchOptions],
    ) -> None:
        super().__init__(topk, black_list, **kwargs)
        self._token = api_key or None
        self.auth_name = auth_name
        self.language = language
        self.categories = categories
        self.url = (env_or(url, self.env_key) or "http://127.0.0.1:18883").rstrip("/")

    def build_request(self, query: str) -> HTTPRequest:
        """GET ``{url}/search?q=...&format=json`` (``{url}?...`` when `url` is the ``/search`` endpoint)."""
        headers = {"Accept": "application/json"}
        if self._token:
            headers[self.auth_name] = self._token
        return HTTPRequest.build(
            "GET",
            self.url if urlsplit(self.url).path.endswith("/search") else f"{self.url}/search",
            params={"q": query, "format": "json", "language": self.language, "categories": self.categories},
            headers=headers,
            secrets=[self._token or ""],
            service=self.service,
        )

    def parse_response(self, response: HTTPResponse) -> list[SearchHit]:
        """``answers`` first (no URL), then ``results`` (url, title, content)."""
        data = as_dict(self._json(response))
        hits: list[SearchHit] = []
        for answer in as_list(data.get("answers")):
            text = as_dict(answer).get("answer") if isinstance(answer, Mapping) else answer
            url = as_dict(answer).get("url") if isinstance(answer, Mapping) else ""
            if text:
                hits.append((str(url or ""), clean_snippet(text), ""))
        for item in map(as_dict, as_list(data.get("results"))):
            hits.append(
                (str(item.get("url", "")), clean_snippet(item.get("content", "")), clean_snippet(item.get("title", "")))
            )
        return hits
