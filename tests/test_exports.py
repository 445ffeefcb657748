"""The public surface is curated: `__all__` is pinned here and every name resolves."""

from __future__ import annotations

import subprocess
import sys

import plait

EXPECTED = [
    "ActionExecutor",
    "ActionPreprocessor",
    "ActionReturn",
    "ActionStatusCode",
    "ActionValidCode",
    "Agent",
    "AgentDict",
    "AgentList",
    "AgentMessage",
    "AgentStatusCode",
    "ArxivSearch",
    "AsyncActionExecutor",
    "AsyncAgent",
    "AsyncGPTAPI",
    "AsyncLlamaCppModel",
    "AsyncSequential",
    "AsyncStreamingAgent",
    "AsyncStreamingSequential",
    "BaseAction",
    "BaseParser",
    "Calculator",
    "FinishAction",
    "FunctionCall",
    "GPTAPI",
    "Hook",
    "IPythonInteractive",
    "IPythonInterpreter",
    "InternLMActionProcessor",
    "InvalidAction",
    "JsonParser",
    "LlamaCppModel",
    "Memory",
    "MemoryManager",
    "MessageLogger",
    "ModelStatusCode",
    "NoAction",
    "PythonInterpreter",
    "RemovableHandle",
    "Sequential",
    "StreamingAgent",
    "StreamingSequential",
    "TupleParser",
    "WebBrowser",
    "__version__",
    "get_tool",
    "get_tool_cls",
    "list_tools",
    "tool_api",
]


def test_all_is_pinned_and_sorted() -> None:
    assert plait.__all__ == EXPECTED
    assert sorted(plait.__all__) == plait.__all__


def test_every_public_name_resolves() -> None:
    for name in plait.__all__:
        assert getattr(plait, name) is not None, name


def test_import_is_lazy_and_fast() -> None:
    code = (
        "import sys, time; t = time.perf_counter(); import plait; dt = time.perf_counter() - t; "
        "heavy = [m for m in ('pydantic', 'aiohttp', 'jinja2', 'plait.agents') if m in sys.modules]; "
        "print(dt, heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split(" ", 1)
    assert float(out[0]) < 0.5
    assert out[1].strip() == "[]"
