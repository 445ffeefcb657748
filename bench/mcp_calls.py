"""MCP tool calls: plait's MCPToolkit vs the official SDK client, on the same server.

The server is tests/actions/mcp/demo_server.py (the official SDK's MCPServer) over stdio.
Measured: the time to start a server and list its tools, sequential `add` calls, and 100
concurrent `add` calls (async toolkit vs the SDK's session, both on one connection).

    PYTHONPATH=src .venv/bin/python bench/mcp_calls.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from plait.actions.mcp import AsyncMCPToolkit, MCPToolkit

SERVER = str(Path(__file__).resolve().parents[1] / "tests" / "actions" / "mcp" / "demo_server.py")
SEQUENTIAL = 300
CONCURRENT = 100
ROUNDS = 3


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def sdk_run(work: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    params = StdioServerParameters(command=sys.executable, args=[SERVER])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        return await work(session)


def bench_start() -> tuple[float, float]:
    plait_times, sdk_times = [], []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        MCPToolkit(sys.executable, [SERVER]).close()
        plait_times.append(time.perf_counter() - start)

        async def nothing(session: ClientSession) -> None:
            return None

        start = time.perf_counter()
        asyncio.run(sdk_run(nothing))
        sdk_times.append(time.perf_counter() - start)
    return median_ms(plait_times), median_ms(sdk_times)


def bench_sequential() -> tuple[float, float, float]:
    with MCPToolkit(sys.executable, [SERVER]) as toolkit:
        toolkit({"a": 1, "b": 1}, "add")
        start = time.perf_counter()
        for i in range(SEQUENTIAL):
            toolkit({"a": i, "b": 1}, "add")
        plait_sync = (time.perf_counter() - start) / SEQUENTIAL

    async def plait_async() -> float:
        toolkit = AsyncMCPToolkit(sys.executable, [SERVER])
        try:
            await toolkit({"a": 1, "b": 1}, "add")
            start = time.perf_counter()
            for i in range(SEQUENTIAL):
                await toolkit({"a": i, "b": 1}, "add")
            return (time.perf_counter() - start) / SEQUENTIAL
        finally:
            await toolkit.aclose()

    async def sdk(session: ClientSession) -> float:
        await session.call_tool("add", {"a": 1, "b": 1})
        start = time.perf_counter()
        for i in range(SEQUENTIAL):
            await session.call_tool("add", {"a": i, "b": 1})
        return (time.perf_counter() - start) / SEQUENTIAL

    return plait_sync * 1000, asyncio.run(plait_async()) * 1000, asyncio.run(sdk_run(sdk)) * 1000


def bench_concurrent() -> tuple[float, float]:
    async def plait_async() -> float:
        toolkit = AsyncMCPToolkit(sys.executable, [SERVER])
        try:
            await toolkit({"a": 1, "b": 1}, "add")
            start = time.perf_counter()
            await asyncio.gather(*(toolkit({"a": i, "b": 1}, "add") for i in range(CONCURRENT)))
            return CONCURRENT / (time.perf_counter() - start)
        finally:
            await toolkit.aclose()

    async def sdk(session: ClientSession) -> float:
        await session.call_tool("add", {"a": 1, "b": 1})
        start = time.perf_counter()
        await asyncio.gather(*(session.call_tool("add", {"a": i, "b": 1}) for i in range(CONCURRENT)))
        return CONCURRENT / (time.perf_counter() - start)

    return asyncio.run(plait_async()), asyncio.run(sdk_run(sdk))


def main() -> None:
    start_plait, start_sdk = bench_start()
    sequential = [bench_sequential() for _ in range(ROUNDS)]
    concurrent = [bench_concurrent() for _ in range(ROUNDS)]
    sync_ms = statistics.median(s[0] for s in sequential)
    async_ms = statistics.median(s[1] for s in sequential)
    sdk_ms = statistics.median(s[2] for s in sequential)
    plait_rate = statistics.median(c[0] for c in concurrent)
    sdk_rate = statistics.median(c[1] for c in concurrent)
    print("| measurement | plait | official SDK client | ratio |")
    print("|---|---|---|---|")
    print(f"| start server + list tools | {start_plait:.0f} ms | {start_sdk:.0f} ms | {start_plait / start_sdk:.2f}x |")
    print(f"| sequential call, sync toolkit | {sync_ms:.2f} ms | {sdk_ms:.2f} ms | {sync_ms / sdk_ms:.2f}x |")
    print(f"| sequential call, async toolkit | {async_ms:.2f} ms | {sdk_ms:.2f} ms | {async_ms / sdk_ms:.2f}x |")
    print(f"| calls/s, {CONCURRENT} concurrent | {plait_rate:.0f} | {sdk_rate:.0f} | {plait_rate / sdk_rate:.2f}x |")


if __name__ == "__main__":
    main()
