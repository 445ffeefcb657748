"""Agents: layers that pass messages, and containers that compose them."""

from .agent import Agent, AsyncAgent, AsyncStreamingAgent, StreamingAgent
from .autogpt import AsyncAutoGPT, AutoGPT
from .containers import (
    AgentDict,
    AgentList,
    AsyncSequential,
    AsyncStreamingSequential,
    Sequential,
    StreamingSequential,
)
from .conversational import AsyncConversationalAgent, ConversationalAgent
from .function_calling import (
    AsyncFunctionCallingAgent,
    AsyncStreamingFunctionCallingAgent,
    FunctionCallingAgent,
    StreamingFunctionCallingAgent,
)
from .internlm2_agent import AgentReturn, Internlm2Agent, Internlm2Protocol
from .module import AgentModule, IncompatibleKeys
from .react import AsyncReAct, ReAct
from .rewoo import AsyncReWOO, ReWOO
from .stream import AgentForInternLM, AsyncAgentForInternLM, AsyncMathCoder, MathCoder

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
]
