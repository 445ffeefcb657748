"""``plait mcp-serve MODULE:ATTR``: serve the tools a Python module names over MCP (private).

``MODULE`` is an importable module (the current folder is searched first) or a ``.py``
file; ``ATTR`` is an `MCPServer`, or an action, toolkit, agent or list of them (served
under the module's name). The bearer token of Streamable HTTP comes from ``--token-file``
or ``$PLAIT_SERVER_TOKEN``, never from the command line.
"""

from __future__ import annotations

import argparse
import os

from ...distributed.http_serve.app import server_token
from ...utils.loading import load_object
from .server import MCPServer

__all__ = ["load_server", "mcp_serve"]


def load_server(target: str) -> MCPServer:
    """The `MCPServer` that ``MODULE:ATTR`` names (actions and agents are wrapped in one).

    Raises:
        UserError: The target is not ``MODULE:ATTR``, or the module or attribute does not exist.
    """
    value = load_object(target, "mcp-serve")
    if isinstance(value, MCPServer):
        return value
    module_name = target.rpartition(":")[0]
    name = os.path.splitext(os.path.basename(module_name))[0].rpartition(".")[2]
    return MCPServer(value, name=name)


def mcp_serve(args: argparse.Namespace) -> int:
    """Run ``plait mcp-serve`` with parsed arguments (``target``, ``transport``, ``host``, ``allowed_host``...)."""
    server = load_server(args.target)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        token = server_token(args.token_file)
        server.run(
            "streamable-http", args.host, args.port, token, insecure=args.insecure, allowed_hosts=args.allowed_host
        )
    return 0
