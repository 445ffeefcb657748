"""Model Context Protocol: use the tools of any MCP server (stdio or Streamable HTTP) as a plait toolkit.

No extra dependency: the client speaks JSON-RPC itself (over a subprocess's pipes, or
aiohttp). See `MCPToolkit`.
"""

from __future__ import annotations

from .toolkit import AsyncMCPToolkit, MCPToolkit

__all__ = ["AsyncMCPToolkit", "MCPToolkit"]
