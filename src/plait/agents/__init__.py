"""Agents: layers that pass messages, and containers that compose them."""

from .agent import Agent, AsyncAgent, AsyncStreamingAgent, StreamingAgent
from .containers import (
    AgentDict,
    AgentList,
    AsyncSequential,
    AsyncStreamingSequential,
    Sequential,
    StreamingSequential,
)
from .function_calling import AsyncFunctionCallingAgent, FunctionCallingAgent
from .internlm2_agent import AgentReturn, Internlm2Agent, Internlm2Protocol
from .module import AgentModule, IncompatibleKeys
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
    "AsyncFunctionCallingAgent",
    "AsyncMathCoder",
    "AsyncSequential",
    "AsyncStreamingAgent",
    "AsyncStreamingSequential",
    "FunctionCallingAgent",
    "IncompatibleKeys",
    "Internlm2Agent",
    "Internlm2Protocol",
    "MathCoder",
    "Sequential",
    "StreamingAgent",
    "StreamingSequential",
]
