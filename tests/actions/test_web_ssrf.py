"""The SSRF guard: model-chosen URLs that reach private, loopback or link-local addresses are refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _web_support import SECRET, call, content, make, page

from plait.actions.web import BlockedURLError, URLGuard, is_public_address
from plait.actions.web_browser import AsyncWebBrowser, WebBrowser
from plait.schema import ActionStatusCode
from plait.testing.fake_http import Canned, FakeHTTPServer


@pytest.fixture
def server() -> Iterator[FakeHTTPServer]:
    with FakeHTTPServer() as srv:
        srv.route("GET", "/secret", Canned.html(page("Internal", "admin token 42")))
        yield srv


def guarded(mode: str, server: FakeHTTPServer, **kwargs: Any) -> Any:
    return make(mode, WebBrowser, AsyncWebBrowser, "BingSearch", api_key=SECRET,
                endpoint=server.url("/v7.0/search"), max_retry=1, **kwargs)  # fmt: skip


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/secret",
        "http://10.1.2.3/",
        "http://172.16.0.1/",
        "http://192.168.1.1/admin",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:{port}/secret",
        "http://[::ffff:127.0.0.1]:{port}/secret",
        "http://2130706433:{port}/secret",
        "http://0x7f.1:{port}/secret",
        "http://0.0.0.0:{port}/secret",
        "http://localhost:{port}/secret",
    ],
)
def test_open_url_refuses_private_addresses(mode: str, server: FakeHTTPServer, url: str) -> None:
    ret = call(guarded(mode, server), {"url": url.format(port=server.port)}, "open_url")
    assert ret.state == ActionStatusCode.ARGS_ERROR, ret
    assert "refused to fetch" in ret.errmsg
    assert server.requests_to("/secret") == []


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://127.0.0.1/", "http:///nohost"])
def test_open_url_refuses_other_schemes(mode: str, server: FakeHTTPServer, url: str) -> None:
    ret = call(guarded(mode, server), {"url": url}, "open_url")
    assert ret.state == ActionStatusCode.ARGS_ERROR
    assert "refused to fetch" in ret.errmsg


def test_select_refuses_private_results(mode: str, server: FakeHTTPServer) -> None:
    answer = {"webPages": {"value": [
        {"name": "meta", "url": "http://169.254.169.254/latest/", "snippet": "s"},
        {"name": "local", "url": server.url("/secret"), "snippet": "s"},
        {"name": "named", "url": f"http://localhost:{server.port}/secret", "snippet": "s"},
    ]}}  # fmt: skip
    server.route("GET", "/v7.0/search", Canned.json(answer))
    tool = guarded(mode, server)
    assert len(content(call(tool, {"query": "x"}, "search"))) == 3
    ret = call(tool, {"select_ids": [0, 1, 2]}, "select")
    assert ret.state == ActionStatusCode.ARGS_ERROR
    assert ret.errmsg.count("refused to fetch") == 3
    assert server.requests_to("/secret") == []


def test_redirect_to_a_private_address_is_refused(mode: str, server: FakeHTTPServer) -> None:
    # The first hop is allowed by name; the redirect target is a different, private host.
    server.route("GET", "/hop", Canned.redirect("http://169.254.169.254/latest/meta-data/"))
    tool = guarded(mode, server, url_guard=URLGuard(["localhost"]))
    ret = call(tool, {"url": f"http://localhost:{server.port}/hop"}, "open_url")
    assert ret.state == ActionStatusCode.ARGS_ERROR
    assert "169.254.169.254" in ret.errmsg


def test_allow_list_opens_intranet_hosts(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/hop", Canned.redirect("/secret"))
    by_network = guarded(mode, server, fetch_allow=["127.0.0.0/8"])
    ret = call(by_network, {"url": server.url("/hop")}, "open_url")
    assert ret.state == ActionStatusCode.SUCCESS and "admin token 42" in ret.result[0]["content"]
    by_name = guarded(mode, server, fetch_allow=["localhost"])
    ret = call(by_name, {"url": f"http://localhost:{server.port}/secret"}, "open_url")
    assert ret.state == ActionStatusCode.SUCCESS
    everything = guarded(mode, server, url_guard=URLGuard(allow_private=True))
    assert call(everything, {"url": server.url("/secret")}, "open_url").state == ActionStatusCode.SUCCESS


def test_guard_rules() -> None:
    guard = URLGuard(["10.0.0.0/8", "wiki.corp", ".intra"])
    assert guard.address_allowed("10.9.9.9") and not guard.address_allowed("192.168.0.1")
    assert guard.address_allowed("8.8.8.8") and guard.address_allowed("2001:4860:4860::8888")
    assert guard.host_allowed("wiki.corp") and guard.host_allowed("a.b.intra") and guard.host_allowed("intra")
    assert not guard.host_allowed("evil-wiki.corp")
    guard.check_url("https://example.com/page")  # public names are checked when resolved, not here
    guard.check_url("http://10.1.1.1/")
    for bad in ("http://127.0.0.1/", "http://[fe80::1]/", "http://100.64.0.1/", "http://224.0.0.1/"):
        with pytest.raises(BlockedURLError):
            guard.check_url(bad)
    assert not is_public_address("::ffff:10.0.0.1")
    assert not is_public_address("not an address")
    assert URLGuard(allow_private=True).resolver() is None
