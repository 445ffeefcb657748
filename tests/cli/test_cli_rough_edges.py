"""The smaller rough edges of everyday CLI use (issue 36, item 6), each pinned."""

from __future__ import annotations

import importlib
from pathlib import Path

from test_cli import plait

from plait.cli import cli_tools


def test_tools_lists_tools_not_adapter_classes() -> None:
    for adapters in ("plait.actions.agentlego_tool", "plait.actions.langchain_tool"):
        importlib.import_module(adapters)  # registers the adapters, as the web demo's imports do
    tools = cli_tools()
    assert "Calculator" in tools and "LangChainTool" not in tools and "AgentLegoTool" not in tools
    result = plait("run", "--tools", "NoSuchTool", "hi")
    assert result.returncode == 2 and "Calculator" in result.stderr
    assert "LangChainTool" not in result.stderr and "AgentLegoTool" not in result.stderr


def test_web_with_a_missing_tools_module_exits_2_before_starting(tmp_path: Path) -> None:
    missing = tmp_path / "nofile.py"
    result = plait("web", "--tools-from", str(missing), "--api-base", "http://127.0.0.1:9/v1", "--port", "1")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"plait: error: could not import tool module {str(missing)!r}: ImportError: no Python file {str(missing)!r}"
    ]
