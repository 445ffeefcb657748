"""plait: LLM agents built the way PyTorch builds networks.

Agents are layers, messages flow between them, memory is state. Everything below is
imported on first use, so ``import plait`` stays fast.

```python
from plait import Agent, AgentMessage
from plait.testing import ScriptedLLM

agent = Agent(ScriptedLLM(['Hello!']), 'You are friendly.')
print(agent('Hi'))  # content='Hello!' sender='Agent' ...
```
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._lazy import lazy_module
from ._version import __version__

if TYPE_CHECKING:
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
        AgentList,
        AsyncAgent,
        AsyncSequential,
        AsyncStreamingAgent,
        AsyncStreamingSequential,
        Sequential,
        StreamingAgent,
        StreamingSequential,
    )
    from .hooks import ActionPreprocessor, Hook, InternLMActionProcessor, MessageLogger, RemovableHandle
    from .llms import GPTAPI, AsyncGPTAPI, AsyncLlamaCppModel, LlamaCppModel
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
    **dict.fromkeys(
        [
            "Agent",
            "AgentDict",
            "AgentList",
            "AsyncAgent",
            "AsyncSequential",
            "AsyncStreamingAgent",
            "AsyncStreamingSequential",
            "Sequential",
            "StreamingAgent",
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
    **dict.fromkeys(["AsyncGPTAPI", "GPTAPI", "LlamaCppModel", "AsyncLlamaCppModel"], "plait.llms"),
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

__all__ = sorted([*_EXPORTS, "__version__"])


__getattr__, __dir__ = lazy_module(__name__, _EXPORTS, __all__)
