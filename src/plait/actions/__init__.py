"""Tools (actions), their argument parsers, the registry and the executors.

Core names are imported eagerly; concrete tools live in their own modules and are listed
in ``_LAZY`` (name -> module), imported on first access. To add a tool module, add its
public names to ``_LAZY`` (and, for type checkers, to the ``TYPE_CHECKING`` block).
`list_tools` imports every module listed there, so registered tools include them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_module
from ..exceptions import ParseError
from ._registry import TOOL_REGISTRY, get_tool, get_tool_cls, list_tools, register_tool
from ._schema import openai_name, openai_tool, to_json_schema
from .action_executor import ActionExecutor, AsyncActionExecutor
from .base_action import SESSION_PARAMETER, AsyncActionMixin, BaseAction, tool_api
from .builtin_actions import FinishAction, FunctionAction, InvalidAction, NoAction
from .parser import BaseParser, JsonParser, TupleParser, to_result_items

if TYPE_CHECKING:  # the lazy names below, for type checkers (re-exported: not in __all__)
    from .agentlego_tool import AgentLegoTool as AgentLegoTool, AsyncAgentLegoTool as AsyncAgentLegoTool
    from .arxiv_search import ArxivSearch as ArxivSearch, AsyncArxivSearch as AsyncArxivSearch
    from .bing_map import AsyncBINGMap as AsyncBINGMap, BINGMap as BINGMap
    from .calculator import Calculator as Calculator
    from .google_scholar_search import AsyncGoogleScholar as AsyncGoogleScholar, GoogleScholar as GoogleScholar
    from .google_search import AsyncGoogleSearch as AsyncGoogleSearch, GoogleSearch as GoogleSearch
    from .ipython_interactive import (
        AsyncIPythonInteractive as AsyncIPythonInteractive,
        IPythonInteractive as IPythonInteractive,
        IPythonInteractiveManager as IPythonInteractiveManager,
    )
    from .ipython_interpreter import (
        AsyncIPythonInterpreter as AsyncIPythonInterpreter,
        IPythonInterpreter as IPythonInterpreter,
    )
    from .langchain_tool import AsyncLangChainTool as AsyncLangChainTool, LangChainTool as LangChainTool
    from .mcp import AsyncMCPToolkit as AsyncMCPToolkit, MCPToolkit as MCPToolkit
    from .ppt import PPT as PPT, AsyncPPT as AsyncPPT
    from .python_interpreter import (
        AsyncPythonInterpreter as AsyncPythonInterpreter,
        PythonInterpreter as PythonInterpreter,
    )
    from .web_browser import AsyncWebBrowser as AsyncWebBrowser, WebBrowser as WebBrowser

# name -> module (relative to this package) for tools imported on first use, e.g.
# "IPythonInterpreter": ".ipython_interpreter".
_LAZY: dict[str, str] = {
    "Calculator": ".calculator",
    "PythonInterpreter": ".python_interpreter",
    "AsyncPythonInterpreter": ".python_interpreter",
    "IPythonInterpreter": ".ipython_interpreter",
    "AsyncIPythonInterpreter": ".ipython_interpreter",
    "IPythonInteractive": ".ipython_interactive",
    "AsyncIPythonInteractive": ".ipython_interactive",
    "IPythonInteractiveManager": ".ipython_interactive",
    "ArxivSearch": ".arxiv_search",
    "AsyncArxivSearch": ".arxiv_search",
    "WebBrowser": ".web_browser",
    "AsyncWebBrowser": ".web_browser",
    "GoogleSearch": ".google_search",
    "AsyncGoogleSearch": ".google_search",
    "GoogleScholar": ".google_scholar_search",
    "AsyncGoogleScholar": ".google_scholar_search",
    "BINGMap": ".bing_map",
    "AsyncBINGMap": ".bing_map",
    "PPT": ".ppt",
    "AsyncPPT": ".ppt",
    "MCPToolkit": ".mcp",
    "AsyncMCPToolkit": ".mcp",
    "LangChainTool": ".langchain_tool",
    "AsyncLangChainTool": ".langchain_tool",
    "AgentLegoTool": ".agentlego_tool",
    "AsyncAgentLegoTool": ".agentlego_tool",
}

__all__ = [
    "SESSION_PARAMETER",
    "TOOL_REGISTRY",
    "ActionExecutor",
    "AsyncActionExecutor",
    "AsyncActionMixin",
    "BaseAction",
    "BaseParser",
    "FinishAction",
    "FunctionAction",
    "InvalidAction",
    "JsonParser",
    "NoAction",
    "ParseError",
    "TupleParser",
    "get_tool",
    "get_tool_cls",
    "list_tools",
    "openai_name",
    "openai_tool",
    "register_tool",
    "to_json_schema",
    "to_result_items",
    "tool_api",
]


__getattr__, __dir__ = lazy_module(__name__, _LAZY, __all__)
