"""Fixtures of the MCP tests: toolkits on the SDK-written demo server, over stdio and Streamable HTTP."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _mcp_support import SERVER, free_port, serving, toolkit_class

from plait.actions.mcp import MCPToolkit

pytest.importorskip("mcp.server.mcpserver", reason="the MCP tests need the official MCP SDK (test extra)")


@pytest.fixture
def make_toolkit(mode: str) -> Iterator[Callable[..., MCPToolkit]]:
    """``make_toolkit(**kwargs)``: a stdio toolkit on the demo server (closed after the test)."""
    made: list[MCPToolkit] = []

    def make(**kwargs: Any) -> MCPToolkit:
        kwargs.setdefault("command", sys.executable)
        kwargs.setdefault("args", [SERVER])
        toolkit = toolkit_class(mode)(**kwargs)
        made.append(toolkit)
        return toolkit

    yield make
    for toolkit in made:
        toolkit.close()


@pytest.fixture(params=["sse", "json"])
def http_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """The demo server on Streamable HTTP (answers as SSE streams, or as plain JSON); yields its URL."""
    port = free_port()
    args = [sys.executable, SERVER, "http", str(port)] + (["json"] if request.param == "json" else [])
    with serving(args, port):
        yield f"http://127.0.0.1:{port}/mcp"
