"""Agent overhead against a raw aiohttp loop, on a fake OpenAI-compatible server.

One *run* = two chat-completion calls and one tool call: the server first answers with a
tool call (Calculator), then, once the request carries the tool result, with a final
answer. The same run is made two ways, side by side in one process:

* **raw**: a hand-written aiohttp loop (one pooled session) sending the same request bodies
  (captured from one plait run) and evaluating the same tool;
* **plait**: `AsyncFunctionCallingAgent(AsyncGPTAPI(...), [Calculator()])`, one session id per run.

Measured: per-run latency at 0 ms server latency (sequential), and runs/s at 1, 16, 64 and
256 concurrent sessions with 50 ms server latency. The server runs in its own process.

Usage: ``python bench/agent_overhead.py [--runs 400] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import time
from typing import Any

import aiohttp

QUESTION = "What is 37 * 91?"


def _handler(body: dict[str, Any]) -> Any:
    from plait.testing.fake_openai import Reply

    if body["messages"][-1]["role"] == "tool":
        return Reply(f"The answer is {body['messages'][-1]['content']}.")
    return Reply(tool_calls=[("Calculator", {"expression": "37 * 91"})])


def _serve(latency: float, port_queue: Any, stop: Any, handler: Any = _handler) -> None:
    from plait.testing.fake_openai import FakeOpenAIServer

    server = FakeOpenAIServer(handler=handler, latency=latency).start()
    port_queue.put(server.port)
    stop.wait()
    server.stop()


class Server:
    """The fake server in a child process; `handler` (a module-level function) answers the requests."""

    def __init__(self, latency: float, handler: Any = _handler) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.stop = ctx.Event()
        ports = ctx.Queue()
        self.process = ctx.Process(target=_serve, args=(latency, ports, self.stop, handler), daemon=True)
        self.process.start()
        self.base_url = f"http://127.0.0.1:{ports.get(timeout=30)}/v1"

    def close(self) -> None:
        self.stop.set()
        self.process.join(timeout=10)


def recorded_bodies() -> tuple[dict[str, Any], dict[str, Any]]:
    """The two request bodies plait sends for one run (captured once), so the raw loop sends the same bytes."""
    from plait.testing.fake_openai import FakeOpenAIServer

    with FakeOpenAIServer(handler=_handler) as server:
        asyncio.run(_one_plait_run(server.base_url))
        first, second = server.requests[0], server.requests[1]
    return first, second


async def _one_plait_run(base_url: str) -> None:
    agent = make_agent(base_url)
    await agent(QUESTION)
    await agent.llm.aclose()


async def raw_run(session: aiohttp.ClientSession, url: str, bodies: tuple[dict[str, Any], dict[str, Any]]) -> str:
    from plait.actions.calculator import evaluate

    first, second = bodies
    async with session.post(url, json=first) as response:
        data = await response.json()
    message = data["choices"][0]["message"]
    call = message["tool_calls"][0]
    result = str(evaluate(json.loads(call["function"]["arguments"])["expression"]))
    messages = [*first["messages"], message, {"role": "tool", "tool_call_id": call["id"], "content": result}]
    async with session.post(url, json={**second, "messages": messages}) as response:
        data = await response.json()
    return str(data["choices"][0]["message"]["content"])


BODIES: tuple[dict[str, Any], dict[str, Any]] = ({}, {})


def make_agent(base_url: str) -> Any:
    from plait.actions.calculator import Calculator
    from plait.agents.function_calling import AsyncFunctionCallingAgent
    from plait.llms.openai import AsyncGPTAPI

    llm = AsyncGPTAPI("m", api_base=base_url, key=None, retry=1)
    return AsyncFunctionCallingAgent(llm, [Calculator()])


async def plait_run(agent: Any, session_id: int) -> str:
    reply = await agent(QUESTION, session_id=session_id)
    agent.reset(session_id)
    return str(reply.content)


async def sequential(base_url: str, runs: int, block: int = 25) -> dict[str, float]:
    """Per-run time of each way, measured in alternating blocks so drift hits both alike."""
    url = base_url + "/chat/completions"
    agent = make_agent(base_url)
    raw = ours = 0.0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        for i in range(20):  # warm-up: connections, imports
            await raw_run(session, url, BODIES)
            await plait_run(agent, i)
        for start_index in range(0, runs, block):
            start = time.perf_counter()
            for _ in range(block):
                await raw_run(session, url, BODIES)
            raw += time.perf_counter() - start
            start = time.perf_counter()
            for i in range(start_index, start_index + block):
                await plait_run(agent, i)
            ours += time.perf_counter() - start
    await agent.llm.aclose()
    done = -(-runs // block) * block
    return {"raw_ms": raw / done * 1000, "plait_ms": ours / done * 1000}


async def concurrent(base_url: str, concurrency: int, runs: int) -> dict[str, float]:
    url = base_url + "/chat/completions"
    agent = make_agent(base_url)

    async def raw_worker(session: aiohttp.ClientSession, n: int) -> None:
        for _ in range(n):
            await raw_run(session, url, BODIES)

    async def plait_worker(worker: int, n: int) -> None:
        for i in range(n):
            await plait_run(agent, worker * 100_000 + i)

    per_worker = max(1, runs // concurrency)
    total = per_worker * concurrency
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await raw_worker(session, 2)
        start = time.perf_counter()
        await asyncio.gather(*(raw_worker(session, per_worker) for _ in range(concurrency)))
        raw = total / (time.perf_counter() - start)
    await plait_worker(999, 2)
    start = time.perf_counter()
    await asyncio.gather(*(plait_worker(w, per_worker) for w in range(concurrency)))
    ours = total / (time.perf_counter() - start)
    await agent.llm.aclose()
    return {"raw_rps": raw, "plait_rps": ours}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3, help="repeat each measurement; the median is reported")
    args = parser.parse_args()
    global BODIES
    BODIES = recorded_bodies()

    fast = Server(latency=0.0)
    try:
        seq = [asyncio.run(sequential(fast.base_url, args.runs)) for _ in range(args.rounds)]
    finally:
        fast.close()
    raw_ms = statistics.median(r["raw_ms"] for r in seq)
    plait_ms = statistics.median(r["plait_ms"] for r in seq)
    lines = [
        "| measurement | raw aiohttp | plait | ratio |",
        "|---|---|---|---|",
        f"| per run, 0 ms latency, sequential | {raw_ms:.2f} ms | {plait_ms:.2f} ms | {plait_ms / raw_ms:.2f}x |",
    ]
    slow = Server(latency=0.05)
    try:
        for concurrency in (1, 16, 64, 256):
            runs = max(concurrency * 4, 40)
            results = [asyncio.run(concurrent(slow.base_url, concurrency, runs)) for _ in range(args.rounds)]
            raw = statistics.median(r["raw_rps"] for r in results)
            ours = statistics.median(r["plait_rps"] for r in results)
            lines.append(
                f"| runs/s, 50 ms latency, {concurrency} concurrent | {raw:.0f} | {ours:.0f} | {ours / raw:.2f}x |"
            )
    finally:
        slow.close()
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
