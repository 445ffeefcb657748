"""The web IO layer: requests as data, retries, timeouts, cache, redaction, HTML to text."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest
from _web_support import SECRET

from _support import resolve
from plait.actions.web import (
    HTTPRequest,
    HTTPResponse,
    HTTPStatusError,
    RetryConfig,
    SyncBridge,
    TTLCache,
    WebClient,
    WebConnectionError,
    WebTimeoutError,
    redact,
)
from plait.actions.web.fetcher import ContentFetcher, page_text
from plait.actions.web.html_text import html_title, html_to_text
from plait.actions.web.ssrf import URLGuard
from plait.schema import ActionStatusCode
from plait.testing.fake_http import Canned, FakeHTTPServer


@pytest.fixture
def server() -> Iterator[FakeHTTPServer]:
    with FakeHTTPServer() as srv:
        yield srv


class Owner:
    """Something for a `SyncBridge` to belong to."""


def send(mode: str, client: WebClient, request: HTTPRequest) -> HTTPResponse:
    """`client.send` on a private loop thread (sync) or on a fresh event loop (async)."""
    if mode == "sync":
        owner = Owner()
        bridge = SyncBridge(owner, [client])
        try:
            return bridge.run(client.send(request))
        finally:
            bridge.close()
    return resolve(client.send(request))  # type: ignore[no-any-return]


def test_request_building_encodes_everything() -> None:
    request = HTTPRequest.build(
        "get", "https://maps.example/REST/v1/Routes?o=json",
        params={"wp.0": "Redmond, WA & more", "wp.1": "北京", "skip": None, "flag": True, "key": SECRET},
        secrets=[SECRET],
    )  # fmt: skip
    assert request.method == "GET"
    assert request.full_url == (
        "https://maps.example/REST/v1/Routes?o=json&wp.0=Redmond%2C%20WA%20%26%20more"
        "&wp.1=%E5%8C%97%E4%BA%AC&flag=true&key=" + SECRET.replace("-", "-")
    )
    assert SECRET not in request.safe_url and "key=***" in request.safe_url
    assert SECRET not in repr(request)
    form = HTTPRequest.build("POST", "http://x/", form={"q": "a b", "n": 1})
    assert form.body == b"q=a%20b&n=1" and dict(form.headers)["Content-Type"] == "application/x-www-form-urlencoded"
    body = HTTPRequest.build("POST", "http://x/", json_body={"q": "é"})
    assert body.body == '{"q": "é"}'.encode() and dict(body.headers)["Content-Type"] == "application/json"
    assert body.cache_key() != form.cache_key()


def test_redact() -> None:
    text = f"GET /x?api_key={SECRET}&q=1 failed; token={SECRET}; raw {SECRET}"
    assert redact(text, [SECRET]) == "GET /x?api_key=***&q=1 failed; token=***; raw ***"
    assert redact(f"token={SECRET}; x", ()) == "token=***; x"
    assert redact("https://h/?key=abc&subscription-key=zz&sig=1") == "https://h/?key=***&subscription-key=***&sig=***"


def test_ttl_cache_expires_and_evicts() -> None:
    now = [0.0]
    cache: TTLCache[str, int] = TTLCache(maxsize=2, ttl=10, clock=lambda: now[0])
    cache.set("a", 1)
    cache.set("b", 2)
    assert cache.get("a") == 1
    cache.set("c", 3)  # evicts the least recently used: b
    assert cache.get("b") is None and len(cache) == 2
    now[0] = 11
    assert cache.get("a") is None and cache.get("c") is None


def test_retry_delays_are_bounded() -> None:
    policy = RetryConfig(max_attempts=4, backoff=1.0, backoff_max=3.0)
    assert 0.5 <= policy.delay(1) <= 1.0
    assert 1.0 <= policy.delay(2) <= 2.0
    assert 1.5 <= policy.delay(5) <= 3.0
    assert policy.delay(1, retry_after=100) == 3.0


def test_retries_then_gives_up(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/flaky", [Canned.error(502), Canned.error(500), Canned.error(503, "still down")])
    client = WebClient(retry=RetryConfig(max_attempts=3, backoff=0.01))
    with pytest.raises(HTTPStatusError) as info:
        send(mode, client, HTTPRequest.build("GET", server.url("/flaky"), service="Flaky API"))
    assert info.value.status == 503
    assert str(info.value) == "Flaky API answered HTTP 503 Service Unavailable: still down"
    assert info.value.state == ActionStatusCode.HTTP_ERROR
    assert len(server.requests) == 3


def test_client_errors_are_not_retried(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/bad", Canned.error(400, f"bad key {SECRET}"))
    client = WebClient(retry=RetryConfig(max_attempts=3, backoff=0.01))
    with pytest.raises(HTTPStatusError) as info:
        send(mode, client, HTTPRequest.build("GET", server.url("/bad"), params={"key": SECRET}, secrets=[SECRET]))
    assert SECRET not in str(info.value) and "key=***" in str(info.value)
    assert len(server.requests) == 1


def test_timeout_and_connection_refused(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/slow", Canned.text("late", delay=60))  # only the time limit can end it
    client = WebClient(timeout=0.5, retry=RetryConfig(max_attempts=2, backoff=0.01))
    with pytest.raises(WebTimeoutError, match=r"did not answer within 0\.5 s"):
        send(mode, client, HTTPRequest.build("GET", server.url("/slow")))
    assert len(server.requests) == 2  # timeouts are retried
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    with pytest.raises(WebConnectionError, match="could not connect"):
        send(
            mode,
            WebClient(retry=RetryConfig(max_attempts=1)),
            HTTPRequest.build("GET", f"http://127.0.0.1:{closed_port}/"),
        )


def test_cache_and_size_limit(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/big", Canned.text("x" * 200_000))
    client = WebClient(cache=TTLCache(), max_bytes=1000)
    first = send(mode, client, HTTPRequest.build("GET", server.url("/big")))
    assert first.truncated and len(first.body) == 1000
    second = send(mode, client, HTTPRequest.build("GET", server.url("/big")))
    assert second is first and len(server.requests) == 1


def test_html_to_text() -> None:
    html = """<html><head><title> My  Page </title><meta charset="utf-8"><style>.a{}</style></head>
    <body><nav>menu</nav><h1>Heading</h1><p>One   two<br>three &amp; four</p>
    <ul><li>first</li><li>second</li></ul><script>alert(1)</script>
    <table><tr><td>a</td><td>b</td></tr></table><pre>  keep
      spacing</pre><template><p>hidden</p></template></body></html>"""
    assert html_title(html) == "My Page"
    assert (
        html_to_text(html) == "My Page\nHeading\nOne two\nthree & four\n- first\n- second\na b\n  keep\n      spacing"
    )
    assert html_to_text("<p>unclosed <b>tags") == "unclosed tags"
    assert html_to_text("<head><title>T</title></head><body><p>body</p>", with_title=False) == "body"


def test_page_text_by_content_type() -> None:
    def response(body: bytes, kind: str) -> HTTPResponse:
        return HTTPResponse(200, "http://x/doc", {"content-type": kind}, body)

    assert page_text(response(b"<p>hi</p>", "text/html")) == "hi"
    assert page_text(response("<p>caf\xe9</p>".encode("latin-1"), "text/html; charset=iso-8859-1")) == "café"
    assert page_text(response(b'{"a": [1]}', "application/json")) == '{\n "a": [\n  1\n ]\n}'
    assert page_text(response(b" plain \n", "text/plain")) == "plain"
    with pytest.raises(Exception, match="is application/pdf, not a text page") as info:
        page_text(response(b"%PDF-1.7", "application/pdf"))
    assert getattr(info.value, "state", None) == ActionStatusCode.API_ERROR


def test_fetcher_reads_pages(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/doc", Canned.html("<title>Doc</title><p>Body text</p>"))
    server.route("GET", "/big", Canned.html("<title>Big</title>" + "<p>paragraph</p>" * 20_000))
    fetcher = ContentFetcher(timeout=2, guard=URLGuard(["127.0.0.1"]))

    async def fetch() -> tuple[str, str]:
        try:
            return await fetcher.afetch(server.url("/doc")), await fetcher.afetch(server.url("/big"))
        finally:
            await fetcher.aclose()

    if mode == "sync":
        owner = Owner()
        bridge = SyncBridge(owner, [fetcher.client])
        text, big = bridge.run(fetch())
        bridge.close()
    else:
        text, big = asyncio.run(fetch())
    assert text == "Doc\nBody text"
    assert big.startswith("Big\nparagraph\n") and big.count("paragraph") == 20_000  # parsed off the loop
