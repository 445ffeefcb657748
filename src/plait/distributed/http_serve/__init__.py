"""Agents over HTTP.

`AgentAPIServer` serves one; `HTTPAgentClient` / `AsyncHTTPAgentClient` call it;
`HTTPAgentServer` / `AsyncHTTPAgentServer` start one in a subprocess and call it.
"""

from __future__ import annotations

from .app import AgentAPIServer
from .client import AsyncHTTPAgentClient, AsyncHTTPAgentServer, HTTPAgentClient, HTTPAgentServer

__all__ = ["AgentAPIServer", "AsyncHTTPAgentClient", "AsyncHTTPAgentServer", "HTTPAgentClient", "HTTPAgentServer"]
