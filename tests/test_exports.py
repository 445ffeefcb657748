"""The public surface is curated: `__all__` is pinned here and every name resolves."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

import plait
import plait.agents
import plait.llms
import plait.testing

EXPECTED = [
    "GPTAPI",
    "APITemplateParser",
    "ActionExecutor",
    "ActionPreprocessor",
    "ActionReturn",
    "ActionStatusCode",
    "ActionValidCode",
    "Agent",
    "AgentDict",
    "AgentForInternLM",
    "AgentList",
    "AgentMessage",
    "AgentModule",
    "AgentReturn",
    "AgentStatusCode",
    "ArxivSearch",
    "AsyncActionExecutor",
    "AsyncAgent",
    "AsyncAgentForInternLM",
    "AsyncAutoGPT",
    "AsyncBaseLLM",
    "AsyncClaudeAPI",
    "AsyncConversationalAgent",
    "AsyncFunctionCallingAgent",
    "AsyncGPTAPI",
    "AsyncHFTransformer",
    "AsyncHFTransformerCasualLM",
    "AsyncHFTransformerChat",
    "AsyncLMDeployClient",
    "AsyncLMDeployPipeline",
    "AsyncLMDeployServer",
    "AsyncLlamaCppModel",
    "AsyncMathCoder",
    "AsyncReAct",
    "AsyncReWOO",
    "AsyncRemoteA2AAgent",
    "AsyncSequential",
    "AsyncStreamingAgent",
    "AsyncStreamingFunctionCallingAgent",
    "AsyncStreamingSequential",
    "AsyncVllmModel",
    "AutoGPT",
    "BaseAction",
    "BaseLLM",
    "BaseParser",
    "Calculator",
    "ClaudeAPI",
    "ConversationalAgent",
    "FinishAction",
    "FunctionCall",
    "FunctionCallingAgent",
    "HFTransformer",
    "HFTransformerCasualLM",
    "HFTransformerCausalLM",
    "HFTransformerChat",
    "Handoff",
    "Hook",
    "IPythonInteractive",
    "IPythonInterpreter",
    "IncompatibleKeys",
    "InternLMActionProcessor",
    "Internlm2Agent",
    "Internlm2Protocol",
    "InvalidAction",
    "JsonParser",
    "LMDeployClient",
    "LMDeployPipeline",
    "LMDeployServer",
    "LMTemplateParser",
    "LlamaCppModel",
    "MathCoder",
    "Memory",
    "MemoryManager",
    "MessageLogger",
    "ModelStatusCode",
    "NoAction",
    "PythonInterpreter",
    "ReAct",
    "ReWOO",
    "RemoteA2AAgent",
    "RemovableHandle",
    "Sequential",
    "StreamingAgent",
    "StreamingFunctionCallingAgent",
    "StreamingSequential",
    "TupleParser",
    "VllmModel",
    "WebBrowser",
    "__version__",
    "draw",
    "get_tool",
    "get_tool_cls",
    "list_tools",
    "tool_api",
]

# submodules reachable as attributes of `plait` without being imported by `import plait`
SUBMODULES = ["actions", "agents", "eval", "hooks", "llms", "memory", "replay", "testing", "tracing"]

TESTING_EXPECTED = [
    "AsyncFunctionLLM",
    "AsyncScriptedLLM",
    "Canned",
    "FakeHTTPServer",
    "FakeHub",
    "FakeOpenAIServer",
    "FaultInjector",
    "FunctionLLM",
    "HTTPFault",
    "Hang",
    "InvalidJSON",
    "LLMCall",
    "PingDrip",
    "RawSSE",
    "RecordedRequest",
    "Reply",
    "ScriptedLLM",
    "Truncated",
    "scripted_llm",
]

EVAL_EXPECTED = [
    "AgentFactory",
    "Case",
    "CaseRunner",
    "Scorer",
    "aevaluate",
    "agent_profile",
    "contains",
    "evaluate",
    "exact",
    "export",
    "load_cases",
    "load_scorer",
    "native_messages",
    "regex",
    "summarise",
    "to_openai",
    "to_sharegpt",
]

HEAVY = ("pydantic", "aiohttp", "jinja2", *(f"plait.{name}" for name in SUBMODULES))


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout


def _isort_order(name: str) -> tuple[int, str]:
    """Ruff's RUF022 order: CONSTANTS, then Classes, then the rest, each alphabetical."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def test_all_is_pinned_and_sorted() -> None:
    assert plait.__all__ == EXPECTED
    assert sorted(plait.__all__, key=_isort_order) == plait.__all__


def test_all_names_are_unique() -> None:
    assert len(set(plait.__all__)) == len(plait.__all__)


def test_every_public_name_resolves() -> None:
    for name in plait.__all__:
        assert getattr(plait, name) is not None, name


def test_every_agent_and_model_class_is_exported() -> None:
    for package in (plait.agents, plait.llms):
        for name in package.__all__:
            value = getattr(package, name)
            if isinstance(value, type):
                assert name in plait.__all__, f"{package.__name__}.{name}"
                assert getattr(plait, name) is value, name


def test_exports_are_the_defining_packages_objects() -> None:
    for name in plait.__all__:
        if name == "__version__":
            continue
        owners = [p for p in plait._PACKAGES if hasattr(importlib.import_module(p), name)]
        assert owners, name
        assert getattr(plait, name) is getattr(importlib.import_module(owners[0]), name), name


@pytest.mark.parametrize("name", SUBMODULES)
def test_submodules_are_attributes(name: str) -> None:
    value = getattr(plait, name)
    assert isinstance(value, types.ModuleType)
    assert value is sys.modules[f"plait.{name}"]
    assert name in dir(plait)


def test_submodules_import_on_first_access() -> None:
    code = (
        "import sys, plait; before = 'plait.replay' in sys.modules; "
        "record = plait.replay.record; print(before, 'plait.replay' in sys.modules, record.__module__)"
    )
    assert _run(code).split() == ["False", "True", "plait.replay"]


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = plait.nope


def test_import_is_lazy() -> None:
    """``import plait`` loads none of the heavy modules: what keeps it fast (its time is a bench
    figure, not a test: bench/README.md, ``import plait`` 0.007 s)."""
    code = f"import sys; import plait; print([m for m in {HEAVY!r} if m in sys.modules])"
    assert _run(code).strip() == "[]"


def test_testing_all_is_pinned_and_resolves() -> None:
    assert plait.testing.__all__ == TESTING_EXPECTED
    assert sorted(plait.testing.__all__) == plait.testing.__all__
    for name in plait.testing.__all__:
        assert getattr(plait.testing, name) is not None, name


def test_eval_all_is_pinned_and_resolves() -> None:
    import plait.eval

    assert plait.eval.__all__ == EVAL_EXPECTED
    for name in plait.eval.__all__:
        assert getattr(plait.eval, name) is not None, name


def test_testing_import_is_light() -> None:
    code = "import sys, plait.testing; print([m for m in ('pydantic', 'aiohttp', 'plait.agents') if m in sys.modules])"
    assert _run(code).strip() == "[]"


def test_a_model_client_of_a_plain_http_server_runs_without_aiohttp() -> None:
    """The lean HTTP/1.1 client serves http:// endpoints; aiohttp is imported only for https or proxies."""
    code = (
        "import sys, asyncio; from plait.agents import AsyncAgent; from plait.llms import AsyncGPTAPI, GPTAPI; "
        "from plait.actions import AsyncActionExecutor; "
        "llm = AsyncGPTAPI('m', api_base='http://127.0.0.1:9/v1', key=None); "
        "print('aiohttp' in sys.modules); "
        "AsyncGPTAPI('m', api_base='https://example.invalid/v1', key=None); print('aiohttp' in sys.modules)"
    )
    assert _run(code).split() == ["False", "True"]


PARADIGMS = ("autogpt", "conversational", "function_calling", "internlm2_agent", "react", "rewoo", "stream")


def test_the_agent_core_does_not_import_the_paradigms_until_they_are_named() -> None:
    code = (
        "import sys; from plait.agents import AsyncAgent, Sequential; "
        f"print([p for p in {PARADIGMS!r} if f'plait.agents.{{p}}' in sys.modules]); "
        "from plait.agents import ReAct; print(ReAct.__module__)"
    )
    first, second = _run(code).strip().splitlines()
    assert first == "[]"
    assert second == "plait.agents.react"


def test_tracing_all_is_pinned_and_imports_no_opentelemetry() -> None:
    code = "import sys, plait.tracing as t; print(t.__all__, [m for m in sys.modules if m.startswith('opentelemetry')])"
    assert _run(code).strip() == "['JSONLTracer', 'current_span', 'instrument', 'is_instrumented', 'uninstrument'] []"


def test_interop_tools_are_lazy_names_of_plait_actions() -> None:
    code = (
        "import sys, plait.actions\n"
        "from plait.actions import AgentLegoTool, AsyncAgentLegoTool, AsyncLangChainTool, Calculator, LangChainTool\n"
        "Calculator().as_langchain_tool\n"  # the method is there before LangChain is imported
        "print([m for m in ('langchain_core', 'agentlego') if m in sys.modules])\n"
        "print(LangChainTool.__module__, AsyncLangChainTool.__module__)\n"
        "print(AgentLegoTool.__module__, AsyncAgentLegoTool.__module__)\n"
        "names = {'AgentLegoTool', 'AsyncAgentLegoTool', 'AsyncLangChainTool', 'LangChainTool'}\n"
        "print(sorted(names & set(dir(plait.actions))))"
    )
    assert _run(code).splitlines() == [
        "[]",
        "plait.actions.langchain_tool plait.actions.langchain_tool",
        "plait.actions.agentlego_tool plait.actions.agentlego_tool",
        "['AgentLegoTool', 'AsyncAgentLegoTool', 'AsyncLangChainTool', 'LangChainTool']",
    ]


def test_mcp_all_is_pinned() -> None:
    import plait.actions.mcp

    assert plait.actions.mcp.__all__ == ["AsyncMCPToolkit", "Elicitation", "MCPServer", "MCPToolkit", "Sampling"]
    assert all(getattr(plait.actions.mcp, name) for name in plait.actions.mcp.__all__)
