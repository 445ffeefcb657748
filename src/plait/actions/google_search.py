"""`GoogleSearch` / `AsyncGoogleSearch`: short answers from Google through serper.dev.

An explicit ``api_key`` wins over ``$SERPER_API_KEY``; the key travels in a header and
never appears in errors or results. The endpoint is configurable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from typing_extensions import Unpack

from ..exceptions import UserError
from ..schema import ActionReturn
from ..types import JSONValue
from .base_action import ActionCore, AsyncActionMixin, BaseAction, tool_api
from .parser import BaseParser, JsonParser
from .web import (
    APIResponseError,
    HTTPRequest,
    HTTPResponse,
    RetryOptions,
    WebToolMixin,
    WebToolOptions,
    as_data,
    as_dict,
    env_or,
    require,
)
from .web.searchers import clean_snippet

__all__ = ["AsyncGoogleSearch", "GoogleSearch", "serper_snippets"]

NO_RESULT = "No good Google Search Result was found"


def serper_snippets(data: Mapping[str, JSONValue], result_key: str, k: int) -> list[str]:
    """Lagent's answer text: the answer box alone if there is one, else knowledge graph + top-`k` snippets."""
    answer_box = as_dict(data.get("answerBox"))
    if answer_box.get("answer"):
        return [clean_snippet(answer_box["answer"])]
    if answer_box.get("snippet"):
        return [clean_snippet(answer_box["snippet"])]
    if answer_box.get("snippetHighlighted"):
        highlighted = answer_box["snippetHighlighted"]
        return (
            [clean_snippet(h) for h in highlighted] if isinstance(highlighted, list) else [clean_snippet(highlighted)]
        )
    snippets: list[str] = []
    graph = as_dict(data.get("knowledgeGraph"))
    if graph:
        title = graph.get("title", "")
        if graph.get("type"):
            snippets.append(f"{title}: {graph['type']}.")
        if graph.get("description"):
            snippets.append(clean_snippet(graph["description"]))
        snippets.extend(f"{title} {key}: {value}." for key, value in as_dict(graph.get("attributes")).items())
    results = data.get(result_key)
    for item in map(as_dict, results[:k] if isinstance(results, list) else []):
        if item.get("snippet"):
            snippets.append(clean_snippet(item["snippet"]))
        snippets.extend(f"{key}: {value}." for key, value in as_dict(item.get("attributes")).items())
    return snippets or [NO_RESULT]


class _GoogleSearchCore(WebToolMixin, ActionCore, register=False):
    """What `GoogleSearch` and `AsyncGoogleSearch` share (the arguments are `GoogleSearch`'s)."""

    RESULT_KEYS: ClassVar[dict[str, str]] = {"search": "organic", "news": "news", "places": "places"}

    def __init__(
        self,
        api_key: str | None = None,
        timeout: float = 5,
        search_type: str = "search",
        description: Mapping[str, object] | None = None,
        parser: type[BaseParser] = JsonParser,
        enable: bool = True,
        *,
        endpoint: str = "https://google.serper.dev",
        **options: Unpack[RetryOptions],
    ) -> None:
        super().__init__(description, parser, enable)
        key = require(
            env_or(api_key, "SERPER_API_KEY"), "GoogleSearch's serper.dev API key (api_key=)", "SERPER_API_KEY"
        )
        if search_type not in self.RESULT_KEYS:
            raise UserError(f"search_type must be one of {sorted(self.RESULT_KEYS)}, got {search_type!r}")
        self._api_key = key
        self.search_type = search_type
        self.endpoint = endpoint.rstrip("/")
        self.client = self._client_for(WebToolOptions(**options, timeout=timeout))

    def build_request(self, query: str, k: int) -> HTTPRequest:
        """POST ``{q, num}`` to ``{endpoint}/{search_type}`` with the key in ``X-API-KEY``."""
        return HTTPRequest.build(
            "POST",
            f"{self.endpoint}/{self.search_type}",
            json_body={"q": query, "num": k},
            headers={"X-API-KEY": self._api_key},
            secrets=[self._api_key],
            service="serper.dev",
        )

    def parse_response(self, response: HTTPResponse, k: int) -> list[str]:
        """The snippets of an answer (see `serper_snippets`)."""
        data = as_dict(response.json("serper.dev"))
        key = self.RESULT_KEYS[self.search_type]
        if isinstance(data.get("message"), str) and key not in data:
            raise APIResponseError(f"serper.dev reported an error: {data['message']}")
        return serper_snippets(data, key, k)

    async def _run(self, query: str, k: int) -> list[str]:
        k = max(1, int(k))
        return self.parse_response(await self.client.send(self.build_request(query, k)), k)


class GoogleSearch(_GoogleSearchCore, BaseAction):
    """Google search (through serper.dev). Use it to find short, factual answers to a specific question; the input is a search query.

    Args:
        api_key: The serper.dev key (else ``$SERPER_API_KEY``).
        timeout: Seconds per attempt.
        search_type: ``'search'``, ``'news'`` or ``'places'``.
        description: Overrides the tool description.
        parser: The argument parser class.
        enable: Whether executors offer this tool.
        endpoint: The serper.dev base URL (``/{search_type}`` is appended).
        **options: `WebToolOptions`: ``max_retry`` (3 attempts), ``cache_ttl`` (answers reused for 600 s).
    """  # noqa: E501

    @tool_api
    def run(self, query: str, k: int = 10) -> list[str] | ActionReturn:
        """Google search (through serper.dev). Use it to find short, factual answers to a specific question; the input is a search query.

        Args:
            query (str): what to search for
            k (int): how many of the top results to read the snippets of
        """  # noqa: E501
        return self.run_io(as_data(self._run(query, k)))


class AsyncGoogleSearch(AsyncActionMixin, _GoogleSearchCore, sibling_of=GoogleSearch):
    """Google search (through serper.dev). Use it to find short, factual answers to a specific question; the input is a search query."""  # noqa: E501

    async def run(self, query: str, k: int = 10) -> list[str] | ActionReturn:  # noqa: D102
        return await as_data(self._run(query, k))
