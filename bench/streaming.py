"""Streaming: time to first token and cost per chunk, plait against a raw aiohttp SSE reader.

The fake OpenAI-compatible server (its own process) streams a 200-word reply word by word
with ``chunk_delay`` between chunks. *raw* reads the SSE stream with aiohttp and decodes
each ``data:`` line; *plait* is `AsyncStreamingAgent(AsyncGPTAPI(...))` iterated with
``async for``. Measured per request: time to the first chunk with text, and the client's CPU
per chunk (``time.process_time`` over the whole stream divided by the chunks).

    PYTHONPATH=src .venv/bin/python bench/streaming.py [--requests 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import time
from typing import Any

import aiohttp

TEXT = " ".join(f"word{i}" for i in range(200))


def _serve(port_queue: Any, stop: Any) -> None:
    from plait.testing.fake_openai import FakeOpenAIServer, Reply

    server = FakeOpenAIServer(handler=lambda body: Reply(TEXT), chunk_delay=0.0005).start()
    port_queue.put(server.port)
    stop.wait()
    server.stop()


async def raw_stream(session: aiohttp.ClientSession, url: str) -> tuple[float, int]:
    """Seconds to the first text chunk, and the number of text chunks."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    start = time.perf_counter()
    first = 0.0
    chunks = 0
    async with session.post(url, json=body) as response:
        async for line in response.content:
            if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                continue
            data = json.loads(line[6:])
            choices = data.get("choices") or []
            if choices and choices[0].get("delta", {}).get("content"):
                chunks += 1
                if chunks == 1:
                    first = time.perf_counter() - start
    return first, chunks


async def plait_stream(agent: Any, session_id: int) -> tuple[float, int]:
    """The same through the agent."""
    start = time.perf_counter()
    first = 0.0
    chunks = 0
    async for chunk in agent("hi", session_id=session_id):
        if chunk.content:
            chunks += 1
            if chunks == 1:
                first = time.perf_counter() - start
    agent.reset(session_id)
    return first, chunks


async def measure(base_url: str, requests: int) -> None:
    """Alternate raw and plait requests; print medians."""
    from plait.agents import AsyncStreamingAgent
    from plait.llms import AsyncGPTAPI

    agent = AsyncStreamingAgent(AsyncGPTAPI("m", api_base=base_url, key=None, retry=1))
    url = base_url + "/chat/completions"
    results: dict[str, list[tuple[float, float]]] = {"raw": [], "plait": []}
    async with aiohttp.ClientSession() as session:
        for i in range(requests + 10):
            for name in ("raw", "plait"):
                cpu = time.process_time()
                if name == "raw":
                    first, chunks = await raw_stream(session, url)
                else:
                    first, chunks = await plait_stream(agent, i)
                per_chunk = (time.process_time() - cpu) / max(1, chunks)
                if i >= 10:  # warm-up
                    results[name].append((first, per_chunk))
    await agent.llm.aclose()
    print("| stream | time to first token (median) | client CPU per chunk (median) |")
    print("|---|---|---|")
    for name, rows in results.items():
        ttft = statistics.median(r[0] for r in rows) * 1000
        cpu = statistics.median(r[1] for r in rows) * 1e6
        print(f"| {name} | {ttft:.2f} ms | {cpu:.1f} us |")


def main() -> None:
    """Start the server, measure, stop."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    ctx = multiprocessing.get_context("spawn")
    stop, ports = ctx.Event(), ctx.Queue()
    process = ctx.Process(target=_serve, args=(ports, stop), daemon=True)
    process.start()
    try:
        asyncio.run(measure(f"http://127.0.0.1:{ports.get(timeout=30)}/v1", args.requests))
    finally:
        stop.set()
        process.join(timeout=10)


if __name__ == "__main__":
    main()
