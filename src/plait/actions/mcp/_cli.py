"""``plait mcp-serve MODULE:ATTR``: serve the tools a Python module names over MCP (private).

``MODULE`` is an importable module (the current folder is searched first) or a ``.py``
file; ``ATTR`` is an `MCPServer`, or an action, toolkit, agent or list of them (served
under the module's name). The bearer token of Streamable HTTP comes from ``--token-file``
or ``$PLAIT_SERVER_TOKEN``, never from the command line.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys

from ...distributed.http_serve.app import server_token
from ...exceptions import UserError
from .server import MCPServer

__all__ = ["load_server", "mcp_serve"]


def _module(name: str) -> object:
    if name.endswith(".py"):
        path = os.path.abspath(name)
        spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
        if spec is None or spec.loader is None or not os.path.isfile(path):
            raise UserError(f"no Python file {name!r}")
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, os.path.dirname(path))  # the file may import its neighbours
        spec.loader.exec_module(module)
        return module
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(name)


def load_server(target: str) -> MCPServer:
    """The `MCPServer` that ``MODULE:ATTR`` names (actions and agents are wrapped in one).

    Raises:
        UserError: The target is not ``MODULE:ATTR``, or the module or attribute does not exist.
    """
    module_name, _, attribute = target.rpartition(":")
    if not module_name or not attribute:
        raise UserError(f"expected MODULE:ATTR (e.g. my_tools:server), got {target!r}")
    try:
        module = _module(module_name)
    except ImportError as exc:
        raise UserError(f"could not import {module_name!r}: {exc}") from exc
    try:
        value = getattr(module, attribute)
    except AttributeError:
        raise UserError(f"{module_name!r} has no attribute {attribute!r}") from None
    if isinstance(value, MCPServer):
        return value
    name = os.path.splitext(os.path.basename(module_name))[0].rpartition(".")[2]
    return MCPServer(value, name=name)


def mcp_serve(args: argparse.Namespace) -> int:
    """Run ``plait mcp-serve`` with parsed arguments (``target``, ``transport``, ``host``, ``port``...)."""
    server = load_server(args.target)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        token = server_token(args.token_file)
        server.run("streamable-http", args.host, args.port, token, insecure=args.insecure)
    return 0
