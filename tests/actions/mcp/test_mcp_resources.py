"""MCPToolkit reads an SDK-written server's resources and prompts, and honours tools/list_changed.

Every behaviour runs in sync (`MCPToolkit`) and async (`AsyncMCPToolkit`) mode from one body,
over stdio and (where the server's answers carry it) Streamable HTTP.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _mcp_support import PNG_MAGIC, SERVER, free_port, serving, toolkit_class

from _support import resolve
from plait.actions.mcp import MCPToolkit
from plait.exceptions import MCPError


def test_resources_are_listed_and_read(make_toolkit: Callable[..., MCPToolkit], tmp_path: Path) -> None:
    toolkit = make_toolkit(work_dir=str(tmp_path))
    listed = resolve(toolkit.list_resources())
    assert [(r["uri"], r["name"], r.get("mimeType")) for r in listed] == [
        ("demo://greeting", "greeting", "text/plain"),
        ("demo://pixel.png", "pixel", "image/png"),
    ]
    assert listed[0]["description"] == "A friendly text."
    assert resolve(toolkit.read_resource("demo://greeting")) == [
        {"type": "text", "content": "Hello from the demo server"}
    ]
    [blob] = resolve(toolkit.read_resource("demo://pixel.png"))
    assert blob["type"] == "file" and Path(blob["content"]).parent == tmp_path
    assert Path(blob["content"]).read_bytes().startswith(PNG_MAGIC)
    with pytest.raises(MCPError, match="demo://missing"):
        resolve(toolkit.read_resource("demo://missing"))


def test_prompts_are_listed_and_filled(make_toolkit: Callable[..., MCPToolkit]) -> None:
    toolkit = make_toolkit()
    [review] = resolve(toolkit.list_prompts())
    assert review["name"] == "review" and review["description"] == "Ask for a code review."
    assert [(a["name"], a["required"]) for a in review["arguments"]] == [("code", True), ("language", False)]
    messages = resolve(toolkit.get_prompt("review", {"code": "x = 1", "language": "rust"}))
    assert messages == [{"role": "user", "content": "Please review this rust code:\nx = 1"}]
    with pytest.raises(MCPError, match="code"):
        resolve(toolkit.get_prompt("review", {}))  # a required argument is missing
    with pytest.raises(MCPError, match="nope"):
        resolve(toolkit.get_prompt("nope"))


def _grows(toolkit: MCPToolkit) -> None:
    assert "triple" not in toolkit.api_names
    assert resolve(toolkit({}, "grow")).result == [{"type": "text", "content": "grown"}]
    # the server announced a new tool while answering: the next look at the toolkit lists it
    assert toolkit.api_names[-1] == "triple"
    assert any(t["function"]["name"] == "demo_server__triple" for t in toolkit.to_openai_tools())
    assert resolve(toolkit({"x": 14}, "triple")).result == [{"type": "text", "content": "42"}]


def test_tools_list_changed_refreshes_the_tools(make_toolkit: Callable[..., MCPToolkit]) -> None:
    _grows(make_toolkit())


def test_tools_list_changed_over_streamable_http(mode: str, tmp_path: Path) -> None:
    port = free_port()  # answers as SSE streams: the announcement travels in the answer of the call
    with serving([sys.executable, SERVER, "http", str(port)], port):
        toolkit = toolkit_class(mode)(url=f"http://127.0.0.1:{port}/mcp", work_dir=str(tmp_path))
        try:
            _grows(toolkit)
            assert resolve(toolkit.read_resource("demo://greeting"))[0]["content"] == "Hello from the demo server"
            assert resolve(toolkit.get_prompt("review", {"code": "y"}))[0]["content"].endswith("code:\ny")
        finally:
            toolkit.close()


def test_a_server_without_resources_says_so(mode: str, tmp_path: Path) -> None:
    script = tmp_path / "bare.py"
    script.write_text(
        "from mcp.server.mcpserver import MCPServer\n"
        "s = MCPServer('bare')\n"
        "@s.tool()\n"
        "def hi() -> str:\n    return 'hi'\n"
        "import asyncio; asyncio.run(s.run_stdio_async())\n"
    )
    toolkit: Any = toolkit_class(mode)(sys.executable, [str(script)])
    try:
        assert resolve(toolkit.list_resources()) == []
        assert resolve(toolkit.list_prompts()) == []
    finally:
        toolkit.close()
