"""`GoogleSearch` / `AsyncGoogleSearch`: short answers from Google through serper.dev.

An explicit ``api_key`` wins over ``$SERPER_API_KEY``; the key travels in a header and
never appears in errors or results. The endpoint is configurable.

As in Lagent, ``run`` goes through ``_search(search_term, search_type=None, **kwargs)``, which
returns ``(HTTP status, response body)`` or ``(-1, message)`` when no answer came; ``run`` maps
``-1`` to ``HTTP_ERROR``, ``200`` to the snippets and any other status to ``API_ERROR`` with the
status as ``errmsg`` (so tests written for Lagent can patch ``_search``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import ClassVar

from typing_extensions import Unpack

from ..exceptions import UserError
from ..schema import ActionReturn, ActionStatusCode
from ..types import JSONValue
from .base_action import ActionCore, AsyncActionMixin, BaseAction, tool_api
from .parser import BaseParser, JsonParser
from .web import (
    APIResponseError,
    HTTPRequest,
    HTTPResponse,
    HTTPStatusError,
    RetryOptions,
    WebError,
    WebToolMixin,
    WebToolOptions,
    as_dict,
    env_or,
    error_return,
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

    def build_request(
        self, query: str, k: int | None = None, *, search_type: str | None = None, **params: object
    ) -> HTTPRequest:
        """POST ``{q, num, **params}`` to ``{endpoint}/{search_type}`` with the key in ``X-API-KEY``.

        `k` is sent as serper's ``num``; `params` that are ``None`` are left out.
        """
        body: dict[str, JSONValue] = {"q": query}
        if k is not None:
            body["num"] = k
        body.update({key: _as_json(value) for key, value in params.items() if value is not None})
        return HTTPRequest.build(
            "POST",
            f"{self.endpoint}/{search_type or self.search_type}",
            json_body=body,
            headers={"X-API-KEY": self._api_key},
            secrets=[self._api_key],
            service="serper.dev",
        )

    def parse_response(self, response: HTTPResponse, k: int) -> list[str]:
        """The snippets of an answer (see `serper_snippets`)."""
        return self._snippets(response.json("serper.dev"), k)

    def _snippets(self, data: JSONValue | str, k: int) -> list[str]:
        if not isinstance(data, Mapping):
            raise APIResponseError("serper.dev answered with something that is not a JSON object")
        key = self.RESULT_KEYS[self.search_type]
        if isinstance(data.get("message"), str) and key not in data:
            raise APIResponseError(f"serper.dev reported an error: {data['message']}")
        return serper_snippets(data, key, k)

    async def _serper(
        self, search_term: str, search_type: str | None = None, **kwargs: object
    ) -> tuple[int, JSONValue | str]:
        """Lagent's ``_search`` (one body for both tools): ``(HTTP status, JSON body)``, or ``(-1, why)``.

        An error status comes back as its status and body (JSON when it is JSON); a failure to
        get any answer (timeout, connection) as ``-1`` and the message. Never raises `WebError`.
        """
        k = kwargs.pop("k", None)
        request = self.build_request(search_term, k if isinstance(k, int) else None, search_type=search_type, **kwargs)
        try:
            response = await self.client.send(request)
        except HTTPStatusError as exc:
            return exc.status, _json_or_text(exc.raw)
        except WebError as exc:
            return -1, str(exc)
        return response.status, _json_or_text(response.text())

    def _answer(self, status: int, response: JSONValue | str, k: int) -> list[str] | ActionReturn:
        """The tool's answer to what `_search` returned, as Lagent maps it.

        ``-1`` -> ``HTTP_ERROR`` with the message; ``200`` -> the snippets; any other status ->
        ``API_ERROR`` whose ``errmsg`` is the status (``'403'``).
        """
        if status == -1:
            return ActionReturn(errmsg=str(response), state=ActionStatusCode.HTTP_ERROR)
        if status != 200:
            return ActionReturn(errmsg=str(status), state=ActionStatusCode.API_ERROR)
        try:
            return self._snippets(response, k)
        except WebError as exc:
            return error_return(exc)


def _as_json(value: object) -> JSONValue:
    if value is None or isinstance(value, (str, int, float, bool, list, dict)):
        return value
    return str(value)


def _json_or_text(text: str) -> JSONValue | str:
    try:
        parsed: JSONValue = json.loads(text)
    except ValueError:
        return text
    return parsed


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
        k = max(1, int(k))
        status, response = self._search(query, k=k)
        return self._answer(status, response, k)

    def _search(
        self, search_term: str, search_type: str | None = None, **kwargs: object
    ) -> tuple[int, JSONValue | str]:
        """One serper.dev request, as Lagent's ``GoogleSearch._search``: ``(status, response)``.

        Args:
            search_term: The query (``q``).
            search_type: The endpoint (``'search'``, ``'news'``, ``'places'``, ``'images'``); default
                the tool's.
            **kwargs: More request fields (``k`` is sent as ``num``); ``None`` values are left out.

        Returns:
            ``(HTTP status, JSON body)`` (the body as text when it is not JSON), or ``(-1, message)``
            when no answer came (timeout, connection).
        """
        return self.run_io(self._serper(search_term, search_type, **kwargs))


class AsyncGoogleSearch(AsyncActionMixin, _GoogleSearchCore, sibling_of=GoogleSearch):
    """Google search (through serper.dev). Use it to find short, factual answers to a specific question; the input is a search query."""  # noqa: E501

    async def run(self, query: str, k: int = 10) -> list[str] | ActionReturn:  # noqa: D102
        k = max(1, int(k))
        status, response = await self._search(query, k=k)
        return self._answer(status, response, k)

    async def _search(
        self, search_term: str, search_type: str | None = None, **kwargs: object
    ) -> tuple[int, JSONValue | str]:
        """Async `GoogleSearch._search` (Lagent's ``AsyncGoogleSearch._search``)."""
        return await self._serper(search_term, search_type, **kwargs)
