"""Google results through serper.dev."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar

from typing_extensions import Unpack

from ....exceptions import APIResponseError
from ....types import JSONValue
from ..messages import HTTPRequest, HTTPResponse, as_dict, as_list
from .base import DEFAULT_BLACK_LIST, BaseSearch, SearchHit, SearchOptions, clean_snippet


def serper_hits(data: Mapping[str, JSONValue], result_key: str, limit: int) -> list[SearchHit]:
    """Hits from a serper.dev answer: answer box, knowledge graph, then the `result_key` list."""
    hits: list[SearchHit] = []
    answer_box = as_dict(data.get("answerBox"))
    if answer_box:
        answer = answer_box.get("answer") or answer_box.get("snippet") or answer_box.get("snippetHighlighted")
        if isinstance(answer, list):
            answer = " ".join(map(str, answer))
        if answer:
            hits.append(
                (str(answer_box.get("link", "")), clean_snippet(answer), clean_snippet(answer_box.get("title", "")))
            )
    graph = as_dict(data.get("knowledgeGraph"))
    if graph:
        description = clean_snippet(graph.get("description", ""))
        attributes = ". ".join(f"{k}: {v}" for k, v in as_dict(graph.get("attributes")).items())
        summary = f"{description}. {attributes}" if description and attributes else description or attributes
        title = f"{graph.get('title', '')}: {graph.get('type', '')}".strip(": ")
        hits.append((str(graph.get("descriptionLink") or graph.get("website") or ""), summary, title))
    for item in map(as_dict, as_list(data.get(result_key))[:limit]):
        snippet = clean_snippet(item.get("snippet", ""))
        attributes = ". ".join(f"{k}: {v}" for k, v in as_dict(item.get("attributes")).items())
        summary = f"{snippet}. {attributes}" if snippet and attributes else snippet or attributes
        hits.append((str(item.get("link", "")), summary, clean_snippet(item.get("title", ""))))
    return hits


class GoogleSearch(BaseSearch):
    """Google results through the serper.dev API.

    Args:
        api_key: The serper.dev key (else ``$SERPER_API_KEY``).
        topk: Most results per query.
        black_list: Result URLs containing any of these strings are dropped.
        search_type: ``'search'`` or ``'news'``.
        endpoint: The API base URL (``/{search_type}`` is appended).
        params: More body parameters for the API (``gl``, ``hl``, ``tbs``, ...).
        **kwargs: `BaseSearch` options.
    """

    service = "serper.dev"
    env_key = "SERPER_API_KEY"
    RESULT_KEYS: ClassVar[dict[str, str]] = {"search": "organic", "news": "news"}

    def __init__(
        self,
        api_key: str | None = None,
        topk: int = 3,
        black_list: Iterable[str] | None = DEFAULT_BLACK_LIST,
        *,
        search_type: str = "search",
        endpoint: str = "https://google.serper.dev",
        params: Mapping[str, JSONValue] | None = None,
        **kwargs: Unpack[SearchOptions],
    ) -> None:
        super().__init__(topk, black_list, **kwargs)
        self._use_key(api_key, search_type, self.RESULT_KEYS)
        self.endpoint = endpoint.rstrip("/")
        self.params = dict(params or {})

    def build_request(self, query: str) -> HTTPRequest:
        """POST ``{q, num}`` as JSON with the key in ``X-API-KEY``."""
        body = {"q": query, "num": self.topk, **self.params}
        return self._keyed_request("POST", f"{self.endpoint}/{self.search_type}", "X-API-KEY", json_body=body)

    def parse_response(self, response: HTTPResponse) -> list[SearchHit]:
        """Answer box, knowledge graph, then organic (or news) results."""
        data = as_dict(self._json(response))
        if isinstance(data.get("message"), str) and not data.get(self.RESULT_KEYS[self.search_type]):
            raise APIResponseError(f"serper.dev reported an error: {data['message']}")
        return serper_hits(data, self.RESULT_KEYS[self.search_type], self.topk)
