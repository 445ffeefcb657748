"""`ArxivSearch` / `AsyncArxivSearch`: paper metadata from the arXiv API (Atom feed).

Talks to ``export.arxiv.org/api/query`` directly (no ``arxiv`` package) and parses the feed
with ``xml.etree``. The endpoint is configurable, for mirrors and tests.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from typing_extensions import Unpack

from ..exceptions import ToolArgumentError
from ..schema import ActionReturn
from .base_action import ActionCore, AsyncActionMixin, BaseAction, tool_api
from .parser import BaseParser, JsonParser
from .web import APIResponseError, HTTPRequest, HTTPResponse, WebToolMixin, WebToolOptions, as_data

__all__ = ["ArxivPaper", "ArxivSearch", "AsyncArxivSearch", "build_arxiv_request", "parse_arxiv_feed"]

_ATOM = "{http://www.w3.org/2005/Atom}"
_ARXIV = "{http://arxiv.org/schemas/atom}"
_WS = re.compile(r"\s+")
NO_RESULT = "No good Arxiv Result was found"


@dataclass(frozen=True)
class ArxivPaper:
    """One entry of an arXiv feed."""

    id: str
    title: str
    summary: str
    authors: tuple[str, ...]
    published: str
    updated: str
    categories: tuple[str, ...] = ()
    pdf_url: str = ""


def _text(node: ET.Element | None) -> str:
    return _WS.sub(" ", node.text or "").strip() if node is not None else ""


def build_arxiv_request(endpoint: str, query: str, max_results: int) -> HTTPRequest:
    """The API request for `query` (an arXiv query such as ``all:electron`` or plain words)."""
    return HTTPRequest.build(
        "GET",
        endpoint,
        params={"search_query": query, "start": 0, "max_results": max_results},
        headers={"Accept": "application/atom+xml"},
        service="the arXiv API",
    )


def parse_arxiv_feed(xml: bytes | str) -> list[ArxivPaper]:
    """The entries of an arXiv Atom feed.

    Raises:
        APIResponseError: The document is not a feed, or it is an arXiv error report.
    """
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise APIResponseError(f"the arXiv API answered with something that is not an Atom feed ({exc})") from None
    if root.tag != f"{_ATOM}feed":
        raise APIResponseError("the arXiv API answered with something that is not an Atom feed")
    papers: list[ArxivPaper] = []
    for entry in root.findall(f"{_ATOM}entry"):
        entry_id = _text(entry.find(f"{_ATOM}id"))
        if "/api/errors" in entry_id:
            raise APIResponseError(f"the arXiv API rejected the query: {_text(entry.find(f'{_ATOM}summary'))}")
        pdf = next(
            (link.get("href", "") for link in entry.findall(f"{_ATOM}link") if link.get("title") == "pdf"
             or "/pdf/" in link.get("href", "")),
            "",
        )  # fmt: skip
        papers.append(
            ArxivPaper(
                id=entry_id,
                title=_text(entry.find(f"{_ATOM}title")),
                summary=_text(entry.find(f"{_ATOM}summary")),
                authors=tuple(_text(a.find(f"{_ATOM}name")) for a in entry.findall(f"{_ATOM}author")),
                published=_text(entry.find(f"{_ATOM}published")),
                updated=_text(entry.find(f"{_ATOM}updated")),
                categories=tuple(c.get("term", "") for c in entry.findall(f"{_ATOM}category")),
                pdf_url=pdf,
            )
        )
    return papers


def format_papers(papers: list[ArxivPaper], chars_max: int) -> str:
    """Lagent's text layout: one ``Published/Title/Authors/Summary`` block per paper."""
    if not papers:
        return NO_RESULT
    return "\n\n".join(
        f"Published: {paper.published[:10]}\nTitle: {paper.title}\n"
        f"Authors: {', '.join(paper.authors)}\nSummary: {paper.summary[:chars_max]}"
        for paper in papers
    )


class _ArxivSearchCore(WebToolMixin, ActionCore, register=False):
    """What `ArxivSearch` and `AsyncArxivSearch` share (the arguments are `ArxivSearch`'s)."""

    client_defaults: ClassVar[WebToolOptions] = {"timeout": 10.0, "max_retry": 3, "backoff": 1.0, "cache_ttl": 600.0}

    def __init__(
        self,
        top_k_results: int = 3,
        max_query_len: int = 300,
        doc_content_chars_max: int = 1500,
        description: Mapping[str, object] | None = None,
        parser: type[BaseParser] = JsonParser,
        enable: bool = True,
        *,
        endpoint: str = "https://export.arxiv.org/api/query",
        **options: Unpack[WebToolOptions],
    ) -> None:
        super().__init__(description, parser, enable)
        self.top_k_results = top_k_results
        self.max_query_len = max_query_len
        self.doc_content_chars_max = doc_content_chars_max
        self.endpoint = endpoint
        self.client = self._client_for(options)

    def build_request(self, query: str) -> HTTPRequest:
        """The API request for `query` (cut to ``max_query_len``)."""
        return build_arxiv_request(self.endpoint, query[: self.max_query_len], self.top_k_results)

    def parse_response(self, response: HTTPResponse) -> dict[str, str]:
        """``{'content': text}`` for a feed (at most ``top_k_results`` papers)."""
        papers = parse_arxiv_feed(response.body)[: self.top_k_results]
        return {"content": format_papers(papers, self.doc_content_chars_max)}

    async def _get_information(self, query: str) -> dict[str, str]:
        if not query.strip():
            raise ToolArgumentError("the query is empty")
        return self.parse_response(await self.client.send(self.build_request(query)))


class ArxivSearch(_ArxivSearchCore, BaseAction):
    """Search information from Arxiv.org. Useful for when you need to answer questions about Physics, Mathematics, Computer Science, Quantitative Biology, Quantitative Finance, Statistics, Electrical Engineering, and Economics from scientific articles on arxiv.org.

    Args:
        top_k_results: Papers returned per query.
        max_query_len: The query is cut to this many characters.
        doc_content_chars_max: Characters of each abstract returned.
        description: Overrides the tool description.
        parser: The argument parser class.
        enable: Whether executors offer this tool.
        endpoint: The arXiv API query endpoint.
        **options: `WebToolOptions`: ``timeout`` (10 s per attempt), ``max_retry`` (3 attempts),
            ``cache_ttl`` (answers reused for 600 s).
    """  # noqa: E501

    @tool_api(explode_return=True)
    def get_arxiv_article_information(self, query: str) -> dict[str, str] | ActionReturn:
        """Run Arxiv search and get the article meta information.

        Args:
            query (str): the content of search query

        Returns:
            dict: article information
                * content (str): a list of 3 arxiv search papers
        """
        return self.run_io(as_data(self._get_information(query)))


class AsyncArxivSearch(AsyncActionMixin, _ArxivSearchCore, sibling_of=ArxivSearch):
    """Search information from Arxiv.org. Useful for when you need to answer questions about Physics, Mathematics, Computer Science, Quantitative Biology, Quantitative Finance, Statistics, Electrical Engineering, and Economics from scientific articles on arxiv.org."""  # noqa: E501

    async def get_arxiv_article_information(self, query: str) -> dict[str, str] | ActionReturn:  # noqa: D102
        return await as_data(self._get_information(query))
