"""MCPServer: plait tools served to the official MCP SDK's client (stdio and Streamable HTTP) and to MCPToolkit.

Behaviours that exist in both modes (sync/async agents, `MCPToolkit`/`AsyncMCPToolkit`) run
from one body; the SDK client is async only.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from _mcp_support import PNG_MAGIC, toolkit_class
from plait_server import Notes, make_agent, server

import plait
from _support import resolve
from plait.actions import Calculator
from plait.actions.mcp import MCPServer
from plait.actions.mcp._serve import serve_stdio
from plait.agents import Agent, AsyncAgent
from plait.exceptions import UserError
from plait.schema import ActionStatusCode
from plait.testing import AsyncScriptedLLM, ScriptedLLM
from plait.utils._aio import LoopThread

mcp = pytest.importorskip("mcp")
from mcp.client.stdio import StdioServerParameters  # noqa: E402

PLAIT_SERVER = str(Path(__file__).with_name("plait_server.py"))
SOURCE = str(Path(plait.__file__).resolve().parents[1])  # the SDK's stdio child gets no PYTHONPATH: this plait


def text_of(result: Any) -> str:
    return "\n".join(part.text for part in result.content if part.type == "text")


async def exercise(client: Any) -> None:
    """What every SDK client checks: listing, results, errors as isError, images, approval."""
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    expected = {tool["name"]: tool for tool in server.tools()}
    assert (
        list(listed)
        == list(expected)
        == [
            "Calculator",
            "Notes__add",
            "Notes__count",
            "Notes__fail",
            "Notes__pixel",
            "Notes__delete_all",
            "echo_agent",
        ]
    )
    assert listed["Notes__count"].input_schema == expected["Notes__count"]["inputSchema"]  # plait's schema, unchanged
    assert listed["Notes__count"].input_schema["properties"]["step"] == {"type": "number", "description": "increment"}
    assert listed["echo_agent"].description == "Repeats what you say."
    assert text_of(await client.call_tool("Calculator", {"expression": "37 * 91"})) == "3367"
    assert text_of(await client.call_tool("Notes__count", {"times": 3, "step": 0.5})) == "1.5"
    failed = await client.call_tool("Notes__fail", {"message": "boom"})
    assert failed.is_error and text_of(failed) == "ValueError: boom"
    for name, closest in (("Notes__nope", "Notes__pixel"), ("Notes.add", "Notes__add")):  # MCP names only
        with pytest.raises(mcp.MCPError) as unknown:  # an unknown tool is invalid params (-32602)
            await client.call_tool(name, {})
        assert unknown.value.error.code == -32602
        message = unknown.value.error.message
        assert f"There is no tool named {name!r}. Did you mean {closest!r}?" in message
        assert "Available tools: Calculator, Notes__add, Notes__count," in message
    wrong = await client.call_tool("Notes__count", {"times": "many", "bogus": 1})
    assert wrong.is_error
    gated = await client.call_tool("Notes__delete_all", {})
    assert gated.is_error and "approval" in text_of(gated)
    image = await client.call_tool("Notes__pixel", {})
    assert not image.is_error and [part.type for part in image.content] == ["text", "image"]
    assert image.content[1].mime_type == "image/png"
    assert base64.b64decode(image.content[1].data).startswith(PNG_MAGIC)


def test_the_sdk_client_uses_plait_tools_over_stdio() -> None:
    async def run() -> None:
        params = StdioServerParameters(command=sys.executable, args=[PLAIT_SERVER], env={"PYTHONPATH": SOURCE})
        async with mcp.Client(params) as client:
            assert client.server_info.name == "plait-test" and client.protocol_version == "2025-11-25"
            assert client.instructions == "Tools for tests."
            await exercise(client)
            assert text_of(await client.call_tool("Notes__add", {"text": "a"})) == "a"  # printing did not break stdio
            assert text_of(await client.call_tool("Notes__add", {"text": "b"})) == "a | b"

    asyncio.run(run())


def test_sdk_clients_over_http_keep_separate_sessions() -> None:
    async def run() -> None:
        async with server.serve_http(port=0) as url, mcp.Client(url) as alice, mcp.Client(url) as bob:
            await exercise(alice)
            assert text_of(await alice.call_tool("Notes__add", {"text": "a1"})) == "a1"
            assert text_of(await bob.call_tool("Notes__add", {"text": "b1"})) == "b1"
            assert text_of(await alice.call_tool("Notes__add", {"text": "a2"})) == "a1 | a2"
            assert text_of(await alice.call_tool("echo_agent", {"message": "hi"})) == "echo: hi (1 messages)"
            assert text_of(await alice.call_tool("echo_agent", {"message": "again"})) == "echo: again (3 messages)"
            assert text_of(await bob.call_tool("echo_agent", {"message": "yo"})) == "echo: yo (1 messages)"

    asyncio.run(run())


@contextlib.contextmanager
def served(mcp_server: MCPServer, **options: Any) -> Iterator[str]:
    """`mcp_server` on Streamable HTTP from a loop thread of its own (sync clients may block); yields its URL."""
    loop = LoopThread(name="test-mcp-server")
    context = mcp_server.serve_http(**options)
    url = loop.run(context.__aenter__())
    try:
        yield url
    finally:
        loop.run(context.__aexit__(None, None, None))
        loop.close()


def test_an_agent_is_one_tool_with_a_conversation_per_session(mode: str) -> None:
    from plait_server import echo

    llm = AsyncScriptedLLM([echo] * 10) if mode == "async" else ScriptedLLM([echo] * 10)
    agent = make_agent(llm, AsyncAgent if mode == "async" else Agent)
    with served(MCPServer([agent], name="agents")) as url:
        first, second = toolkit_class(mode)(url=url), toolkit_class(mode)(url=url)
        try:
            assert first.api_names == ["echo_agent"]
            assert resolve(first({"message": "one"}, "echo_agent")).result[0]["content"] == "echo: one (1 messages)"
            assert resolve(first({"message": "two"}, "echo_agent")).result[0]["content"] == "echo: two (3 messages)"
            assert resolve(second({"message": "x"}, "echo_agent")).result[0]["content"] == "echo: x (1 messages)"
            sessions = agent.memory.sessions()
            assert len(sessions) == 2
        finally:
            first.close()  # ending the MCP session forgets its conversation
            second.close()
        assert agent.memory.sessions() == []


def test_mcptoolkit_calls_plait_tools_through_mcpserver(mode: str, tmp_path: Path) -> None:
    with served(MCPServer([Calculator(), Notes()], name="calc")) as url:
        toolkit = toolkit_class(mode)(url=url, work_dir=str(tmp_path))
        try:
            assert toolkit.name == "calc" and toolkit.api_names[:2] == ["Calculator", "Notes__add"]
            assert resolve(toolkit({"expression": "2 ** 10"}, "Calculator")).result[0]["content"] == "1024"
            failed = resolve(toolkit({"message": "no"}, "Notes__fail"))
            assert failed.state == ActionStatusCode.API_ERROR and failed.errmsg == "ValueError: no"
            text, image = resolve(toolkit({}, "Notes__pixel")).result
            assert text["content"] == "a pixel" and Path(image["content"]).read_bytes().startswith(PNG_MAGIC)
        finally:
            toolkit.close()


def test_a_non_loopback_address_needs_a_token() -> None:
    async def run() -> None:
        with pytest.raises(UserError, match="without a token"):
            async with MCPServer([Calculator()]).serve_http(host="0.0.0.0", port=0):
                pass
        async with MCPServer([Calculator()]).serve_http(host="0.0.0.0", port=0, token="t") as url:
            assert url.startswith("http://0.0.0.0:")

    asyncio.run(run())


def test_stdio_answers_garbage_with_errors_and_keeps_serving() -> None:
    lines = [
        b"not json",
        b"[" * 5000,
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "1999-01-01"}}',
        b"x" * 3000,  # over the limit
        b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "Calculator", "arguments": '
        b'{"expression": "\\ud800"}}}',
        b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "Calculator", "arguments": '
        b'{"expression": "6 * 7"}, "unknown": true}}',
        b'{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        b'{"jsonrpc": "2.0", "id": true, "method": "ping"}',
        b'{"jsonrpc": "2.0", "id": 4, "method": "nope"}',
    ]
    stdin = io.BytesIO(b"\n".join(lines) + b"\n")
    stdout = io.BytesIO()
    asyncio.run(serve_stdio(MCPServer([Calculator()]), stdin, stdout, limit=2048))
    import json

    answers = [json.loads(line) for line in stdout.getvalue().splitlines()]
    errors = [a["error"]["code"] for a in answers if a.get("id") is None]
    assert sorted(errors) == [-32700, -32700, -32700, -32600]
    by_id = {a["id"]: a for a in answers if a.get("id") is not None}
    assert by_id[1]["result"]["protocolVersion"] == "2025-11-25"  # an unknown version gets the newest
    assert by_id[2]["result"]["isError"] is True  # a lone surrogate is data, not a crash
    assert by_id[3]["result"] == {"content": [{"type": "text", "text": "42"}], "isError": False}
    assert by_id[4]["error"]["code"] == -32601


@contextlib.asynccontextmanager
async def http_session(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[Any]:
    """An aiohttp session and an initialized MCP session id on `url`."""
    import aiohttp

    async with aiohttp.ClientSession(headers=headers) as http:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
        async with http.post(url, json=init) as response:
            assert response.status == 200
            session_id = response.headers["Mcp-Session-Id"]
        yield http, session_id


def test_hostile_http_requests_get_errors_not_crashes() -> None:
    async def post(http: Any, url: str, body: bytes | str, **headers: str) -> tuple[int, Any]:
        async with http.post(url, data=body, headers={"Content-Type": "application/json", **headers}) as response:
            text = await response.text()
            return response.status, (await response.json() if text else None)

    def call(name: object, arguments: object, request_id: object = 7) -> str:
        import json

        params = {"name": name, "arguments": arguments}
        return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})

    async def run() -> None:
        async with server.serve_http(port=0, max_body_bytes=64 * 1024) as url, http_session(url) as (http, sid):
            s = {"Mcp-Session-Id": sid}
            status, body = await post(http, url, "{not json", **s)
            assert (status, body["error"]["code"]) == (400, -32700)
            status, body = await post(http, url, "[" * 10_000 + "]" * 10_000, **s)
            assert (status, body["error"]["code"]) == (400, -32700)
            status, body = await post(http, url, "9" * 5000, **s)  # a number Python will not convert
            assert (status, body["error"]["code"]) == (400, -32700)
            status, body = await post(http, url, b"x" * 100_000, **s)
            assert status == 413 and body["error"]["type"] == "RequestEntityTooLarge"
            status, body = await post(http, url, "[]", **s)
            assert body["error"]["code"] == -32600
            status, body = await post(http, url, call("Calculator", {"expression": "1+1"}))  # no session header
            assert (status, body["error"]["code"]) == (400, -32600)
            status, body = await post(http, url, call("Calculator", {}), **{"Mcp-Session-Id": "forged"})
            assert status == 404
            status, body = await post(
                http, url, call("Calculator", {"expression": "1+1"}), **s, **{"MCP-Protocol-Version": "0"}
            )
            assert status == 400
            for name, arguments in ((5, {}), ("Calculator", [1, 2]), ("Calculator", "1+1")):
                status, body = await post(http, url, call(name, arguments), **s)
                assert (status, body["error"]["code"]) == (200, -32602)
            status, body = await post(http, url, call("Calculator", {}, request_id=[1]), **s)
            assert body["error"]["code"] == -32600 and body["id"] is None
            status, body = await post(http, url, call("Calculator\ud800", {"expression": "\ud800"}), **s)
            assert (status, body["error"]["code"]) == (200, -32602)  # no such tool, and the answer is valid UTF-8
            assert "'Calculator\ufffd'" in body["error"]["message"]
            status, body = await post(http, url, call("Calculator", {"expression": "\ud800"}), **s)
            assert status == 200 and body["result"]["isError"] and "\ufffd" in body["result"]["content"][0]["text"]
            status, body = await post(http, url, call("Calculator", {"expression": "2*3", "extra": {"deep": [1]}}), **s)
            assert status == 200 and body["result"]["isError"]  # an unknown argument is the model's mistake
            status, body = await post(
                http, url, call("Calculator", {"expression": "2*3"}), **s, Origin="https://evil.example"
            )
            assert status == 403
            async with http.get(url, headers=s) as response:
                assert response.status == 405
            status, body = await post(http, url, '{"jsonrpc": "2.0", "method": "notifications/initialized"}', **s)
            assert (status, body) == (202, None)
            status, body = await post(http, url, call("Calculator", {"expression": "2*3"}), **s)
            assert body["result"]["content"] == [{"type": "text", "text": "6"}]
            async with http.delete(url, headers=s) as response:
                assert response.status == 204
            status, body = await post(http, url, call("Calculator", {"expression": "2*3"}), **s)
            assert status == 404  # the session ended

    asyncio.run(run())


def test_a_token_guards_the_endpoint_and_tenants_keep_their_sessions() -> None:
    async def run() -> None:
        tokens = {"alice": "a-token", "bob": "b-token"}
        async with MCPServer([Calculator()]).serve_http(port=0, token=tokens) as url:
            import aiohttp

            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            async with aiohttp.ClientSession() as anonymous, anonymous.post(url, json=ping) as response:
                assert response.status == 401 and response.headers["WWW-Authenticate"] == "Bearer"
            async with http_session(url, {"Authorization": "Bearer a-token"}) as (alice, sid):
                async with alice.post(url, json=ping, headers={"Mcp-Session-Id": sid}) as response:
                    assert response.status == 200 and (await response.json())["result"] == {}
                bob = aiohttp.ClientSession(headers={"Authorization": "Bearer b-token"})
                async with bob, bob.post(url, json=ping, headers={"Mcp-Session-Id": sid}) as response:
                    assert response.status == 404  # alice's session is not bob's

    asyncio.run(run())


def test_connections_beyond_the_cap_are_refused_with_503(event_loop_kind: str) -> None:
    async def run() -> None:
        async with MCPServer([Calculator()]).serve_http(port=0, max_connections=2) as url:
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
            await asyncio.sleep(0.05)  # both accepted before the third knocks
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            answer = await asyncio.wait_for(reader.read(), 5)
            assert answer.startswith(b"HTTP/1.1 503")
            writer.close()
            for _, held_writer in held:
                held_writer.close()

    asyncio.run(run())


MALFORMED: list[tuple[object, tuple[object, int] | None]] = [
    # (message, (the id of its answer, the error code) or None: no answer at all)
    ({"jsonrpc": "2.0", "id": 1}, (1, -32600)),  # a request without a method
    ({"jsonrpc": "2.0", "id": "s", "params": {}}, ("s", -32600)),
    ({"jsonrpc": "2.0", "id": 2, "method": 5}, (2, -32600)),  # a method that is not a string
    ({"jsonrpc": "2.0", "id": 3, "method": None}, (3, -32600)),
    ({"jsonrpc": "2.0", "id": 4, "method": "ping", "params": "x"}, (4, -32600)),  # params neither object nor array
    ({"jsonrpc": "2.0", "id": 5, "method": "ping", "params": None}, (5, -32600)),
    ({"jsonrpc": "2.0", "id": 6, "method": "ping", "params": [1]}, (6, -32602)),  # an array: MCP's take objects
    ({"id": 7, "method": "ping"}, (7, -32600)),  # no "jsonrpc"
    ({"jsonrpc": "1.0", "id": 8, "method": "ping"}, (8, -32600)),
    ({"jsonrpc": "2.0", "id": 9, "method": "notifications/initialized"}, (9, -32601)),  # a notification asked
    ({"jsonrpc": "2.0", "id": 10, "method": "tools/call"}, (10, -32602)),  # no params: no tool name
    ({"jsonrpc": "2.0", "id": True, "method": "ping"}, (None, -32600)),  # ids that cannot be answered to
    ({"jsonrpc": "2.0", "id": None, "method": "ping"}, (None, -32600)),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, (None, -32600)),
    ({"jsonrpc": "2.0", "id": {"a": 1}}, (None, -32600)),
    ({"jsonrpc": "2.0", "method": 7}, (None, -32600)),  # an invalid notification
    ({"jsonrpc": "2.0"}, (None, -32600)),
    ({"jsonrpc": "2.0", "method": "notifications/x", "params": 3}, (None, -32600)),
    ([], (None, -32600)),  # batches are not supported: one error for the whole array
    ([{"jsonrpc": "2.0", "id": 11, "method": "ping"}, [2]], (None, -32600)),
    (5, (None, -32600)),
    ("ping", (None, -32600)),
    (None, (None, -32600)),
    ({"jsonrpc": "2.0", "method": "notifications/initialized"}, None),  # notifications: no answer
    ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}}, None),
    ({"jsonrpc": "2.0", "method": "notifications/unknown"}, None),
    ({"jsonrpc": "2.0", "id": 12, "result": {}}, None),  # responses: this server asked nothing
    ({"jsonrpc": "2.0", "id": 13, "error": {"code": 1, "message": "x"}}, None),
]
FINE = {"jsonrpc": "2.0", "id": "", "method": "ping", "extra": [1]}  # an empty id and an unknown member are fine


def test_malformed_messages_get_one_invalid_request_error_each_over_stdio() -> None:
    import json

    lines = [json.dumps(message).encode() for message, _ in MALFORMED]
    stdin = io.BytesIO(b"\n".join([*lines, json.dumps(FINE).encode()]) + b"\n")
    stdout = io.BytesIO()
    asyncio.run(serve_stdio(MCPServer([Calculator()]), stdin, stdout))
    answers = [json.loads(line) for line in stdout.getvalue().splitlines()]
    got = sorted((repr(a["id"]), a["error"]["code"]) for a in answers if "error" in a)
    assert got == sorted((repr(e[0]), e[1]) for _, e in MALFORMED if e is not None)
    assert [a for a in answers if "result" in a] == [{"jsonrpc": "2.0", "id": "", "result": {}}]  # served on


def test_malformed_messages_get_one_invalid_request_error_each_over_http() -> None:
    import json

    async def run() -> None:
        async with MCPServer([Calculator()]).serve_http(port=0) as url, http_session(url) as (http, sid):
            headers = {"Mcp-Session-Id": sid, "Content-Type": "application/json"}
            for message, expected in MALFORMED:
                async with http.post(url, data=json.dumps(message), headers=headers) as response:
                    text = await response.text()
                    if expected is None:
                        assert (response.status, text) == (202, ""), message
                    else:
                        body = json.loads(text)
                        assert (body["id"], body["error"]["code"]) == expected, message
                        assert response.status == (400 if expected[0] is None else 200), message
            async with http.post(url, json=FINE, headers=headers) as ok:
                assert ok.status == 200 and (await ok.json())["result"] == {}
            no_session = {"jsonrpc": "2.0", "id": 1}  # the same hole before a session exists
            async with http.post(url, json=no_session) as response:
                assert response.status == 400 and (await response.json())["id"] == 1

    asyncio.run(run())
