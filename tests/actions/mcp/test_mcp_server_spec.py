"""MCPServer to the letter of MCP 2025-11-25, checked with the official SDK's client on 127.0.0.1.

Cancellation leaves the session working (Streamable HTTP and stdio); ``Host`` and ``Origin``
are checked against an allow-list (DNS rebinding); JSON-RPC errors carry the spec's codes;
typed tools advertise ``outputSchema`` and answer with ``structuredContent``; files come
back as resource links.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import spec_server

import plait
from plait.actions.mcp import MCPServer
from plait.actions.mcp._hosts import HostAllowList
from plait.exceptions import UserError

mcp = pytest.importorskip("mcp")
aiohttp = pytest.importorskip("aiohttp")
jsonschema = pytest.importorskip("jsonschema")
from mcp.client.stdio import StdioServerParameters  # noqa: E402

SPEC_SERVER = str(Path(spec_server.__file__))
SOURCE = str(Path(plait.__file__).resolve().parents[1])  # the stdio server imports this plait


def text_of(result: Any) -> str:
    return "\n".join(part.text for part in result.content if part.type == "text")


async def wait_for_file(path: Path, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while not await asyncio.to_thread(path.exists):
        assert time.monotonic() < deadline, f"the tool never started ({path} missing)"
        await asyncio.sleep(0.02)


async def cancel_a_call_then_call_again(client: Any, marker: Path) -> None:
    """Cancel an in-flight ``hang`` once it runs; the same client then gets answers."""
    call = asyncio.ensure_future(client.call_tool("hang", {"marker": str(marker)}))
    await wait_for_file(marker)
    call.cancel()  # the SDK sends notifications/cancelled for it
    with pytest.raises(asyncio.CancelledError):
        await call
    assert text_of(await client.call_tool("reverse", {"text": "abc"})) == "cba"
    deadline = time.monotonic() + 60
    while text_of(await client.call_tool("cancelled", {})) != "1":  # the tool's own task was cancelled
        assert time.monotonic() < deadline, "the cancelled tool kept running"
        await asyncio.sleep(0.05)


def test_a_cancelled_call_over_http_leaves_the_session_answering(tmp_path: Path) -> None:
    spec_server.CANCELLED[0] = 0

    async def run() -> None:
        async with spec_server.server.serve_http(port=0) as url, mcp.Client(url) as client:
            await cancel_a_call_then_call_again(client, tmp_path / "started")
            assert text_of(await client.call_tool("reverse", {"text": "xy"})) == "yx"

    asyncio.run(run())


def test_a_cancelled_call_over_stdio_leaves_the_session_answering(tmp_path: Path) -> None:
    async def run() -> None:
        params = StdioServerParameters(command=sys.executable, args=[SPEC_SERVER], env={"PYTHONPATH": SOURCE})
        async with mcp.Client(params) as client:
            await cancel_a_call_then_call_again(client, tmp_path / "started")

    asyncio.run(run())


async def post_raw(http: Any, url: str, message: object, **headers: str) -> tuple[int, Any]:
    async with http.post(url, data=json.dumps(message), headers={"Content-Type": "application/json", **headers}) as r:
        text = await r.text()
        return r.status, (json.loads(text) if text else None)


@contextlib.asynccontextmanager
async def raw_session(url: str, version: str = "2025-11-25", **headers: str) -> AsyncIterator[tuple[Any, str]]:
    """An aiohttp session and an initialized MCP session id (sent with `headers`)."""
    async with aiohttp.ClientSession() as http:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": version}}
        async with http.post(url, json=init, headers=headers) as response:
            assert response.status == 200, await response.text()
            yield http, response.headers["Mcp-Session-Id"]


PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def test_host_and_origin_are_checked_against_the_allow_list() -> None:
    async def run() -> None:
        async with spec_server.server.serve_http(port=0) as url, raw_session(url) as (http, sid):
            port = url.split(":")[2].split("/")[0]
            s = {"Mcp-Session-Id": sid}
            evil = {"Host": "evil.example.com", "Origin": "http://evil.example.com"}  # a rebinding page's request
            for headers in (
                evil,
                {"Host": "evil.example.com"},
                {"Host": f"evil.example.com:{port}"},
                {"Origin": "http://evil.example.com"},  # a cross-site page, the Host right
                {"Origin": "null"},
                {"Host": f"127.0.0.1:{port}", "Origin": f"http://evil.example.com:{port}"},
            ):
                status, body = await post_raw(http, url, PING, **s, **headers)
                assert status == 403, headers
                assert "not allowed" in body["error"]["message"]
            async with http.get(url, headers={**s, **evil}) as response:
                assert response.status == 403
            async with http.delete(url, headers={**s, **evil}) as response:
                assert response.status == 403
            for headers in (
                {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"},
                {"Host": f"[::1]:{port}", "Origin": "http://127.0.0.1:5173"},  # any port of a loopback name
                {"Host": "127.0.0.1"},
            ):
                assert (await post_raw(http, url, PING, **s, **headers))[0] == 200, headers
        named = MCPServer([spec_server.reverse]).serve_http(port=0, allowed_hosts=["mcp.example.com:8443"])
        async with named as url, raw_session(url, Host="mcp.example.com:8443") as (http, sid):
            s = {"Mcp-Session-Id": sid}
            assert (await post_raw(http, url, PING, **s, Host="mcp.example.com:8443"))[0] == 200
            assert (await post_raw(http, url, PING, **s, Host="mcp.example.com:8080"))[0] == 403
            assert (await post_raw(http, url, PING, **s))[0] == 403  # 127.0.0.1: not listed now
        anyone = MCPServer([spec_server.reverse]).serve_http(port=0, allowed_hosts=["*"])
        async with anyone as url, raw_session(url, **evil) as (http, sid):
            assert (await post_raw(http, url, PING, **{"Mcp-Session-Id": sid}, **evil))[0] == 200

    asyncio.run(run())


def test_allow_list_entries() -> None:
    default = HostAllowList(None)
    assert [default.allows(h) for h in ("localhost", "LOCALHOST:1", "127.0.0.1:8000", "[::1]:9", "::1")] == [True] * 5
    assert not default.allows("127.0.0.2") and not default.allows("") and not default.allows("a@localhost")
    assert HostAllowList(None, "10.0.0.5").allows("10.0.0.5:8000")  # the address it listens on
    assert not HostAllowList(None, "0.0.0.0").allows("0.0.0.0")  # a wildcard address names no host
    assert not default.allows_origin("file://localhost/x") and default.allows_origin("https://localhost")
    for bad in ("http://x", "", "a b", "host:port"):
        with pytest.raises(UserError, match="is not a host name"):
            HostAllowList([bad])


def test_protocol_errors_carry_the_spec_codes() -> None:
    async def run() -> None:
        async with spec_server.server.serve_http(port=0) as url, raw_session(url) as (http, sid):
            s = {"Mcp-Session-Id": sid}
            for cursor in ("bogus", "", 3):
                listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": cursor}}
                status, body = await post_raw(http, url, listing, **s)
                assert (status, body["id"], body["error"]["code"]) == (200, 2, -32602), cursor
            status, body = await post_raw(http, url, {"jsonrpc": "2.0", "id": 3}, **s)  # no method
            assert (status, body["id"], body["error"]["code"]) == (200, 3, -32600)
            call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "Geo.locate"}}
            status, body = await post_raw(http, url, call, **s)
            assert (body["id"], body["error"]["code"]) == (4, -32602)
            assert "'Geo.locate'. Did you mean 'Geo__locate'?" in body["error"]["message"]
            listing = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"cursor": None}}
            status, body = await post_raw(http, url, listing, **s)
            assert "Geo__locate" in [tool["name"] for tool in body["result"]["tools"]]

    asyncio.run(run())


def test_typed_tools_have_an_output_schema_and_structured_content() -> None:
    async def run() -> None:
        async with spec_server.server.serve_http(port=0) as url, mcp.Client(url) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            schemas = {name: tool.output_schema for name, tool in tools.items() if tool.output_schema}
            assert sorted(schemas) == ["Geo__locate", "liar", "stats", "weather"]
            assert schemas["weather"]["properties"]["degrees"] == {"title": "Degrees", "type": "number"}
            expected = {
                ("weather", "city"): {"city": "Rome", "degrees": 24.5, "sunny": True},
                ("Geo__locate", "city"): {"name": "Rome", "lat": 41.9, "lon": 12.5, "tags": ["capital"]},
                ("stats", "text"): {"words": 1, "chars": 4},
            }
            for (name, argument), value in expected.items():
                result = await client.call_tool(name, {argument: "Rome"})  # the SDK validates it too
                assert not result.is_error and result.structured_content == value
                jsonschema.validate(result.structured_content, schemas[name])
                assert json.loads(text_of(result)) == value  # the same JSON as text, for older clients
            lie = await client.call_tool("liar", {})
            assert lie.is_error and "does not match its declared return type Weather" in text_of(lie)
            assert lie.structured_content is None
            plain = await client.call_tool("reverse", {"text": "ab"})
            assert plain.structured_content is None and tools["reverse"].output_schema is None

    asyncio.run(run())


def test_a_returned_file_is_a_resource_link() -> None:
    async def run() -> None:
        async with spec_server.server.serve_http(port=0) as url:
            async with mcp.Client(url) as client:
                result = await client.call_tool("report", {"title": "Q3"})
                text, link = result.content
                assert text.text == "the report" and link.type == "resource_link"
                assert str(link.uri).startswith("file:///") and link.name == "report.csv"
                assert link.mime_type == "text/csv"
                written = await asyncio.to_thread(Path(str(link.uri).removeprefix("file://")).read_text)
                assert written == "title\nQ3\n"
            async with raw_session(url, version="2025-03-26") as (http, sid):  # before resource links
                call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "report"}}
                call["params"]["arguments"] = {"title": "Q4"}
                _, body = await post_raw(http, url, call, **{"Mcp-Session-Id": sid})
                parts = body["result"]["content"]
                assert parts[1]["type"] == "text" and parts[1]["text"].startswith("[file](/")

    asyncio.run(run())
