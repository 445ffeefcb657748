"""WebBrowser against fake search and page servers on 127.0.0.1 (sync and async from one body)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from _web_support import SECRET, call, content, ddg_html, fixture_json, make, page

from plait.actions.web.searchers import SEARCHERS, BaseSearch, BingSearch
from plait.actions.web_browser import AsyncWebBrowser, WebBrowser
from plait.exceptions import UserError
from plait.schema import ActionStatusCode
from plait.testing.fake_http import Canned, FakeHTTPServer

FAST = {"max_retry": 1}


@pytest.fixture
def server() -> Iterator[FakeHTTPServer]:
    with FakeHTTPServer() as srv:
        yield srv


def bing_answer(server: FakeHTTPServer, pages: list[tuple[str, str, str]]) -> dict[str, Any]:
    """A Bing Web Search answer (recorded shape) whose pages point at `server`."""
    data = fixture_json("bing_web_search.json")
    template = data["webPages"]["value"][0]
    values = []
    for i, (path, name, snippet) in enumerate(pages):
        values.append({**template, "id": f"https://api.cognitive.microsoft.com/api/v7/#WebPages.{i}",
                       "url": server.url(path), "name": name, "snippet": snippet})  # fmt: skip
    data["webPages"]["value"] = values
    data["rankingResponse"]["mainline"]["items"] = [
        {"answerType": "WebPages", "resultIndex": i, "value": {"id": v["id"]}} for i, v in enumerate(values)
    ]
    return data


def browser(mode: str, server: FakeHTTPServer, **kwargs: Any) -> Any:
    kwargs.setdefault("fetch_allow", ["127.0.0.1"])
    return make(
        mode, WebBrowser, AsyncWebBrowser, "BingSearch", api_key=SECRET, endpoint=server.url("/v7.0/search"),
        **FAST, **kwargs,
    )  # fmt: skip


def test_search_select_open_url(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/v7.0/search", Canned.json(bing_answer(server, [
        ("/a", "Page A", "about a"), ("/b", "Page B", "about b"), ("/doc.pdf", "A PDF", "skipped"),
    ])))  # fmt: skip
    server.route("GET", "/a", Canned.html(page("Page A", "Alpha paragraph.", "Second <b>bold</b> line.")))
    server.route("GET", "/b", Canned.html(page("Page B", "Beta text.")))
    tool = browser(mode, server)

    ret = call(tool, {"query": "plait agents"}, "search", session_id=7)
    assert ret.state == ActionStatusCode.SUCCESS
    assert ret.type.endswith("WebBrowser.search")
    results = content(ret)
    assert list(results) == ["0", "1"]  # the .pdf result is dropped
    assert results["0"] == {"url": server.url("/a"), "summ": "about a", "title": "Page A"}
    sent = server.requests_to("/v7.0/search")[0]
    assert sent.param("q") == "plait agents"
    assert sent.headers["ocp-apim-subscription-key"] == SECRET

    ret = call(tool, {"select_ids": [0, 1]}, "select", session_id=7)
    selected = content(ret)
    assert set(selected) == {"0", "1"}
    assert selected["0"]["title"] == "Page A"
    text = selected["0"]["content"]
    assert "Alpha paragraph." in text and "Second bold line." in text
    assert "tracking" not in text and "color: red" not in text and "enable js" not in text

    ret = call(tool, {"url": server.url("/b")}, "open_url")
    assert ret.state == ActionStatusCode.SUCCESS
    assert "Beta text." in ret.result[0]["content"]
    assert ret.result[0]["type"] == "text"


def test_multiple_queries_are_merged_and_deduplicated(mode: str, server: FakeHTTPServer) -> None:
    answers = {
        "one": bing_answer(server, [("/shared", "Shared", "first view"), ("/only1", "Only 1", "x")]),
        "two": bing_answer(server, [("/shared", "Shared", "second view"), ("/only2", "Only 2", "y")]),
    }
    server.route("GET", "/v7.0/search", lambda req: Canned.json(answers[req.param("q") or ""]))
    results = content(call(browser(mode, server), {"query": ["one", "two"]}, "search"))
    urls = [r["url"] for r in results.values()]
    assert sorted(urls) == sorted({server.url(p) for p in ("/shared", "/only1", "/only2")})
    shared = next(r for r in results.values() if r["url"] == server.url("/shared"))
    assert shared["summ"] == "first view\nsecond view"


def test_sessions_never_see_each_others_results(mode: str, server: FakeHTTPServer) -> None:
    answers = {
        "cats": bing_answer(server, [("/cats", "Cats", "about cats")]),
        "dogs": bing_answer(server, [("/dogs", "Dogs", "about dogs")]),
    }
    server.route("GET", "/v7.0/search", lambda req: Canned.json(answers[req.param("q") or ""], delay=0.05))
    server.route("GET", "/cats", Canned.html(page("Cats", "Meow.")))
    server.route("GET", "/dogs", Canned.html(page("Dogs", "Woof.")))
    tool = browser(mode, server)
    outcome: dict[str, Any] = {}

    if mode == "async":

        async def session(sid: str, query: str) -> None:
            await tool({"query": query}, "search", session_id=sid)
            outcome[sid] = await tool({"select_ids": [0]}, "select", session_id=sid)

        async def both() -> None:
            await asyncio.gather(session("s-cats", "cats"), session("s-dogs", "dogs"))

        asyncio.run(both())
    else:

        def worker(sid: str, query: str) -> None:
            tool({"query": query}, "search", session_id=sid)
            outcome[sid] = tool({"select_ids": [0]}, "select", session_id=sid)

        threads = [threading.Thread(target=worker, args=a) for a in (("s-cats", "cats"), ("s-dogs", "dogs"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    assert content(outcome["s-cats"])["0"]["content"].endswith("Meow.")
    assert content(outcome["s-dogs"])["0"]["content"].endswith("Woof.")
    assert tool.results("s-cats")[0]["url"] == server.url("/cats")
    assert tool.results("s-dogs")[0]["url"] == server.url("/dogs")
    # a third session has nothing to select from
    ret = call(tool, {"select_ids": [0]}, "select", session_id="other")
    assert ret.state == ActionStatusCode.API_ERROR
    assert "call search first" in ret.errmsg


@pytest.mark.parametrize("status", [401, 403, 500, 503])
def test_http_errors_become_http_error_returns(mode: str, server: FakeHTTPServer, status: int) -> None:
    server.route("GET", "/v7.0/search", Canned.error(status, f"denied for key {SECRET}"))
    ret = call(browser(mode, server), {"query": "x"}, "search")
    assert ret.state == ActionStatusCode.HTTP_ERROR
    assert f"HTTP {status}" in ret.errmsg and "Bing Search" in ret.errmsg
    assert SECRET not in ret.errmsg and SECRET not in repr(ret)
    assert ret.args == {"query": "x"}


def test_retries_transient_errors_then_succeeds(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/v7.0/search", [
        Canned.error(503), Canned.error(429, headers={"Retry-After": "0"}),
        Canned.json(bing_answer(server, [("/a", "A", "a")])),
    ])  # fmt: skip
    tool = make(mode, WebBrowser, AsyncWebBrowser, "BingSearch", api_key=SECRET,
                endpoint=server.url("/v7.0/search"), max_retry=3, backoff=0.01)  # fmt: skip
    ret = call(tool, {"query": "x"}, "search")
    assert ret.state == ActionStatusCode.SUCCESS
    assert len(server.requests_to("/v7.0/search")) == 3


def test_search_timeout(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/v7.0/search", Canned.json({}, delay=60))  # only the time limit can end it
    tool = make(mode, WebBrowser, AsyncWebBrowser, "BingSearch", api_key=SECRET,
                endpoint=server.url("/v7.0/search"), max_retry=1, timeout=0.5)  # fmt: skip
    ret = call(tool, {"query": "x"}, "search")
    assert ret.state == ActionStatusCode.HTTP_ERROR
    assert "did not answer within 0.5 s" in ret.errmsg


def test_empty_results(mode: str, server: FakeHTTPServer) -> None:
    server.route(
        "GET", "/v7.0/search", Canned.json({"_type": "SearchResponse", "queryContext": {"originalQuery": "zz"}})
    )
    tool = browser(mode, server)
    ret = call(tool, {"query": "zzqqxx"}, "search", session_id=1)
    assert ret.state == ActionStatusCode.SUCCESS
    assert content(ret) == "No results found for 'zzqqxx'."
    assert call(tool, {"select_ids": [0]}, "select", session_id=1).state == ActionStatusCode.API_ERROR


def test_select_reports_bad_ids_and_failed_pages(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/v7.0/search", Canned.json(bing_answer(server, [("/ok", "OK", "o"), ("/gone", "Gone", "g")])))
    server.route("GET", "/ok", Canned.html(page("OK", "fine")))
    server.route("GET", "/gone", Canned.text("not here", status=404))
    tool = browser(mode, server)
    call(tool, {"query": "x"}, "search")

    selected = content(call(tool, {"select_ids": [0, 1, 9, "x"]}, "select"))
    assert "fine" in selected["0"]["content"]
    assert "HTTP 404" in selected["1"]["error"]
    assert "no search result with id 9" in selected["9"]["error"]
    assert "no search result with id 'x'" in selected["x"]["error"]

    ret = call(tool, {"select_ids": [1]}, "select")  # every page failed: an error state
    assert ret.state == ActionStatusCode.HTTP_ERROR and "HTTP 404" in ret.errmsg
    ret = call(tool, {"select_ids": [5]}, "select")
    assert ret.state == ActionStatusCode.ARGS_ERROR and "valid ids: 0-1" in ret.errmsg


def test_select_reads_at_most_max_select_pages(mode: str, server: FakeHTTPServer) -> None:
    paths = [(f"/p{i}", f"P{i}", "s") for i in range(4)]
    server.route("GET", "/v7.0/search", Canned.json(bing_answer(server, paths)))
    for path, title, _ in paths:
        server.route("GET", path, Canned.html(page(title, f"text {title}")))
    tool = browser(mode, server, max_select=2, max_page_chars=6)
    call(tool, {"query": "x"}, "search")
    selected = content(call(tool, {"select_ids": [0, 1, 2]}, "select"))
    assert "content" in selected["0"] and "content" in selected["1"]
    assert "at most 2 pages" in selected["2"]["error"]
    assert selected["0"]["content"] == "P0\ntex ..."  # cut to max_page_chars, marked
    assert len(server.requests_to("/p2")) == 0


def test_duckduckgo_backend(mode: str, server: FakeHTTPServer) -> None:
    html = ddg_html(
        [(server.url("/a"), "Result <b>A</b>", "Snippet &amp; more"), ("https://www.youtube.com/x", "Video", "v")],
        ad=("https://ads.example.com", "Buy now", "ad"),
    )
    server.route("POST", "/html/", Canned.html(html))
    tool = make(mode, WebBrowser, AsyncWebBrowser, endpoint=server.url("/html/"), max_retry=1)
    assert type(tool.searcher).__name__ == "DuckDuckGoSearch"
    results = content(call(tool, {"query": "hello world"}, "search"))
    assert results == {"0": {"url": server.url("/a"), "summ": "Snippet & more", "title": "Result A"}}
    form = server.requests_to("/html/")[0].form()
    assert form["q"] == ["hello world"] and form["kl"] == ["wt-wt"]


def test_searcher_choice() -> None:
    class EchoSearch(BaseSearch):
        def build_request(self, query: str) -> Any:
            raise AssertionError("not called")

        def parse_response(self, response: Any) -> Any:
            raise AssertionError("not called")

    try:
        assert isinstance(WebBrowser("EchoSearch").searcher, EchoSearch)
    finally:
        SEARCHERS.pop("EchoSearch")
    ready = BingSearch(api_key=SECRET, topk=2)
    assert WebBrowser(ready).searcher is ready
    assert WebBrowser(BingSearch, api_key=SECRET, topk=5).searcher.topk == 5
    with pytest.raises(UserError, match="did you mean 'BingSearch'"):
        WebBrowser("BingSerch", api_key=SECRET)
    with pytest.raises(UserError, match='no search backend named "__import__'):
        WebBrowser("__import__('os').system('true')")


def test_description_hides_session_id() -> None:
    desc = WebBrowser("BingSearch", api_key=SECRET).description
    assert desc["name"] == "WebBrowser"
    apis = {api["name"]: api for api in desc["api_list"]}
    assert list(apis) == ["search", "select", "open_url"]
    for api in apis.values():
        assert all(p["name"] != "session_id" for p in api["parameters"])
    assert apis["select"]["parameters"][0]["type"] == "Array"
    assert apis["search"]["parameters"][0] == {
        "name": "query", "type": "Array", "items": {"type": "STRING"},
        "description": "search queries, run together (a single query string is fine too)",
    }  # fmt: skip


def test_sync_browser_works_inside_a_running_loop(server: FakeHTTPServer) -> None:
    server.route("GET", "/v7.0/search", Canned.json(bing_answer(server, [("/a", "A", "a")])))
    tool = browser("sync", server)

    async def inside() -> Any:
        return tool({"query": "x"}, "search")

    assert asyncio.run(inside()).state == ActionStatusCode.SUCCESS
    tool.close()
