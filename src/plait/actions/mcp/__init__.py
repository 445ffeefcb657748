"""Model Context Protocol, both ways: any MCP server's tools as a plait toolkit, and plait tools as an MCP server.

No extra dependency: plait speaks JSON-RPC itself (over a subprocess's pipes, stdin/stdout,
or aiohttp). See `MCPToolkit` (client) and `MCPServer` (server).
"""

from __future__ import annotations

from ._client_requests import Elicitation, Sampling
from .server import MCPServer
from .toolkit import AsyncMCPToolkit, MCPToolkit

__all__ = ["AsyncMCPToolkit", "Elicitation", "MCPServer", "MCPToolkit", "Sampling"]
