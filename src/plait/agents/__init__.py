"""Agents: layers that pass messages, and containers that compose them (paradigms imported on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_module
from .agent import Agent, AsyncAgent, AsyncStreamingAgent, StreamingAgent
from .containers import (
    AgentDict,
    AgentList,
    AsyncSequential,
    AsyncStreamingSequential,
    Sequential,
    StreamingSequential,
)
from .module import AgentModule, IncompatibleKeys

if TYPE_CHECKING:
    from .autogpt import AsyncAutoGPT, AutoGPT
    from .conversational import AsyncConversationalAgent, ConversationalAgent
    from .drawing import draw
    from .function_calling import (
        AsyncFunctionCallingAgent,
        AsyncStreamingFunctionCallingAgent,
        FunctionCallingAgent,
        StreamingFunctionCallingAgent,
    )
    from .handoff import Handoff
    from .internlm2_agent import AgentReturn, Internlm2Agent, Internlm2Protocol
    from .react import AsyncReAct, ReAct
    from .remote_a2a import AsyncRemoteA2AAgent, RemoteA2AAgent
    from .rewoo import AsyncReWOO, ReWOO
    from .stream import AgentForInternLM, AsyncAgentForInternLM, AsyncMathCoder, MathCoder

# the paradigms (and `draw`) are imported on first use, so ``from plait.agents import AsyncAgent`` stays light
_PARADIGMS = {
    ".autogpt": ("AsyncAutoGPT", "AutoGPT"),
    ".conversational": ("AsyncConversationalAgent", "ConversationalAgent"),
    ".drawing": ("draw",),
    ".function_calling": (
        "AsyncFunctionCallingAgent",
        "AsyncStreamingFunctionCallingAgent",
        "FunctionCallingAgent",
        "StreamingFunctionCallingAgent",
    ),
    ".handoff": ("Handoff",),
    ".internlm2_agent": ("AgentReturn", "Internlm2Agent", "Internlm2Protocol"),
    ".react": ("AsyncReAct", "ReAct"),
    ".remote_a2a": ("AsyncRemoteA2AAgent", "RemoteA2AAgent"),
    ".rewoo": ("AsyncReWOO", "ReWOO"),
    ".stream": ("AgentForInternLM", "AsyncAgentForInternLM", "AsyncMathCoder", "MathCoder"),
}

__all__ = [
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
    "AsyncRemoteA2AAgent",
    "AsyncSequential",
    "AsyncStreamingAgent",
    "AsyncStreamingFunctionCallingAgent",
    "AsyncStreamingSequential",
    "AutoGPT",
    "ConversationalAgent",
    "FunctionCallingAgent",
    "Handoff",
    "IncompatibleKeys",
    "Internlm2Agent",
    "Internlm2Protocol",
    "MathCoder",
    "ReAct",
    "ReWOO",
    "RemoteA2AAgent",
    "Sequential",
    "StreamingAgent",
    "StreamingFunctionCallingAgent",
    "StreamingSequential",
    "draw",
]

__getattr__, __dir__ = lazy_module(
    __name__, {name: module for module, names in _PARADIGMS.items() for name in names}, __all__
)
