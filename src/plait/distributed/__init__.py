"""Serving agents: over HTTP (`plait.distributed.http_serve`)."""

from __future__ import annotations

from .http_serve import AgentAPIServer, AsyncHTTPAgentClient, AsyncHTTPAgentServer, HTTPAgentClient, HTTPAgentServer

__all__ = ["AgentAPIServer", "AsyncHTTPAgentClient", "AsyncHTTPAgentServer", "HTTPAgentClient", "HTTPAgentServer"]
