"""MCPToolkit on what spec 2025-11-25 lets a server choose: resumed SSE streams, capabilities, task-only tools.

Resumption runs against the official SDK's server (demo_server.py, ``resumable``) and against
`FakeMCPServer` (fake_mcp.py), which checks the ``Last-Event-ID`` and the ``retry`` wait.
"""

from __future__ import annotations

import logging
import sys

import pytest
from _mcp_support import SERVER, free_port, serving
from fake_mcp import FakeMCPServer

from plait.actions.mcp import MCPToolkit
from plait.exceptions import MCPError
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


def test_resources_and_prompts_are_not_asked_of_a_server_that_does_not_offer_them() -> None:
    with FakeMCPServer(capabilities={"tools": {}}, tools=[ECHO]) as server, MCPToolkit(url=server.url) as toolkit:
        assert toolkit.list_resources() == []  # before: RPCError "Method not found" from the server
        assert toolkit.list_prompts() == []
        with pytest.raises(MCPError, match="does not offer resources"):
            toolkit.read_resource("file:///etc/hostname")
        with pytest.raises(MCPError, match="does not offer prompts"):
            toolkit.get_prompt("review")
        assert server.methods == ["initialize", "notifications/initialized", "tools/list"]


def test_task_only_tools_are_not_offered_to_the_model(caplog: pytest.LogCaptureFixture) -> None:
    tools = [
        ECHO,
        {**ECHO, "name": "report", "execution": {"taskSupport": "required"}},
        {**ECHO, "name": "either", "execution": {"taskSupport": "optional"}},
    ]
    with FakeMCPServer(tools=tools) as server:
        with (
            caplog.at_level(logging.WARNING, logger="plait.actions.mcp.toolkit"),
            MCPToolkit(url=server.url) as toolkit,
        ):
            assert toolkit.api_names == ["echo", "either"]
        assert "tools ['report'] are not offered to the model" in caplog.text
        with pytest.raises(MCPError, match=r"\['report'\] can only run as tasks"):
            MCPToolkit(url=server.url, tools=["report"])
