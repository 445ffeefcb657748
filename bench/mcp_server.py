"""MCP servers: tool calls per second through plait's MCPServer vs the official SDK's own server.

The same tool, ``add(a: int, b: int) -> int``, served over Streamable HTTP on 127.0.0.1 by
plait's `MCPServer` and by the official SDK's `MCPServer` (FastMCP; tests/actions/mcp/
demo_server.py, answering as plain JSON and as SSE streams), each in its own process. One
client drives both: a minimal aiohttp JSON-RPC client (initialize, then ``tools/call``),
so the server's cost is what differs. Measured: sequential calls (one at a time) and 100
calls in flight on one session; medians of 3 rounds.

    PYTHONPATH=src .venv/bin/python bench/mcp_server.py
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
SDK_SERVER = str(ROOT / "tests" / "actions" / "mcp" / "demo_server.py")
PLAIT_SERVER = """
import sys
from plait.actions.mcp import MCPServer

def add(a: int, b: int) -> int:
    '''Add two integers.'''
    return a + b

MCPServer([add], name="bench").run("streamable-http", port=int(sys.argv[1]))
"""
SEQUENTIAL = 500
CONCURRENT = 100
ROUNDS = 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(args: list[str], port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise TimeoutError(f"{args} did not listen on {port}")


class Client:
    """A minimal Streamable HTTP client: POST each request, read a JSON or SSE answer."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url, self.ids = http, url, 0
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    async def post(self, method: str, params: dict[str, Any] | None = None, notify: bool = False) -> Any:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self.ids += 1
            body["id"] = self.ids
        async with self.http.post(self.url, data=json.dumps(body), headers=self.headers) as response:
            if "Mcp-Session-Id" in response.headers:
                self.headers["Mcp-Session-Id"] = response.headers["Mcp-Session-Id"]
            text = await response.text()
        if notify:
            return None
        if response.content_type == "text/event-stream":
            text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
        answer = json.loads(text)
        if "result" not in answer:
            raise RuntimeError(f"{method}: {answer}")
        return answer["result"]

    async def open(self) -> None:
        await self.post(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
        )
        self.headers["MCP-Protocol-Version"] = "2025-06-18"
        await self.post("notifications/initialized", notify=True)

    async def add(self) -> None:
        result = await self.post("tools/call", {"name": "add", "arguments": {"a": 20, "b": 22}})
        assert result["content"][0]["text"] == "42", result


async def measure(url: str) -> tuple[float, float]:
    """(sequential calls per second, concurrent calls per second), medians of `ROUNDS`."""
    sequential, concurrent = [], []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENT)) as http:
        client = Client(http, url)
        await client.open()
        for _ in range(50):
            await client.add()  # warm up
        for _ in range(ROUNDS):
            begin = time.perf_counter()
            for _ in range(SEQUENTIAL):
                await client.add()
            sequential.append(SEQUENTIAL / (time.perf_counter() - begin))
            begin = time.perf_counter()
            await asyncio.gather(*(client.add() for _ in range(CONCURRENT)))
            concurrent.append(CONCURRENT / (time.perf_counter() - begin))
    return statistics.median(sequential), statistics.median(concurrent)


def main() -> None:
    servers = {
        "plait MCPServer": ([sys.executable, "-c", PLAIT_SERVER], []),
        "SDK MCPServer (JSON)": ([sys.executable, SDK_SERVER, "http"], ["json"]),
        "SDK MCPServer (SSE)": ([sys.executable, SDK_SERVER, "http"], []),
    }
    rows: dict[str, tuple[float, float]] = {}
    for name, (args, extra) in servers.items():
        port = free_port()
        process = start([*args, str(port), *extra], port)
        try:
            rows[name] = asyncio.run(measure(f"http://127.0.0.1:{port}/mcp"))
        finally:
            process.terminate()
            process.wait(timeout=10)
    best = max(rows[n] for n in rows if n.startswith("SDK"))
    print(f"| server | calls/s sequential | calls/s, {CONCURRENT} in flight |")
    print("|---|---|---|")
    for name, (seq, conc) in rows.items():
        print(f"| {name} | {seq:,.0f} | {conc:,.0f} |")
    plait = rows["plait MCPServer"]
    print(f"| plait / best SDK | {plait[0] / best[0]:.2f}x | {plait[1] / best[1]:.2f}x |")


if __name__ == "__main__":
    main()
