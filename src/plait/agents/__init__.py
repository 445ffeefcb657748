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
from .module import AgentModule, IncompatibleKeys

__all__ = [
    "Agent",
    "AgentDict",
    "AgentList",
    "AgentModule",
    "AsyncAgent",
    "AsyncFunctionCallingAgent",
    "AsyncSequential",
    "AsyncStreamingAgent",
    "AsyncStreamingSequential",
    "FunctionCallingAgent",
    "IncompatibleKeys",
    "Sequential",
    "StreamingAgent",
    "StreamingSequential",
]
