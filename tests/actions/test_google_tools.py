"""GoogleSearch (serper.dev) and GoogleScholar (SerpAPI) against fake servers replaying recorded answers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _web_support import SECRET, call, content, fixture_json, make, serpapi_author_json

from plait.actions.google_scholar_search import AsyncGoogleScholar, GoogleScholar
from plait.actions.google_search import AsyncGoogleSearch, GoogleSearch
from plait.exceptions import UserError
from plait.schema import ActionStatusCode
from plait.testing.fake_http import Canned, FakeHTTPServer, RecordedRequest


@pytest.fixture
def server() -> Iterator[FakeHTTPServer]:
    with FakeHTTPServer() as srv:
        yield srv


# -- GoogleSearch -----------------------------------------------------------------------------


def google(mode: str, server: FakeHTTPServer, **kwargs: object) -> GoogleSearch:
    return make(mode, GoogleSearch, AsyncGoogleSearch, api_key=SECRET, endpoint=server.base_url, max_retry=1, **kwargs)  # type: ignore[no-any-return]


def test_google_search_answers(mode: str, server: FakeHTTPServer) -> None:
    answers = {"capital of china": "serper_search_answerbox.json", "apple inc": "serper_search_knowledge_graph.json"}
    server.route("POST", "/search", lambda req: Canned.json(fixture_json(answers[req.json()["q"]])))
    tool = google(mode, server)
    assert content(call(tool, {"query": "capital of china"})) == ["Beijing"]
    snippets = content(call(tool, {"query": "apple inc", "k": 2}))
    assert snippets[:2] == [
        "Apple: Technology company.",
        fixture_json(answers["apple inc"])["knowledgeGraph"]["description"],
    ]
    assert "Apple CEO: Tim Cook (Aug 24, 2011–)." in snippets
    assert len([s for s in snippets if s.startswith("Apple ") and ":" in s]) >= 6
    organic = fixture_json(answers["apple inc"])["organic"]
    assert snippets[-2:] == [organic[0]["snippet"], organic[1]["snippet"]]  # k=2 organic results
    assert server.requests[1].json() == {"q": "apple inc", "num": 2}
    assert server.requests[0].headers["x-api-key"] == SECRET


def test_google_search_errors(mode: str, server: FakeHTTPServer) -> None:
    server.route("POST", "/search", [Canned.json({"organic": []}), Canned.error(403, "Unauthorized."),
                                     Canned.json({"message": "Not enough credits", "statusCode": 400}),
                                     Canned.json({}, delay=60)])  # fmt: skip
    tool = google(mode, server, cache_ttl=0, timeout=2.0)  # the answers before the last need far less
    assert content(call(tool, {"query": "nothing"})) == ["No good Google Search Result was found"]
    ret = call(tool, {"query": "x"})
    assert ret.state == ActionStatusCode.API_ERROR and ret.errmsg == "403"  # Lagent's mapping of an error status
    ret = call(tool, {"query": "x"})
    assert ret.state == ActionStatusCode.API_ERROR and "Not enough credits" in ret.errmsg
    ret = call(tool, {"query": "x"})
    assert ret.state == ActionStatusCode.HTTP_ERROR and "did not answer" in ret.errmsg


def test_google_search_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERPER_API_KEY", "env-key")
    assert dict(GoogleSearch().build_request("q", 3).headers)["X-API-KEY"] == "env-key"
    assert dict(GoogleSearch(api_key="mine").build_request("q", 3).headers)["X-API-KEY"] == "mine"
    monkeypatch.delenv("SERPER_API_KEY")
    with pytest.raises(UserError, match="SERPER_API_KEY"):
        GoogleSearch()
    with pytest.raises(UserError, match="search_type"):
        GoogleSearch(api_key="k", search_type="videos")
    description = GoogleSearch(api_key="k").description
    assert description["name"] == "GoogleSearch" and [p["name"] for p in description["parameters"]] == ["query", "k"]


# -- GoogleScholar ----------------------------------------------------------------------------


def serpapi(req: RecordedRequest) -> Canned:
    engine = req.param("engine")
    if req.param("api_key") != SECRET:
        return Canned.json(
            {"error": "Invalid API key. Your API key should be here: https://serpapi.com/manage-api-key"}, 401
        )
    if engine == "google_scholar":
        return Canned.json(fixture_json("serpapi_google_scholar.json"))
    if engine == "google_scholar_cite":
        return Canned.json(fixture_json("serpapi_google_scholar_cite.json"))
    if engine == "google_scholar_author":
        return Canned.json(serpapi_author_json())
    if engine == "google_scholar_profiles":
        if req.param("mauthors") == "nobody":
            return Canned.json({"search_metadata": {"status": "Success"}, "profiles": []})
        return Canned.json({"profiles": [{"name": "Cliff Meyer", "author_id": "EicYvbwAAAAJ", "affiliations": "DFCI"}]})
    return Canned.error(400, "unknown engine")


def scholar(mode: str, server: FakeHTTPServer, key: str = SECRET) -> GoogleScholar:
    return make(mode, GoogleScholar, AsyncGoogleScholar, api_key=key, endpoint=server.url("/search.json"), max_retry=1)  # type: ignore[no-any-return]


def test_scholar_apis(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/search.json", serpapi)
    tool = scholar(mode, server)
    found = content(call(tool, {"query": "bananas", "num": 2, "as_ylo": 2010}, "search_google_scholar"))
    recorded = fixture_json("serpapi_google_scholar.json")["organic_results"]
    assert found["title"] == [r["title"] for r in recorded[:3]]
    assert found["organic_id"][0] == "dyZ4bDycdLQJ" and found["cited_by"][0] == 1179
    assert found["pub_info"][0] == "JC Robinson, VG Saúco - 2010 - books.google.com"
    sent = server.requests[0]
    assert sent.query == {"engine": ["google_scholar"], "as_ylo": ["2010"], "num": ["2"], "q": ["bananas"],
                          "api_key": [SECRET]}  # fmt: skip

    cite = content(call(tool, {"q": "FDc6HiktlqEJ"}, "get_citation_format"))
    assert cite["citation"].startswith("Schwertmann, U. T. R. M., and Reginald M. Taylor. Iron oxides.")
    assert set(cite["formats"]) >= {"MLA", "APA", "Chicago"}

    author = content(call(tool, {"author_id": "EicYvbwAAAAJ"}, "get_author_information"))
    assert author["name"] == "Cliff Meyer" and len(author["articles"]) == 3
    assert author["cited_by"] == {"citations": 466834, "h_index": 314, "i10_index": 1164}
    assert author["interests"] == ["Computational Biology"]

    assert content(call(tool, {"mauthors": "Cliff Meyer"}, "get_author_id")) == {
        "author_id": "EicYvbwAAAAJ", "name": "Cliff Meyer",
    }  # fmt: skip
    assert server.requests[-1].param("hl") == "en"  # the default is sent by both twins
    ret = call(tool, {"mauthors": "nobody"}, "get_author_id")
    assert ret.state == ActionStatusCode.API_ERROR and "no Google Scholar profile" in ret.errmsg


def test_scholar_errors_never_show_the_key(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/search.json", serpapi)
    ret = call(scholar(mode, server, key="wrong-key-123"), {"query": "x"}, "search_google_scholar")
    assert ret.state == ActionStatusCode.HTTP_ERROR
    assert "SerpAPI answered HTTP 401 Unauthorized: Invalid API key" in ret.errmsg
    assert "wrong-key-123" not in ret.errmsg and "wrong-key-123" not in repr(ret)
    server.route("GET", "/search.json", Canned.json({"error": "Google hasn't returned any results for this query."}))
    ret = call(scholar(mode, server), {"query": "zz"}, "search_google_scholar")
    assert ret.state == ActionStatusCode.API_ERROR and "hasn't returned any results" in ret.errmsg


def test_scholar_key_comes_from_serpapi_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERPAPI_API_KEY", "env-key")
    assert dict(GoogleScholar().build_request("google_scholar", {}).params)["api_key"] == "env-key"
    assert dict(GoogleScholar(api_key="mine").build_request("google_scholar", {}).params)["api_key"] == "mine"
    monkeypatch.delenv("SERPAPI_API_KEY")
    monkeypatch.setenv("SERPER_API_KEY", "serper-is-another-service")
    with pytest.raises(UserError, match="SERPAPI_API_KEY"):
        GoogleScholar()
    apis = [api["name"] for api in GoogleScholar(api_key="k").description["api_list"]]
    assert apis == ["search_google_scholar", "get_author_information", "get_citation_format", "get_author_id"]
    assert AsyncGoogleScholar(api_key="k").description["api_list"] == GoogleScholar(api_key="k").description["api_list"]
