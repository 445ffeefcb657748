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
from .module import AgentModule, IncompatibleKeys

__all__ = [
    "Agent",
    "AgentDict",
    "AgentList",
    "AgentModule",
    "AsyncAgent",
    "AsyncSequential",
    "AsyncStreamingAgent",
    "AsyncStreamingSequential",
    "IncompatibleKeys",
    "Sequential",
    "StreamingAgent",
    "StreamingSequential",
]
