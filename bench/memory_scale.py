"""Memory at scale: what an idle session costs, and whether runs leak.

* **Idle sessions**: 10,000 sessions of 10 messages each (5 user / 5 assistant turns of ~60
  characters) added to one agent's `MemoryManager`; the process's RSS growth per session
  against the size of the session's messages as JSON (``json.dumps(memory.save())``).
* **Leak check**: 100,000 sequential runs of an `AsyncFunctionCallingAgent` with a tool on an
  in-process model (no network), each in a new session that is reset afterwards, as a server
  does; RSS and Python's traced allocations after 10k, 50k and 100k runs.
* **Leak check over HTTP**: the same agent on `AsyncGPTAPI` against the fake server of
  `agent_overhead.py` (its own process, so its request log is not counted), 20,000 runs: the
  connection pool and the request path keep nothing per request.

    PYTHONPATH=src .venv/bin/python bench/memory_scale.py [--sessions 10000] [--runs 100000] [--http-runs 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import tracemalloc
from typing import Any

from plait.actions.calculator import Calculator
from plait.agents import Agent
from plait.agents.function_calling import AsyncFunctionCallingAgent
from plait.llms.response import ModelResponse, ToolCall
from plait.schema import AgentMessage


def rss_kib() -> int:
    """The process's resident set size now, in KiB (from /proc; ru_maxrss is only the peak)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def idle_sessions(count: int) -> None:
    """RSS per idle session against its messages' JSON size."""
    agent = Agent(None, name="bench")
    memory = agent.memory
    text = "a sentence of about sixty characters, as people type them..."
    gc.collect()
    before = rss_kib()
    for session in range(count):
        for turn in range(5):
            memory.add(AgentMessage(sender="user", content=f"{turn} {text}"), session_id=session)
            memory.add(AgentMessage(sender="bench", content=f"{turn} {text}"), session_id=session)
    gc.collect()
    grown = (rss_kib() - before) * 1024 / count
    stored = memory.get(0)
    assert stored is not None
    size = len(json.dumps(stored.save()).encode())
    print(f"| idle session, 10 messages | {grown:,.0f} B RSS | {size:,} B as JSON | {grown - size:+,.0f} B |")


class _Model:
    """Answers with a Calculator call, then with the result: no network, no parsing cost."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, messages: Any, tools: Any = None, tool_choice: Any = None, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls % 2:
            return ModelResponse("", [ToolCall(f"c{self.calls}", "Calculator", '{"expression": "37 * 91"}')])
        return ModelResponse("The answer is 3367.")


async def _runs(agent: Any, question: str, runs: int, warm_up: int, marks: set[int]) -> None:
    """RSS and traced memory while `agent` runs `runs` sessions one after another (each reset after)."""
    for session in range(warm_up):  # caches, first-use imports
        await agent(question, session_id=session)
        agent.reset(session)
    gc.collect()
    tracemalloc.start()
    base_rss, base_traced = rss_kib(), tracemalloc.get_traced_memory()[0]
    for run in range(1, runs + 1):
        await agent(question, session_id=run)
        agent.reset(run)
        if run in marks:
            gc.collect()
            traced = tracemalloc.get_traced_memory()[0] - base_traced
            print(f"| after {run:,} runs | RSS {rss_kib() - base_rss:+,} KiB | traced {traced / 1024:+,.1f} KiB |")
    tracemalloc.stop()


async def leak_check(runs: int) -> None:
    """`_runs` of the agent on an in-process model."""
    agent = AsyncFunctionCallingAgent(_Model(), [Calculator()])
    await _runs(agent, "What is 37 * 91?", runs, 1000, {runs // 10, runs // 2, runs})


async def http_leak_check(runs: int, base_url: str) -> None:
    """`_runs` with the model behind HTTP: the agent of `agent_overhead.py` on `AsyncGPTAPI`."""
    from agent_overhead import QUESTION, make_agent

    agent = make_agent(base_url)
    try:
        await _runs(agent, QUESTION, runs, 500, {runs // 4, runs // 2, runs})
    finally:
        await agent.llm.aclose()


def main() -> None:
    """The three measurements (the fake server of the last in its own process)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--http-runs", type=int, default=20_000)
    args = parser.parse_args()
    print("| measurement | RSS | messages as JSON | above the JSON |")
    print("|---|---|---|---|")
    idle_sessions(args.sessions)
    print()
    print("| leak check | RSS growth | Python allocations still held |")
    print("|---|---|---|")
    asyncio.run(leak_check(args.runs))
    if args.http_runs:
        from agent_overhead import Server

        print()
        print("| leak check over HTTP | RSS growth | Python allocations still held |")
        print("|---|---|---|")
        server = Server(latency=0.0)
        try:
            asyncio.run(http_leak_check(args.http_runs, server.base_url))
        finally:
            server.close()


if __name__ == "__main__":
    main()
