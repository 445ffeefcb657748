"""Helpers of the MCP tests: the demo server's path, free ports, subprocess servers."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from plait.actions.mcp import AsyncMCPToolkit, MCPToolkit

SERVER = str(Path(__file__).with_name("demo_server.py"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def toolkit_class(mode: str) -> type[MCPToolkit]:
    """`AsyncMCPToolkit` in async mode, else `MCPToolkit`."""
    return AsyncMCPToolkit if mode == "async" else MCPToolkit


def free_port() -> int:
    """A TCP port nobody listens on (now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes] | None = None, limit: float = 30) -> None:
    """Return once 127.0.0.1:`port` accepts connections (fail early when `process` exits)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with status {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on port {port} after {limit} s")


@contextlib.contextmanager
def serving(args: Sequence[str], port: int, **popen: object) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server program listening on `port` for the duration of the block (terminated after)."""
    process = subprocess.Popen(list(args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **popen)  # type: ignore[call-overload]  # popen options pass through
    try:
        wait_for_port(port, process)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
