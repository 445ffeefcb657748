"""Serving agents: over HTTP (`plait.distributed.http_serve`) and in Ray actors (`plait.distributed.ray_serve`)."""

from __future__ import annotations

from typing import Any

from .http_serve import AgentAPIServer, AsyncHTTPAgentClient, AsyncHTTPAgentServer, HTTPAgentClient, HTTPAgentServer

__all__ = [
    "AgentAPIServer",
    "AgentRayActor",
    "AsyncAgentRayActor",
    "AsyncHTTPAgentClient",
    "AsyncHTTPAgentServer",
    "HTTPAgentClient",
    "HTTPAgentServer",
]


def __getattr__(name: str) -> Any:
    if name in ("AgentRayActor", "AsyncAgentRayActor"):  # ray is imported only when an actor is made
        from . import ray_serve

        return getattr(ray_serve, name)
    raise AttributeError(f"module 'plait.distributed' has no attribute {name!r}")
