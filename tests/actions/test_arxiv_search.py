"""ArxivSearch against a fake arXiv API replaying a recorded Atom feed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _web_support import call, content, fixture_path, make

from plait.actions import ActionExecutor
from plait.actions.arxiv_search import ArxivSearch, AsyncArxivSearch, parse_arxiv_feed
from plait.actions.web import APIResponseError
from plait.schema import ActionStatusCode
from plait.testing.fake_http import Canned, FakeHTTPServer

# Lagent 0.5.x's JsonParser hint (issue 38).
JSON_HINT = (
    "If you call this tool, you must pass arguments in the JSON format {key: value}, "
    "where the key is the parameter name."
)
API = "get_arxiv_article_information"
EMPTY_FEED = """<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">
  <title>arXiv Query: search_query=all:zzqqxx</title>
  <opensearch:totalResults>0</opensearch:totalResults>
</feed>"""
ERROR_FEED = """<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <entry><id>http://arxiv.org/api/errors#incorrect_id_format_for_1234</id><title>Error</title>
  <summary>incorrect id format for 1234</summary></entry>
</feed>"""


@pytest.fixture
def server() -> Iterator[FakeHTTPServer]:
    with FakeHTTPServer() as srv:
        yield srv


def arxiv(mode: str, server: FakeHTTPServer, **kwargs: object) -> ArxivSearch:
    return make(mode, ArxivSearch, AsyncArxivSearch, endpoint=server.url("/api/query"), max_retry=1, **kwargs)  # type: ignore[no-any-return]


def test_search_formats_the_papers(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/api/query", Canned.xml(fixture_path("arxiv_query_2_entries.xml")))
    tool = arxiv(mode, server, doc_content_chars_max=60, max_query_len=12)
    ret = call(tool, {"query": "all:electron AND all:proton"}, API)
    assert ret.state == ActionStatusCode.SUCCESS
    text = content(ret)["content"]
    first, second = text.split("\n\n")
    assert first == (
        "Published: 2004-08-18\n"
        "Title: Two-photon exchange and elastic scattering of electrons/positrons on the proton. "
        "(Proposal for an experiment at VEPP-3)\n"
        "Authors: J. Arrington, V. F. Dmitriev, R. J. Holt, D. M. Nikolenko, I. A. Rachek, Yu. V. Shestakov, "
        "V. N. Stibunov, D. K. Toporkov, H. de Vries\n"
        "Summary: It has been suggested that two-photon exchange corrections c"
    )
    assert second.startswith("Published: 2013-09-18\nTitle: Electron cloud observations at the ISIS Proton Synchrotron")
    sent = server.requests[0]
    assert sent.query == {"search_query": ["all:electron"], "start": ["0"], "max_results": ["3"]}


def test_empty_feed_and_errors(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/api/query", [Canned.xml(EMPTY_FEED), Canned.xml(ERROR_FEED), Canned.error(503),
                                       Canned.text("not xml", content_type="text/html")])  # fmt: skip
    tool = arxiv(mode, server, cache_ttl=0)
    assert content(call(tool, {"query": "zzqqxx"}, API)) == {"content": "No good Arxiv Result was found"}
    ret = call(tool, {"query": "id:1234"}, API)
    assert ret.state == ActionStatusCode.API_ERROR and "incorrect id format for 1234" in ret.errmsg
    ret = call(tool, {"query": "x"}, API)
    assert ret.state == ActionStatusCode.HTTP_ERROR and "the arXiv API answered HTTP 503" in ret.errmsg
    ret = call(tool, {"query": "x"}, API)
    assert ret.state == ActionStatusCode.API_ERROR and "not an Atom feed" in ret.errmsg
    ret = call(tool, {"query": "  "}, API)
    assert ret.state == ActionStatusCode.ARGS_ERROR


def test_timeout(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/api/query", Canned.xml(EMPTY_FEED, delay=60))  # only the time limit can end it
    ret = call(arxiv(mode, server, timeout=1.0), {"query": "x"}, API)
    assert ret.state == ActionStatusCode.HTTP_ERROR and "did not answer within 1 s" in ret.errmsg


def test_seed_003_executor_description() -> None:
    executor = ActionExecutor(actions=[ArxivSearch()])
    assert executor.description() == [
        {
            "name": "ArxivSearch.get_arxiv_article_information",
            "description": "Run Arxiv search and get the article meta information.",
            "parameters": [{"name": "query", "type": "STRING", "description": "the content of search query"}],
            "required": ["query"],
            "return_data": [{"name": "content", "description": "a list of 3 arxiv search papers", "type": "STRING"}],
            "parameter_description": JSON_HINT,
        }
    ]
    assert ArxivSearch().description["description"].startswith("Search information from Arxiv.org. Useful for")
    assert AsyncArxivSearch().description["api_list"] == ArxivSearch().description["api_list"]


def test_parse_feed_rejects_non_feeds() -> None:
    with pytest.raises(APIResponseError):
        parse_arxiv_feed("<html/>")
    papers = parse_arxiv_feed(fixture_path("arxiv_query_2_entries.xml").read_bytes())
    assert papers[0].pdf_url == "https://arxiv.org/pdf/nucl-ex/0408020v1"
    assert papers[0].id == "http://arxiv.org/abs/nucl-ex/0408020v1"
