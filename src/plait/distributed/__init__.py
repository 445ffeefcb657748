"""Serving agents: over HTTP (`plait.distributed.http_serve`) and in Ray actors (`plait.distributed.ray_serve`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .http_serve import AgentAPIServer, AsyncHTTPAgentClient, AsyncHTTPAgentServer, HTTPAgentClient, HTTPAgentServer

if TYPE_CHECKING:
    from .ray_serve import AgentRayActor, AsyncAgentRayActor

__all__ = [
    "AgentAPIServer",
    "AgentRayActor",
    "AsyncAgentRayActor",
    "AsyncHTTPAgentClient",
    "AsyncHTTPAgentServer",
    "HTTPAgentClient",
    "HTTPAgentServer",
]


def __getattr__(name: str) -> type[AgentRayActor] | type[AsyncAgentRayActor]:
    if name in ("AgentRayActor", "AsyncAgentRayActor"):  # ray is imported only when an actor is made
        from . import ray_serve

        return ray_serve.AgentRayActor if name == "AgentRayActor" else ray_serve.AsyncAgentRayActor
    raise AttributeError(f"module 'plait.distributed' has no attribute {name!r}")
