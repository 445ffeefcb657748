"""Helpers for the web tool tests: fixtures on disk, fake servers, one body for sync and async.

Responses with no recorded sample (DuckDuckGo HTML, SearXNG, Tencent search, a full
SerpAPI author answer) are built here from the providers' documented schemas.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from _support import resolve
from plait.schema import ActionReturn

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SECRET = "sk-test-SECRET-0123456789"


def fixture_path(name: str) -> Path:
    """The path of a recorded fixture."""
    return FIXTURES / name


def fixture_json(name: str) -> Any:
    """A recorded JSON fixture, parsed."""
    return json.loads(fixture_path(name).read_text(encoding="utf-8"))


def make(mode: str, sync_cls: type, async_cls: type, *args: Any, **kwargs: Any) -> Any:
    """The sync tool in sync mode, its async twin in async mode."""
    return (sync_cls if mode == "sync" else async_cls)(*args, **kwargs)


def call(tool: Any, inputs: Any, api: str = "run", session_id: Any = None) -> ActionReturn:
    """Call a sync tool, or await an async one, and return the `ActionReturn`."""
    ret = resolve(tool(inputs, api, session_id=session_id))
    assert isinstance(ret, ActionReturn)
    return ret


def content(ret: ActionReturn) -> Any:
    """The single text result, parsed as JSON when it is JSON."""
    assert ret.result is not None, ret.errmsg
    assert len(ret.result) == 1, ret.result
    text = ret.result[0]["content"]
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def page(title: str, *paragraphs: str) -> str:
    """A small HTML page with noise (script, style, nav) around the paragraphs."""
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (
        f"<!doctype html><html><head><title>{title}</title><style>p {{color: red}}</style>"
        f"<script>var tracking = 'do not show';</script></head><body><nav><a href='/'>Home</a></nav>"
        f"<main><h1>{title}</h1>{body}</main><noscript>enable js</noscript></body></html>"
    )


def ddg_html(results: list[tuple[str, str, str]], *, ad: tuple[str, str, str] | None = None) -> str:
    """A DuckDuckGo HTML results page (``html.duckduckgo.com/html/``) with the given (url, title, snippet)."""

    def block(url: str, title: str, snippet: str, extra: str = "") -> str:
        link = f"//duckduckgo.com/l/?uddg={quote(url, safe='')}&amp;rut=abc123"
        return (
            f'<div class="result results_links results_links_deep web-result {extra}">'
            f'<div class="links_main links_deep result__body"><h2 class="result__title">'
            f'<a rel="nofollow" class="result__a" href="{link}">{title}</a></h2>'
            f'<div class="result__extras"><div class="result__extras__url">'
            f'<a class="result__url" href="{link}">{url}</a></div></div>'
            f'<a class="result__snippet" href="{link}">{snippet}</a><div class="clear"></div></div></div>'
        )

    blocks = []
    if ad is not None:
        blocks.append(
            block(*ad, extra="result--ad").replace(
                "//duckduckgo.com/l/?uddg=", "https://duckduckgo.com/y.js?ad_domain=x&amp;u3="
            )
        )
    blocks.extend(block(*r) for r in results)
    if not results:
        blocks.append('<div class="no-results">No results.</div>')
    return (
        '<!DOCTYPE html><html><head><title>query at DuckDuckGo</title></head><body><div id="links" class="results">'
        + "".join(blocks)
        + "</div></body></html>"
    )


def searxng_json(results: list[tuple[str, str, str]], answers: list[str] | None = None) -> dict[str, Any]:
    """A SearXNG ``/search?format=json`` answer (documented shape) with (url, title, content) results."""
    return {
        "query": "q",
        "number_of_results": len(results),
        "results": [
            {
                "url": url,
                "title": title,
                "content": text,
                "engine": "duckduckgo",
                "parsed_url": ["https", url.split("/")[2], "/", "", "", ""],
                "template": "default.html",
                "engines": ["duckduckgo", "bing"],
                "positions": [i + 1],
                "score": 2.0 / (i + 1),
                "category": "general",
            }
            for i, (url, title, text) in enumerate(results)
        ],
        "answers": answers or [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": [],
        "unresponsive_engines": [],
    }


def tencent_json(pages: list[dict[str, Any]], *, wrap_display: bool = False) -> dict[str, Any]:
    """A Tencent Cloud search answer: ``{"Response": {"Pages": [JSON strings], "RequestId": ...}}``."""
    encoded = [
        json.dumps({"Display": json.dumps(p, ensure_ascii=False)} if wrap_display else p, ensure_ascii=False)
        for p in pages
    ]
    return {
        "Response": {"Query": "q", "Pages": encoded, "Msg": "", "RequestId": "b3a0c0de-0000-4000-8000-000000000001"}
    }


def serpapi_author_json() -> dict[str, Any]:
    """A ``google_scholar_author`` answer in SerpAPI's documented shape, with the recorded ``cited_by`` block."""
    return {
        "search_metadata": {"id": "x", "status": "Success"},
        "search_parameters": {"engine": "google_scholar_author", "author_id": "EicYvbwAAAAJ", "hl": "en"},
        "author": {
            "name": "Cliff Meyer",
            "affiliations": "Dana-Farber Cancer Institute and Harvard T.H. Chan School of Public Health",
            "email": "Verified email at jimmy.harvard.edu",
            "website": "http://example.org/~meyer",
            "interests": [{"title": "Computational Biology", "link": "https://scholar.google.com/x"}],
            "thumbnail": "https://scholar.google.com/citations/images/avatar_scholar_128.png",
        },
        "articles": [
            {
                "title": f"Article {i}",
                "link": "https://scholar.google.com/citations?view_op=view_citation",
                "citation_id": f"EicYvbwAAAAJ:{i}",
                "authors": "C Meyer, X Liu",
                "publication": "Genome biology 9 (9), 1-9, 2008",
                "cited_by": {"value": 1000 - i, "link": "https://scholar.google.com/scholar?cites=1"},
                "year": "2008",
            }
            for i in range(5)
        ],
        **fixture_json("serpapi_google_scholar_author_cited_by_partial.json"),
    }
