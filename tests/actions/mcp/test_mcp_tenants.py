"""MCPServer over Streamable HTTP with several tenants: one tenant's sessions never end another's.

Tenant B talks through the official SDK client; tenant A is a hostile script that opens
sessions with bare ``initialize`` POSTs and never ends them.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import aiohttp
import pytest
from plait_server import server

from plait.actions import Calculator
from plait.actions.mcp import MCPServer
from plait.exceptions import UserError

mcp = pytest.importorskip("mcp")
import httpx2  # noqa: E402  # the SDK's HTTP client
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

TOKENS = {"alice": "a-token", "bob": "b-token"}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def text_of(result: Any) -> str:
    return "\n".join(part.text for part in result.content if part.type == "text")


async def initialize(http: aiohttp.ClientSession, url: str) -> tuple[int, str | None, Any]:
    """A bare ``initialize`` POST: the status, the session id (if one was opened) and the JSON body."""
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
    async with http.post(url, json=init) as response:
        return response.status, response.headers.get("Mcp-Session-Id"), await response.json()


async def ping(http: aiohttp.ClientSession, url: str, session_id: str) -> int:
    async with http.post(url, json=PING, headers={"Mcp-Session-Id": session_id}) as response:
        await response.read()
        return response.status


def test_a_tenant_opening_1000_sessions_ends_only_its_own() -> None:
    async def run() -> None:
        # the default ceiling (1000 sessions) split fairly between the two tenants: 500 each
        async with server.serve_http(port=0, token=TOKENS) as url:
            bob_http = httpx2.AsyncClient(headers={"Authorization": "Bearer b-token"})
            async with bob_http, mcp.Client(streamable_http_client(url, http_client=bob_http)) as bob:
                assert text_of(await bob.call_tool("Notes__add", {"text": "b1"})) == "b1"
                async with aiohttp.ClientSession(headers={"Authorization": "Bearer a-token"}) as alice:
                    opened = [await initialize(alice, url) for _ in range(1000)]
                    # bob's session is alive, and its tools still know its state
                    assert text_of(await bob.call_tool("Notes__add", {"text": "b2"})) == "b1 | b2"
                    assert {status for status, _, _ in opened} == {200}  # alice is never refused: she evicts her own
                    ids = [session_id for _, session_id, _ in opened]
                    assert await ping(alice, url, str(ids[499])) == 404  # her least recently used ones ended
                    assert await ping(alice, url, str(ids[500])) == 200  # her last 500 live on
                    assert await ping(alice, url, str(ids[-1])) == 200
                again = httpx2.AsyncClient(headers={"Authorization": "Bearer b-token"})
                async with again, mcp.Client(streamable_http_client(url, http_client=again)) as other:
                    assert text_of(await other.call_tool("Notes__add", {"text": "c"})) == "c"  # not starved either

    asyncio.run(run())


def test_a_full_tenant_evicts_its_idle_sessions_and_a_full_server_refuses() -> None:
    gate, both_running, running = threading.Event(), threading.Event(), []

    def hold() -> str:
        """Wait until the test lets go."""
        running.append(1)
        if len(running) == 2:
            both_running.set()
        gate.wait(60)
        return "released"

    async def call_hold(http: aiohttp.ClientSession, url: str, session_id: str) -> Any:
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "hold", "arguments": {}}}
        async with http.post(url, json=call, headers={"Mcp-Session-Id": session_id}) as response:
            return await response.json()

    async def run() -> None:
        held = MCPServer([Calculator(), hold])
        # overcommitted on purpose: 2 tenants x 2 sessions > 3, so the ceiling can be reached
        async with held.serve_http(port=0, token=TOKENS, max_sessions=3, max_sessions_per_tenant=2) as url:
            a_auth, b_auth = ({"Authorization": f"Bearer {t}"} for t in ("a-token", "b-token"))
            async with aiohttp.ClientSession(headers=a_auth) as alice, aiohttp.ClientSession(headers=b_auth) as bob:
                a1, a2, a3 = [(await initialize(alice, url))[1] for _ in range(3)]
                assert [await ping(alice, url, str(s)) for s in (a1, a2, a3)] == [404, 200, 200]  # a1 made room
                status, b1, _ = await initialize(bob, url)
                assert status == 200 and b1 is not None
                status, b2, body = await initialize(bob, url)  # the server is full: refused, nobody is evicted
                assert (status, b2, body["id"], body["error"]["code"]) == (503, None, 0, -32000)
                assert "sessions" in body["error"]["message"]
                assert [await ping(alice, url, str(a2)), await ping(alice, url, str(a3))] == [200, 200]
                assert await ping(bob, url, str(b1)) == 200
                try:
                    calls = [asyncio.ensure_future(call_hold(alice, url, str(s))) for s in (a2, a3)]
                    assert await asyncio.to_thread(both_running.wait, 60)  # none of alice's sessions is idle
                    status, a4, body = await initialize(alice, url)
                    assert (status, a4, body["error"]["code"]) == (429, None, -32000)
                finally:
                    gate.set()
                answers = await asyncio.gather(*calls)
                assert [a["result"]["content"][0]["text"] for a in answers] == ["released", "released"]  # not cut
                status, a4, _ = await initialize(alice, url)  # idle again: the least recently used one makes room
                assert status == 200 and await ping(alice, url, str(a4)) == 200
                assert await ping(bob, url, str(b1)) == 200

    asyncio.run(run())


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"max_sessions": 0}, "max_sessions must be at least 1"),
        ({"max_sessions_per_tenant": 0}, "max_sessions_per_tenant must be at least 1"),
        ({"max_sessions": 10, "max_sessions_per_tenant": 20}, "max_sessions_per_tenant .20. exceeds max_sessions .10."),
    ],
)
def test_session_caps_are_checked_when_serving_starts(options: dict[str, int], match: str) -> None:
    async def run() -> None:
        with pytest.raises(UserError, match=match):
            async with MCPServer([Calculator()]).serve_http(port=0, **options):
                pass

    asyncio.run(run())
