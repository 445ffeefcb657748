"""Each search backend against a fake server replaying recorded (or documented-shape) answers."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from _web_support import SECRET, ddg_html, fixture_json, searxng_json, tencent_json

from _support import resolve
from plait.actions.web import APIResponseError, HTTPStatusError, WebTimeoutError
from plait.actions.web.searchers import (
    BaseSearch,
    BingSearch,
    BraveSearch,
    DuckDuckGoSearch,
    GoogleSearch,
    SearxngSearch,
    TencentSearch,
    clean_snippet,
    get_searcher,
    searcher_names,
)
from plait.actions.web.tc3 import sign_request
from plait.exceptions import UserError
from plait.testing.fake_http import Canned, FakeHTTPServer


@pytest.fixture
def server() -> Iterator[FakeHTTPServer]:
    with FakeHTTPServer() as srv:
        yield srv


def run_search(mode: str, searcher: BaseSearch, query: str) -> dict[int, dict[str, str]]:
    """`search` in sync mode, `asearch` in async mode."""
    return resolve(searcher.search(query) if mode == "sync" else searcher.asearch(query))


def test_registry() -> None:
    assert set(searcher_names()) >= {
        "DuckDuckGoSearch", "BingSearch", "BraveSearch", "GoogleSearch", "TencentSearch", "SearxngSearch",
    }  # fmt: skip
    assert get_searcher("TencentSearch") is TencentSearch
    with pytest.raises(UserError, match="did you mean 'BraveSearch'"):
        get_searcher("BravSearch")


def test_bing_web(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/v7.0/search", Canned.json(fixture_json("bing_web_search.json")))
    searcher = BingSearch(api_key=SECRET, region="en-US", topk=3, endpoint=server.url("/v7.0/search"))
    results = run_search(mode, searcher, "Microsoft Cognitive Services")
    assert results == {0: {
        "url": "https://www.microsoft.com/cognitive-services",
        "summ": "Knock down barriers between you and your ideas. Enable natural and contextual interaction with tools "
        "that augment users' experiences via the power of machine-based AI. Plug them in and bring your ideas to life.",
        "title": "Microsoft Cognitive Services",
    }}  # fmt: skip
    sent = server.requests[0]
    assert sent.query == {"q": ["Microsoft Cognitive Services"], "mkt": ["en-US"], "count": ["6"]}
    assert sent.headers["ocp-apim-subscription-key"] == SECRET


def test_bing_news(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/news", Canned.json(fixture_json("bing_news_search.json")))
    searcher = BingSearch(api_key=SECRET, search_type="news", endpoint=server.url("/news"))
    results = run_search(mode, searcher, "Microsoft")
    assert [r["title"] for r in results.values()] == [
        "Microsoft to open flagship London brick-and-mortar retail store",
        "Microsoft adds Availability Zones to its Azure cloud platform",
    ]
    assert results[0]["summ"].startswith("After years of rumors")


def test_bing_reports_api_errors(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/s", Canned.json({"_type": "ErrorResponse", "errors": [{"message": "Invalid mkt"}]}))
    with pytest.raises(APIResponseError, match="Invalid mkt"):
        run_search(mode, BingSearch(api_key=SECRET, endpoint=server.url("/s")), "q")


@pytest.mark.parametrize("search_type", ["web", "news"])
def test_brave(mode: str, server: FakeHTTPServer, search_type: str) -> None:
    name = "brave_web_search.json" if search_type == "web" else "brave_news_search.json"
    server.route("GET", f"/res/v1/{search_type}/search", Canned.json(fixture_json(name)))
    searcher = BraveSearch(api_key=SECRET, search_type=search_type, topk=2, endpoint=server.url("/res/v1"),
                           params={"safesearch": "strict"})  # fmt: skip
    results = run_search(mode, searcher, "hello world")
    assert len(results) == 2
    if search_type == "web":
        assert results[0]["title"] == '"Hello, World!" program - Wikipedia'
        assert results[0]["summ"].startswith('A "Hello, World!" program is usually a simple computer program')
        assert "<strong>" not in results[0]["summ"] and "&quot;" not in results[0]["summ"]
    else:
        assert results[0] == {
            "url": "https://www.npr.org/sections/world/",
            "summ": fixture_json(name)["results"][0]["description"],
            "title": "World News and International Headlines : NPR",
        }
    sent = server.requests[0]
    assert sent.headers["x-subscription-token"] == SECRET
    assert sent.param("count") == "2" and sent.param("safesearch") == "strict"
    assert sent.param("extra_snippets") == "true"


def test_serper_answer_box_and_knowledge_graph(mode: str, server: FakeHTTPServer) -> None:
    answers = {"capital of china": "serper_search_answerbox.json", "apple inc": "serper_search_knowledge_graph.json"}
    server.route("POST", "/search", lambda req: Canned.json(fixture_json(answers[req.json()["q"]])))
    searcher = GoogleSearch(api_key=SECRET, topk=3, endpoint=server.url(""))
    results = run_search(mode, searcher, "capital of china")
    assert results[0] == {"url": "", "summ": "Beijing", "title": "China / Capital"}
    assert results[1]["url"] == "https://en.wikipedia.org/wiki/Beijing"
    graph = run_search(mode, searcher, "apple inc")
    assert graph[0]["title"] == "Apple: Technology company"
    assert graph[0]["url"] == "https://en.wikipedia.org/wiki/Apple_Inc."
    assert "Founders: Steve Jobs, Steve Wozniak, and Ronald Wayne" in graph[0]["summ"]
    body = server.requests[0].json()
    assert body == {"q": "capital of china", "num": 3}
    assert server.requests[0].headers["x-api-key"] == SECRET


def test_duckduckgo(mode: str, server: FakeHTTPServer) -> None:
    server.route("POST", "/html/", Canned.html(ddg_html([
        ("https://example.com/a?x=1&y=2", "Example <b>A</b>", "First &lt;snippet&gt;"),
        ("https://example.org/paper.pdf", "A PDF", "skipped"),
        ("https://example.net/b", "Example B", "Second snippet"),
    ], ad=("https://shop.example/", "Ad", "buy"))))  # fmt: skip
    searcher = DuckDuckGoSearch(topk=5, region="us-en", endpoint=server.url("/html/"))
    results = run_search(mode, searcher, "example")
    assert results == {
        0: {"url": "https://example.com/a?x=1&y=2", "summ": "First <snippet>", "title": "Example A"},
        1: {"url": "https://example.net/b", "summ": "Second snippet", "title": "Example B"},
    }


def test_duckduckgo_rate_limit_and_no_results(mode: str, server: FakeHTTPServer) -> None:
    server.route("POST", "/html/", [Canned.html("<html>anomaly</html>", status=202), Canned.html(ddg_html([]))])
    searcher = DuckDuckGoSearch(endpoint=server.url("/html/"), max_retry=1, cache_ttl=0)
    with pytest.raises(APIResponseError, match="rate limit"):
        run_search(mode, searcher, "x")
    assert run_search(mode, searcher, "x") == {}


def test_searxng(mode: str, server: FakeHTTPServer) -> None:
    answer = searxng_json(
        [("https://a.example/", "A", "alpha"), ("https://youtube.com/watch?v=1", "Y", "video"),
         ("https://b.example/", "B", "beta")],
        answers=["42"],
    )  # fmt: skip
    server.route("GET", "/search", Canned.json(answer))
    searcher = SearxngSearch(api_key=SECRET, auth_name="X-Token", url=server.base_url, topk=3)
    results = run_search(mode, searcher, "meaning")
    assert results == {
        0: {"url": "", "summ": "42", "title": ""},
        1: {"url": "https://a.example/", "summ": "alpha", "title": "A"},
        2: {"url": "https://b.example/", "summ": "beta", "title": "B"},
    }
    sent = server.requests[0]
    assert sent.param("format") == "json" and sent.param("q") == "meaning"
    assert sent.headers["x-token"] == SECRET


def test_tencent_signs_and_parses(mode: str, server: FakeHTTPServer) -> None:
    pages = [
        {"title": "T1", "url": "https://t1.example/", "passage": "p1", "site": "t1", "score": 0.9},
        {"title": "No URL", "url": "", "passage": "dropped"},
        {"title": "T2", "url": "https://t2.example/", "content": "c2"},
    ]
    server.route(
        "POST", "/", lambda req: Canned.json(tencent_json(pages, wrap_display=req.json()["Query"] == "wrapped"))
    )
    searcher = TencentSearch(
        secret_id="AKIDexample", secret_key="tencent-secret-key", insite="zhihu.com", tsn=2,
        endpoint=server.url("/"), clock=lambda: 1700000000.5,
    )  # fmt: skip
    expected = {
        0: {"url": "https://t1.example/", "summ": "p1", "title": "T1"},
        1: {"url": "https://t2.example/", "summ": "c2", "title": "T2"},
    }
    assert run_search(mode, searcher, "腾讯 搜索") == expected
    assert run_search(mode, searcher, "wrapped") == expected
    sent = server.requests[0]
    payload = sent.body.decode("utf-8")
    assert json.loads(payload) == {"Query": "腾讯 搜索", "Tsn": 2, "Insite": "zhihu.com"}
    assert sent.headers["x-tc-action"] == "SearchCommon" and sent.headers["x-tc-version"] == "2020-12-29"
    assert sent.headers["x-tc-timestamp"] == "1700000000"
    signed = sign_request(secret_id="AKIDexample", secret_key="tencent-secret-key", service="tms",
                          host="tms.tencentcloudapi.com", payload=payload, timestamp=1700000000,
                          action="SearchCommon")  # fmt: skip
    assert sent.headers["authorization"] == signed.authorization
    assert "tencent-secret-key" not in json.dumps(sent.headers)


def test_tencent_error_payload(mode: str, server: FakeHTTPServer) -> None:
    error = {"Response": {"Error": {"Code": "AuthFailure.SignatureFailure", "Message": "bad signature"},
                          "RequestId": "r"}}  # fmt: skip
    server.route("POST", "/", Canned.json(error))
    searcher = TencentSearch(secret_id="id", secret_key="key", endpoint=server.url("/"))
    with pytest.raises(APIResponseError, match=r"AuthFailure\.SignatureFailure: bad signature"):
        run_search(mode, searcher, "q")


def test_http_errors_timeouts_and_cache(mode: str, server: FakeHTTPServer) -> None:
    server.route("POST", "/search", [Canned.error(401, "Unauthorized."), Canned.json({"organic": []}, delay=60)])
    searcher = GoogleSearch(api_key=SECRET, endpoint=server.url(""), max_retry=1, timeout=2.0)  # answers need far less
    with pytest.raises(HTTPStatusError) as info:
        run_search(mode, searcher, "q")
    assert info.value.status == 401 and "serper.dev answered HTTP 401 Unauthorized: Unauthorized." in str(info.value)
    with pytest.raises(WebTimeoutError):
        run_search(mode, searcher, "q")
    server.route("POST", "/search", Canned.json(fixture_json("serper_search_answerbox.json")))
    first = run_search(mode, searcher, "cached?")
    assert run_search(mode, searcher, "cached?") == first
    assert len(server.requests) == 3  # the second identical query came from the cache


def test_black_list_and_topk(mode: str, server: FakeHTTPServer) -> None:
    answer = searxng_json([(f"https://site{i}.example/", f"S{i}", "x") for i in range(6)])
    server.route("GET", "/search", Canned.json(answer))
    searcher = SearxngSearch(url=server.base_url, topk=2, black_list=["site0.example"])
    assert [r["url"] for r in run_search(mode, searcher, "q").values()] == [
        "https://site1.example/", "https://site2.example/",
    ]  # fmt: skip


def test_explicit_key_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BING_SEARCH_API_KEY", "from-env")
    monkeypatch.setenv("SEARXNG_URL", "http://searx.env:8888/")
    assert BingSearch().build_request("q").headers == (("Ocp-Apim-Subscription-Key", "from-env"),)
    assert BingSearch(api_key="explicit").build_request("q").headers == (("Ocp-Apim-Subscription-Key", "explicit"),)
    assert SearxngSearch().url == "http://searx.env:8888"
    assert SearxngSearch(url="http://mine:1").url == "http://mine:1"
    monkeypatch.delenv("BING_SEARCH_API_KEY")
    with pytest.raises(UserError, match=r"BING_SEARCH_API_KEY"):
        BingSearch()
    for cls, kwargs in ((BraveSearch, {}), (GoogleSearch, {}), (TencentSearch, {"secret_id": "x"})):
        for var in ("BRAVE_SEARCH_API_KEY", "SERPER_API_KEY", "TENCENTCLOUD_SECRET_KEY"):
            monkeypatch.delenv(var, raising=False)
        with pytest.raises(UserError):
            cls(**kwargs)


def test_clean_snippet() -> None:
    assert clean_snippet("A <strong>b</strong> &amp;\n c") == "A b & c"
    assert clean_snippet(None) == "" and clean_snippet(3) == "3"


def test_requests_keep_secrets_out_of_their_repr() -> None:
    request = SearxngSearch(api_key=SECRET, url="http://s").build_request("q")
    assert SECRET not in repr(request)
    tencent = TencentSearch(secret_id="id", secret_key="tencent-secret-key", endpoint="http://t/").build_request("q")
    assert "tencent-secret-key" not in repr(tencent)
