"""The smaller rough edges of everyday CLI use (issue 36, item 6), each pinned."""

from __future__ import annotations

import importlib

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
