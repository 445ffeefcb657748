# ruff: noqa: F405  (the names of __all__ come from the TYPE_CHECKING star imports)
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

from ._version import __version__

if TYPE_CHECKING:  # what the lazy names are, for type checkers
    from . import actions, agents, hooks, llms, memory, replay, testing
    from .actions import *  # noqa: F403
    from .actions import (  # loaded on first use by plait.actions too, so not in its __all__
        ArxivSearch as ArxivSearch,
        Calculator as Calculator,
        IPythonInteractive as IPythonInteractive,
        IPythonInterpreter as IPythonInterpreter,
        PythonInterpreter as PythonInterpreter,
        WebBrowser as WebBrowser,
    )
    from .agents import *  # noqa: F403
    from .hooks import *  # noqa: F403
    from .llms import *  # noqa: F403
    from .memory import Memory as Memory, MemoryManager as MemoryManager
    from .schema import *  # noqa: F403

# where each exported name is defined: the first of these packages that has it
_PACKAGES = ("plait.schema", "plait.memory", "plait.hooks", "plait.actions", "plait.llms", "plait.agents")

# submodules reachable as attributes (``import plait; plait.replay.record(...)``), imported on first access
_SUBMODULES = ("actions", "agents", "eval", "hooks", "llms", "memory", "replay", "testing", "tracing")

# a literal list, so type checkers see the re-exports (`tests/test_exports.py` pins it)
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


def __getattr__(name: str) -> object:
    """A name of `__all__` (from the package that defines it) or one of the `_SUBMODULES`, imported on first access.

    Raises:
        AttributeError: `name` is neither.
    """
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in __all__:
        for package in _PACKAGES:
            module = importlib.import_module(package)
            if name in getattr(module, "__all__", ()) or name in dir(module):
                value = getattr(module, name)
                globals()[name] = value  # once: later lookups do not come here
                return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*__all__, *_SUBMODULES})
