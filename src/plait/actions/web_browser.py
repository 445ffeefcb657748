"""`WebBrowser` / `AsyncWebBrowser`: search the web, then read the pages a model selects.

The search backend is chosen by name from a registry (`plait.actions.web.searchers`), never
with ``eval``. Search results are kept per ``session_id``, so concurrent conversations
sharing one browser never select each other's results. Pages are fetched through an SSRF
guard: URLs that resolve to private, loopback or link-local addresses are refused unless
allowed with ``fetch_allow=`` (or a custom ``url_guard=``).

Example:
    ```python
    browser = WebBrowser('BingSearch', api_key='...')
    browser({'query': ['plait agents', 'lagent']}, 'search', session_id=1)
    browser({'select_ids': [0, 2]}, 'select', session_id=1)
    ```

The search backends are importable from here as in Lagent (``from plait.actions.web_browser
import SearxngSearch``); ``GoogleSearch`` here is the serper.dev *backend*, as in Lagent, not
the `plait.actions.GoogleSearch` tool.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from ..schema import ActionReturn, ActionStatusCode
from .base_action import ActionCore, AsyncActionMixin, BaseAction, tool_api
from .parser import BaseParser, JsonParser
from .web import URLGuard, WebClient, WebError, WebToolMixin, as_data, error_return
from .web.fetcher import ContentFetcher
from .web.searchers import (
    DEFAULT_BLACK_LIST,
    BaseSearch,
    BingSearch,
    BraveSearch,
    DuckDuckGoSearch,
    GoogleSearch,
    SearxngSearch,
    TencentSearch,
    get_searcher,
    search_all,
)

__all__ = [
    "AsyncWebBrowser",
    "BaseSearch",
    "BingSearch",
    "BraveSearch",
    "ContentFetcher",
    "DuckDuckGoSearch",
    "GoogleSearch",
    "SearxngSearch",
    "TencentSearch",
    "WebBrowser",
]

logger = logging.getLogger("plait.actions.web")

_RESULTS = "web_browser.search_results"
_Results = dict[int, dict[str, str]]
"""Search results by id: ``{id: {'url', 'title', 'summ'}}``."""
_Pages = dict[Hashable, dict[str, str]]
"""What `select` read, by the ids the model gave (as given when they are not result ids)."""


def _as_ids(select_ids: object) -> list[object]:
    if isinstance(select_ids, (list, tuple)):
        return list(select_ids)
    return [select_ids]


def _as_index(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


class _WebBrowserCore(WebToolMixin, ActionCore, register=False):
    """What `WebBrowser` and `AsyncWebBrowser` share (the arguments are `WebBrowser`'s)."""

    def __init__(
        self,
        searcher_type: str | type[BaseSearch] | BaseSearch = "DuckDuckGoSearch",
        timeout: float = 5,
        black_list: Iterable[str] | None = DEFAULT_BLACK_LIST,
        topk: int = 20,
        description: Mapping[str, object] | None = None,
        parser: type[BaseParser] = JsonParser,
        enable: bool = True,
        *,
        url_guard: URLGuard | None = None,
        fetch_allow: Iterable[str] = (),
        max_page_chars: int = 8192,
        max_select: int = 4,
        **searcher_kwargs: Any,
    ) -> None:
        super().__init__(description, parser, enable)
        if isinstance(searcher_type, BaseSearch):
            self.searcher = searcher_type
        else:
            cls = get_searcher(searcher_type) if isinstance(searcher_type, str) else searcher_type
            searcher_kwargs.setdefault("timeout", searcher_kwargs.pop("search_timeout", timeout))
            self.searcher = cls(topk=topk, black_list=black_list, **searcher_kwargs)
        guard = url_guard if url_guard is not None else URLGuard(fetch_allow)
        self.fetcher = ContentFetcher(timeout=timeout, guard=guard)
        self.max_page_chars = max_page_chars
        self.max_select = max_select

    def web_clients(self) -> list[WebClient]:
        """The search backend's client and the page fetcher's client."""
        return [self.searcher.client, self.fetcher.client]

    # -- the one implementation of each API (async) ----------------------------------------------
    async def _search(self, query: str | list[str], session_id: Hashable) -> _Results | str | ActionReturn:
        queries = [str(q) for q in (query if isinstance(query, (list, tuple)) else [query]) if str(q).strip()]
        if not queries:
            return _failure("give at least one non-empty query", ActionStatusCode.ARGS_ERROR)
        outcomes = await search_all(self.searcher, queries)
        merged: dict[str, dict[str, str]] = {}
        errors: list[WebError] = []
        for q, outcome in zip(queries, outcomes, strict=True):
            if isinstance(outcome, WebError):
                logger.warning("search for %r failed: %s", q, outcome)
                errors.append(outcome)
                continue
            if isinstance(outcome, BaseException):
                raise outcome
            for item in outcome.values():
                key = item["url"] or f"#answer:{item['summ']}"
                if key not in merged:
                    merged[key] = dict(item)
                elif item["summ"] and item["summ"] not in merged[key]["summ"]:
                    merged[key]["summ"] += "\n" + item["summ"]
        if errors and len(errors) == len(queries):
            return error_return(errors[0])
        results = dict(enumerate(merged.values()))
        self.session_state(session_id)[_RESULTS] = results
        if not results:
            return f"No results found for {', '.join(map(repr, queries))}."
        return results

    async def _select(self, select_ids: list[int], session_id: Hashable) -> _Pages | ActionReturn:
        results: dict[int, dict[str, str]] | None = self.session_state(session_id).get(_RESULTS)
        if not results:
            return _failure("there are no search results to select from in this session; call search first")
        chosen: list[int] = []
        answer: _Pages = {}
        for raw in _as_ids(select_ids):
            index = _as_index(raw)
            if index is None or index not in results:
                answer[raw] = {"error": f"no search result with id {raw!r} (valid ids: 0-{len(results) - 1})"}
            elif index not in chosen:
                if len(chosen) < self.max_select:
                    chosen.append(index)
                else:
                    answer[index] = {"error": f"not read: select at most {self.max_select} pages per call"}
        if not chosen:
            return _failure(
                "; ".join(v["error"] for v in answer.values()) or "select_ids is empty", ActionStatusCode.ARGS_ERROR
            )
        pages = await asyncio.gather(*(self._read(results[i]["url"]) for i in chosen), return_exceptions=True)
        failures: list[WebError] = []
        for index, page in zip(chosen, pages, strict=True):
            item = {"url": results[index]["url"], "title": results[index]["title"]}
            if isinstance(page, WebError):
                failures.append(page)
                item["error"] = str(page)
            elif isinstance(page, BaseException):
                raise page
            else:
                item["content"] = page
            answer[index] = item
        if len(failures) == len(chosen):
            first = failures[0]
            message = "; ".join(str(f) for f in failures)
            return ActionReturn(errmsg=message, state=first.state)
        numbered = sorted(k for k in answer if isinstance(k, int))
        return {**{k: answer[k] for k in numbered}, **{k: v for k, v in answer.items() if not isinstance(k, int)}}

    async def _open_url(self, url: str) -> dict[str, str]:
        return {"type": "text", "content": await self._read(url)}

    async def _read(self, url: str) -> str:
        if not url:
            raise _NoURL("this result has no URL to open (it is a direct answer; its summary is all there is)")
        text = await self.fetcher.afetch(url)
        if len(text) > self.max_page_chars:
            text = text[: self.max_page_chars] + " ..."
        return text

    def results(self, session_id: Hashable = 0) -> dict[int, dict[str, str]]:
        """The latest search results of `session_id` (a copy; empty before the first search)."""
        stored = self.session_state(session_id).get(_RESULTS) or {}
        return {i: dict(item) for i, item in stored.items()}


class WebBrowser(_WebBrowserCore, BaseAction):
    """Search the web and read pages: search for queries, select results to read, or open a URL.

    Args:
        searcher_type: The search backend: a registered name (``'DuckDuckGoSearch'``,
            ``'BingSearch'``, ``'BraveSearch'``, ``'GoogleSearch'``, ``'TencentSearch'``,
            ``'SearxngSearch'``), a `BaseSearch` subclass, or a ready instance.
        timeout: Seconds for one search request or page fetch (``search_timeout=`` sets the
            search's own).
        black_list: Result URLs containing any of these strings are dropped.
        topk: Most results per query.
        description: Overrides the tool description.
        parser: The argument parser class.
        enable: Whether executors offer this tool.
        url_guard: Which URLs `select` and `open_url` may fetch (default: public addresses only).
        fetch_allow: Shortcut for ``url_guard=URLGuard(fetch_allow)``: hosts or networks
            allowed although private (``['127.0.0.1']``, ``['10.0.0.0/8']``, ``['wiki.corp']``).
        max_page_chars: Characters of page text returned per page.
        max_select: Most pages one `select` call reads.
        **searcher_kwargs: Passed to the backend (``api_key``, ``region``, ``endpoint``, ...).
    """

    @tool_api
    def search(self, query: list[str], session_id: Hashable = 0) -> _Results | str | ActionReturn:
        """Search the web; returns numbered results, each with url, title and summ (a summary).

        Args:
            query (List[str]): search queries, run together (a single query string is fine too)
            session_id: Filled in by the executor: each session keeps its own results.
        """
        return self.run_io(as_data(self._search(query, session_id)))

    @tool_api
    def select(self, select_ids: list[int], session_id: Hashable = 0) -> _Pages | ActionReturn:
        """Read the full text of chosen search results (call search first).

        Args:
            select_ids (List[int]): ids of the search results to read, at most 4
            session_id: Filled in by the executor.
        """
        return self.run_io(as_data(self._select(select_ids, session_id)))

    @tool_api
    def open_url(self, url: str) -> dict[str, str] | ActionReturn:
        """Read the text of the web page at a URL.

        Args:
            url (str): the http or https URL of the page
        """
        return self.run_io(as_data(self._open_url(url)))


class _NoURL(WebError):
    state = ActionStatusCode.API_ERROR


def _failure(message: str, state: int = ActionStatusCode.API_ERROR) -> ActionReturn:
    return ActionReturn(errmsg=message, state=state)


class AsyncWebBrowser(AsyncActionMixin, _WebBrowserCore, sibling_of=WebBrowser):
    """Search the web and read pages: search for queries, select results to read, or open a URL."""

    async def search(self, query: list[str], session_id: Hashable = 0) -> _Results | str | ActionReturn:  # noqa: D102
        return await as_data(self._search(query, session_id))

    async def select(self, select_ids: list[int], session_id: Hashable = 0) -> _Pages | ActionReturn:  # noqa: D102
        return await as_data(self._select(select_ids, session_id))

    async def open_url(self, url: str) -> dict[str, str] | ActionReturn:  # noqa: D102
        return await as_data(self._open_url(url))
