"""MCPToolkit on the parts of spec 2025-11-25 that a server chooses: resumed SSE streams, capabilities, task-only tools.

Resumption runs against the official SDK's server (demo_server.py, ``resumable``) and against
`FakeMCPServer` (fake_mcp.py), which checks the ``Last-Event-ID`` and the ``retry`` wait.
"""

from __future__ import annotations

import sys

from _mcp_support import SERVER, free_port, serving
from fake_mcp import FakeMCPServer

from plait.actions.mcp import MCPToolkit
from plait.schema import ActionStatusCode

ECHO = {
    "name": "echo",
    "description": "Echo.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


def test_a_stream_the_sdk_server_ends_mid_call_is_resumed() -> None:
    port = free_port()
    server = [sys.executable, SERVER, "http", str(port), "resumable"]
    with serving(server, port), MCPToolkit(url=f"http://127.0.0.1:{port}/mcp", timeout=30) as toolkit:
        reply = toolkit({}, "polled")
        assert reply.state == ActionStatusCode.SUCCESS, reply.errmsg
        assert reply.format_result() == "answered after the stream was closed"
        assert toolkit({"a": 2, "b": 3}, "add").format_result() == "5"  # the session goes on


def test_resumption_sends_the_last_event_id_after_the_retry_hint() -> None:
    with FakeMCPServer(tools=[ECHO], retry=300) as server, MCPToolkit(url=server.url, timeout=30) as toolkit:
        reply = toolkit({"text": "hi"}, "echo")
        assert reply.state == ActionStatusCode.SUCCESS, reply.errmsg
        assert reply.format_result() == 'resumed answer to echo({"text": "hi"})'
        [(last_event_id, resumed_at)] = server.resumed
        assert last_event_id == "call-3-0"  # the priming event's id (requests 1 and 2: initialize, tools/list)
        assert resumed_at - server.closed_at[0] >= 0.3  # the client waited the server's retry hint


def test_a_stream_ended_without_an_event_id_fails_the_call_at_once() -> None:
    with FakeMCPServer(tools=[ECHO], event_ids=False) as server, MCPToolkit(url=server.url, timeout=600) as toolkit:
        reply = toolkit({"text": "hi"}, "echo")  # before: no answer until the 600 s timeout
        assert reply.state != ActionStatusCode.SUCCESS
        assert "no event id to resume from" in reply.errmsg
        assert server.resumed == []
