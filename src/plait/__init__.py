"""plait: LLM agents built the way PyTorch builds networks.

Agents are layers, messages flow between them, memory is state. Everything below is
imported on first use, so ``import plait`` stays fast: the names of `__all__` (agents,
models, tools, hooks, memory, message schema) and the submodules users name through the
package (``plait.actions``, ``plait.agents``, ``plait.hooks``, ``plait.llms``,
``plait.memory``, ``plait.replay``, ``plait.testing``).

```python
from plait import Agent, AgentMessage
from plait.testing import ScriptedLLM

agent = Agent(ScriptedLLM(['Hello!']), 'You are friendly.')
print(agent('Hi'))  # content='Hello!' sender='Agent' ...
```
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._lazy import lazy_module
from ._version import __version__

if TYPE_CHECKING:
    from . import actions, agents, hooks, llms, memory, replay, testing
    from .actions import (
        ActionExecutor,
        ArxivSearch,
        AsyncActionExecutor,
        BaseAction,
        BaseParser,
        Calculator,
        FinishAction,
        InvalidAction,
        IPythonInteractive,
        IPythonInterpreter,
        JsonParser,
        NoAction,
        PythonInterpreter,
        TupleParser,
        WebBrowser,
        get_tool,
        get_tool_cls,
        list_tools,
        tool_api,
    )
    from .agents import (
        Agent,
        AgentDict,
        AgentForInternLM,
        AgentList,
        AgentModule,
        AgentReturn,
        AsyncAgent,
        AsyncAgentForInternLM,
        AsyncAutoGPT,
        AsyncConversationalAgent,
        AsyncFunctionCallingAgent,
        AsyncMathCoder,
        AsyncReAct,
        AsyncReWOO,
        AsyncSequential,
        AsyncStreamingAgent,
        AsyncStreamingFunctionCallingAgent,
        AsyncStreamingSequential,
        AutoGPT,
        ConversationalAgent,
        FunctionCallingAgent,
        IncompatibleKeys,
        Internlm2Agent,
        Internlm2Protocol,
        MathCoder,
        ReAct,
        ReWOO,
        Sequential,
        StreamingAgent,
        StreamingFunctionCallingAgent,
        StreamingSequential,
    )
    from .hooks import ActionPreprocessor, Hook, InternLMActionProcessor, MessageLogger, RemovableHandle
    from .llms import (
        GPTAPI,
        APITemplateParser,
        AsyncBaseLLM,
        AsyncClaudeAPI,
        AsyncGPTAPI,
        AsyncHFTransformer,
        AsyncHFTransformerCasualLM,
        AsyncHFTransformerChat,
        AsyncLlamaCppModel,
        AsyncLMDeployClient,
        AsyncLMDeployPipeline,
        AsyncLMDeployServer,
        AsyncVllmModel,
        BaseLLM,
        ClaudeAPI,
        HFTransformer,
        HFTransformerCasualLM,
        HFTransformerCausalLM,
        HFTransformerChat,
        LlamaCppModel,
        LMDeployClient,
        LMDeployPipeline,
        LMDeployServer,
        LMTemplateParser,
        VllmModel,
    )
    from .memory import Memory, MemoryManager
    from .schema import (
        ActionReturn,
        ActionStatusCode,
        ActionValidCode,
        AgentMessage,
        AgentStatusCode,
        FunctionCall,
        ModelStatusCode,
    )

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # every class of plait.agents.__all__
    **dict.fromkeys(
        [
            "Agent",
            "AgentDict",
            "AgentForInternLM",
            "AgentList",
            "AgentModule",
            "AgentReturn",
            "AsyncAgent",
            "AsyncAgentForInternLM",
            "AsyncAutoGPT",
            "AsyncConversationalAgent",
            "AsyncFunctionCallingAgent",
            "AsyncMathCoder",
            "AsyncReAct",
            "AsyncReWOO",
            "AsyncSequential",
            "AsyncStreamingAgent",
            "AsyncStreamingFunctionCallingAgent",
            "AsyncStreamingSequential",
            "AutoGPT",
            "ConversationalAgent",
            "FunctionCallingAgent",
            "IncompatibleKeys",
            "Internlm2Agent",
            "Internlm2Protocol",
            "MathCoder",
            "ReAct",
            "ReWOO",
            "Sequential",
            "StreamingAgent",
            "StreamingFunctionCallingAgent",
            "StreamingSequential",
        ],
        "plait.agents",
    ),
    **dict.fromkeys(
        [
            "ActionExecutor",
            "ArxivSearch",
            "AsyncActionExecutor",
            "BaseAction",
            "BaseParser",
            "Calculator",
            "FinishAction",
            "IPythonInteractive",
            "IPythonInterpreter",
            "InvalidAction",
            "JsonParser",
            "NoAction",
            "PythonInterpreter",
            "TupleParser",
            "WebBrowser",
            "get_tool",
            "get_tool_cls",
            "list_tools",
            "tool_api",
        ],
        "plait.actions",
    ),
    # every class of plait.llms.__all__ (backends whose extra is missing fail when used, not when named)
    **dict.fromkeys(
        [
            "APITemplateParser",
            "AsyncBaseLLM",
            "AsyncClaudeAPI",
            "AsyncGPTAPI",
            "AsyncHFTransformer",
            "AsyncHFTransformerCasualLM",
            "AsyncHFTransformerChat",
            "AsyncLMDeployClient",
            "AsyncLMDeployPipeline",
            "AsyncLMDeployServer",
            "AsyncLlamaCppModel",
            "AsyncVllmModel",
            "BaseLLM",
            "ClaudeAPI",
            "GPTAPI",
            "HFTransformer",
            "HFTransformerCasualLM",
            "HFTransformerCausalLM",
            "HFTransformerChat",
            "LMDeployClient",
            "LMDeployPipeline",
            "LMDeployServer",
            "LMTemplateParser",
            "LlamaCppModel",
            "VllmModel",
        ],
        "plait.llms",
    ),
    **dict.fromkeys(
        ["ActionPreprocessor", "Hook", "InternLMActionProcessor", "MessageLogger", "RemovableHandle"], "plait.hooks"
    ),
    **dict.fromkeys(["Memory", "MemoryManager"], "plait.memory"),
    **dict.fromkeys(
        [
            "ActionReturn",
            "ActionStatusCode",
            "ActionValidCode",
            "AgentMessage",
            "AgentStatusCode",
            "FunctionCall",
            "ModelStatusCode",
        ],
        "plait.schema",
    ),
}

# submodules reachable as attributes (``import plait; plait.replay.record(...)``), imported on first access
_SUBMODULES = ("actions", "agents", "hooks", "llms", "memory", "replay", "testing")

# a literal list, so type checkers see the re-exports (`tests/test_exports.py` checks it against `_EXPORTS`)
__all__ = [
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
    "RemovableHandle",
    "Sequential",
    "StreamingAgent",
    "StreamingFunctionCallingAgent",
    "StreamingSequential",
    "TupleParser",
    "VllmModel",
    "WebBrowser",
    "__version__",
    "get_tool",
    "get_tool_cls",
    "list_tools",
    "tool_api",
]


_lazy_getattr, __dir__ = lazy_module(__name__, _EXPORTS, [*__all__, *_SUBMODULES])


def __getattr__(name: str) -> object:
    """A lazily exported name, or one of the `_SUBMODULES` (imported on first access).

    Raises:
        AttributeError: `name` is neither.
    """
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    return _lazy_getattr(name)
