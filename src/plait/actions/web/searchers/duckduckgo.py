"""DuckDuckGo web search through its HTML endpoint (no API key)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlsplit

from typing_extensions import Unpack

from ....exceptions import APIResponseError
from ..messages import HTTPRequest, HTTPResponse
from .base import DEFAULT_BLACK_LIST, BaseSearch, SearchHit, SearchOptions


@dataclass
class _DDGResult:
    """One result of the page: its link, whether it is an ad, and its text pieces by field."""

    href: str
    ad: bool
    text: dict[str, list[str]] = field(default_factory=lambda: {"title": [], "snippet": []})


class _DDGParser(HTMLParser):
    """Reads result links and snippets from DuckDuckGo's HTML results page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.results: list[_DDGResult] = []
        self._field: str | None = None
        self._tag_depth = 0
        self._ad = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = set((dict(attrs).get("class") or "").split())
        if tag == "div" and "result" in classes:
            self._ad = "result--ad" in classes
        if self._field is not None:
            self._tag_depth += 1
            return
        if tag == "a" and "result__a" in classes:
            href = dict(attrs).get("href") or ""
            self.results.append(_DDGResult(href, self._ad))
            self._field, self._tag_depth = "title", 0
        elif "result__snippet" in classes and self.results:
            self._field, self._tag_depth = "snippet", 0

    def handle_endtag(self, tag: str) -> None:
        if self._field is None:
            return
        if self._tag_depth == 0:
            self._field = None
        else:
            self._tag_depth -= 1

    def handle_data(self, data: str) -> None:
        if self._field is not None and self.results:
            self.results[-1].text[self._field].append(data)


def _squash(parts: list[str]) -> str:
    """Text pieces the parser collected (already unescaped, tags gone), whitespace collapsed."""
    return " ".join("".join(parts).split())


def _ddg_target(href: str) -> str:
    """The real URL behind a DuckDuckGo redirect link (``//duckduckgo.com/l/?uddg=...``)."""
    url = urljoin("https://duckduckgo.com/", href)
    parts = urlsplit(url)
    if parts.netloc.endswith("duckduckgo.com") and parts.path.startswith("/l/"):
        target = parse_qs(parts.query).get("uddg")
        if target:
            return target[0]
    return url


class DuckDuckGoSearch(BaseSearch):
    """DuckDuckGo web search through its HTML endpoint (no API key).

    Args:
        topk: Most results per query.
        black_list: Result URLs containing any of these strings are dropped.
        region: DuckDuckGo's ``kl`` region code (``'wt-wt'``: no region, ``'us-en'``, ``'cn-zh'``).
        endpoint: The HTML search endpoint.
        **kwargs: `BaseSearch` options (``timeout``, ``max_retry``, ``proxy``, ...).
    """

    service = "DuckDuckGo"

    def __init__(
        self,
        topk: int = 3,
        black_list: Iterable[str] | None = DEFAULT_BLACK_LIST,
        *,
        region: str = "wt-wt",
        endpoint: str = "https://html.duckduckgo.com/html/",
        **kwargs: Unpack[SearchOptions],
    ) -> None:
        super().__init__(topk, black_list, **kwargs)
        self.region = region
        self.endpoint = endpoint

    def build_request(self, query: str) -> HTTPRequest:
        """POST the query as a form, as DuckDuckGo's own HTML page does."""
        return HTTPRequest.build(
            "POST",
            self.endpoint,
            form={"q": query, "kl": self.region, "b": ""},
            headers={"Accept": "text/html", "Referer": "https://html.duckduckgo.com/"},
            service=self.service,
        )

    def parse_response(self, response: HTTPResponse) -> list[SearchHit]:
        """Hits from the result blocks (``a.result__a`` + ``.result__snippet``); ads are skipped."""
        if response.status == 202:
            raise APIResponseError("DuckDuckGo refused the query (rate limit or bot check); try again later")
        parser = _DDGParser()
        parser.feed(response.text())
        parser.close()
        hits: list[SearchHit] = []
        for item in parser.results:
            url = _ddg_target(item.href)
            if item.ad or "duckduckgo.com/y.js" in url:
                continue
            hits.append((url, _squash(item.text["snippet"]), _squash(item.text["title"])))
        return hits
