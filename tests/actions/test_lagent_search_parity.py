"""Lagent 0.5's search-tool surface under plait (issue 38).

* `GoogleSearch._search(search_term, search_type=None, **kwargs) -> (status, response)`: Lagent's
  own ``tests/test_actions/test_google_search.py`` patches it; its ``test_api_error`` and
  ``test_http_error`` run here as Lagent writes them (``lagent`` -> ``plait``), and the real
  helper is checked against a fake serper.dev server.
* `SearxngSearch` from `plait.actions.web_browser`, constructed as in Lagent, against a fake
  SearXNG written from SearXNG's documented Search API (``GET /`` and ``GET /search``,
  ``format=json``; an unset format is refused with 403).
"""

from __future__ import annotations

from collections.abc import Iterator
from unittest import TestCase, mock

import pytest
from _web_support import SECRET, fixture_json, searxng_json

from _support import resolve
from plait.actions import AsyncGoogleSearch, GoogleSearch
from plait.schema import ActionStatusCode
from plait.testing.fake_http import Canned, FakeHTTPServer, RecordedRequest


# -- Lagent's tests/test_actions/test_google_search.py (the two cases that pass in Lagent) -----------
class TestGoogleSearch(TestCase):
    @mock.patch.object(GoogleSearch, "_search")
    def test_api_error(self, mock_search_func: mock.MagicMock) -> None:
        mock_response = (403, {"message": "bad requests"})
        mock_search_func.return_value = mock_response
        search_tool = GoogleSearch(api_key="abc")
        tool_return = search_tool.run("What's the capital of China?")
        self.assertEqual(tool_return.state, ActionStatusCode.API_ERROR)
        self.assertEqual(tool_return.errmsg, str(403))

    @mock.patch.object(GoogleSearch, "_search")
    def test_http_error(self, mock_search_func: mock.MagicMock) -> None:
        mock_response = (-1, "HTTPSConnectionPool")
        mock_search_func.return_value = mock_response
        search_tool = GoogleSearch(api_key="abc")
        tool_return = search_tool.run("What's the capital of China?")
        self.assertEqual(tool_return.state, ActionStatusCode.HTTP_ERROR)
        self.assertEqual(tool_return.errmsg, "HTTPSConnectionPool")


@pytest.fixture
def server() -> Iterator[FakeHTTPServer]:
    with FakeHTTPServer() as srv:
        yield srv


def test_mocked_search_result_is_parsed() -> None:
    with mock.patch.object(GoogleSearch, "_search", return_value=(200, fixture_json("serper_search_answerbox.json"))):
        assert GoogleSearch(api_key="abc").run("capital of china") == ["Beijing"]
    with mock.patch.object(GoogleSearch, "_search", return_value=(200, "<html>not json</html>")):
        ret = GoogleSearch(api_key="abc").run("x")
    assert ret.state == ActionStatusCode.API_ERROR and "not a JSON object" in ret.errmsg


def test_search_helper_returns_status_and_body(mode: str, server: FakeHTTPServer) -> None:
    refused = Canned.json({"message": "Unauthorized.", "statusCode": 403}, status=403)
    server.route("POST", "/search", [Canned.json(fixture_json("serper_search_answerbox.json")), refused])
    server.route("POST", "/news", Canned.json({"news": []}))
    cls = GoogleSearch if mode == "sync" else AsyncGoogleSearch
    tool = cls(api_key=SECRET, endpoint=server.base_url, max_retry=1, cache_ttl=0)
    status, body = resolve(tool._search("capital of china", k=3))
    assert status == 200 and isinstance(body, dict) and body["answerBox"]["answer"] == "Beijing"
    assert server.requests[0].json() == {"q": "capital of china", "num": 3}
    assert server.requests[0].headers["x-api-key"] == SECRET
    assert resolve(tool._search("x")) == (403, {"message": "Unauthorized.", "statusCode": 403})
    assert resolve(tool._search("x", search_type="news", gl="us", tbs=None)) == (200, {"news": []})
    assert server.requests[-1].path == "/news" and server.requests[-1].json() == {"q": "x", "gl": "us"}
    # the tool maps what the helper returns as Lagent does
    ret = resolve(tool({"query": "x"}))
    assert ret.state == ActionStatusCode.API_ERROR and ret.errmsg == "403"


def test_search_helper_reports_no_answer_as_minus_one(mode: str) -> None:
    with FakeHTTPServer() as srv:
        dead = srv.base_url  # nothing listens here once the server is gone
    cls = GoogleSearch if mode == "sync" else AsyncGoogleSearch
    tool = cls(api_key=SECRET, endpoint=dead, max_retry=1)
    status, message = resolve(tool._search("x"))
    assert status == -1 and isinstance(message, str) and "serper.dev" in message and SECRET not in message
    ret = resolve(tool({"query": "x"}))
    assert ret.state == ActionStatusCode.HTTP_ERROR and ret.errmsg == message


# -- SearxngSearch ------------------------------------------------------------------------------------
RESULTS = [
    ("https://a.example/", "A", "alpha"),
    ("https://b.example/", "B", "beta"),
    ("https://c.example/", "C", "gamma"),
]


def fake_searxng(req: RecordedRequest) -> Canned:
    """SearXNG's Search API: ``q`` required, ``format=json`` answered, other formats unset (403)."""
    if req.param("format") != "json":
        return Canned.error(403, "Forbidden")
    if not req.param("q"):
        return Canned.error(400, "Bad Request")
    return Canned.json(searxng_json(RESULTS))


@pytest.fixture
def searxng() -> Iterator[FakeHTTPServer]:
    with FakeHTTPServer() as srv:
        srv.route("GET", "/search", fake_searxng).route("GET", "/", fake_searxng)
        yield srv


def test_searxng_search_is_importable_as_in_lagent() -> None:
    from plait.actions.web.searchers import SearxngSearch as Backend
    from plait.actions.web_browser import SearxngSearch

    assert SearxngSearch is Backend


def test_searxng_search_constructed_as_in_lagent(
    mode: str, searxng: FakeHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plait.actions.web_browser import SearxngSearch

    monkeypatch.delenv("SEARXNG_URL", raising=False)
    # Lagent's docs give the URL of the search endpoint itself
    searcher = SearxngSearch(api_key="sk-xxxx", url=f"{searxng.base_url}/search", topk=2, proxy={"http": None})
    results = resolve(searcher.search("meaning") if mode == "sync" else searcher.asearch("meaning"))
    assert results == {0: {"url": "https://a.example/", "summ": "alpha", "title": "A"},
                       1: {"url": "https://b.example/", "summ": "beta", "title": "B"}}  # fmt: skip
    sent = searxng.requests[0]
    assert sent.path == "/search" and sent.param("q") == "meaning" and sent.param("format") == "json"
    assert sent.param("language") == "zh" and sent.param("categories") == "general"
    assert sent.headers["searxng"] == "sk-xxxx"  # Lagent's default auth_name
    # $SEARXNG_URL as Lagent documents it (the /search endpoint); a bare instance URL works too
    monkeypatch.setenv("SEARXNG_URL", f"{searxng.base_url}/search")
    assert SearxngSearch().build_request("q").full_url.startswith(f"{searxng.base_url}/search?")
    assert SearxngSearch(url=searxng.base_url).build_request("q").full_url.startswith(f"{searxng.base_url}/search?")
    monkeypatch.delenv("SEARXNG_URL")
    assert SearxngSearch().url == "http://127.0.0.1:18883"  # Lagent's default


def test_web_browser_searches_searxng_as_in_lagent(searxng: FakeHTTPServer) -> None:
    from plait.actions.web_browser import WebBrowser

    browser = WebBrowser(searcher_type="SearxngSearch", url=f"{searxng.base_url}/search", topk=3)
    ret = browser({"query": ["meaning"]}, "search")
    assert ret.state == ActionStatusCode.SUCCESS, ret.errmsg
    assert "https://c.example/" in ret.result[0]["content"]
    browser.close()
