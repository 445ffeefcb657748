"""Cases/s of `plait.eval` against the agent's own runs/s: what the evaluation harness adds.

One case = one run of `agent_overhead.py` (two chat-completion calls and a Calculator call,
on the fake OpenAI-compatible server in its own process, 50 ms latency per call). At each
concurrency the same cases are answered two ways, alternating, on one agent object:

* **agent**: ``await agent(question, session_id=i)`` then ``agent.reset(i)``, `concurrency`
  workers (what a hand-written loop does, with no results kept);
* **eval**: `plait.eval.aevaluate` over the same cases into a fresh folder (the code path of
  ``plait eval`` after its start-up): each case in its own session, scored, its trajectory
  taken from memory and appended to ``results.jsonl``, ``summary.json`` written at the start
  and the end; the wall time includes all of it.

Goal: eval >= 0.9x the agent's runs/s at every concurrency. Medians of `--rounds` rounds (which of the
two goes first alternates).

Usage: ``PYTHONPATH=src python bench/eval_throughput.py [--rounds 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time

from agent_overhead import QUESTION, Server, make_agent


async def agent_rate(base_url: str, concurrency: int, n: int) -> float:
    agent = make_agent(base_url)
    ids = iter(range(n))

    async def worker() -> None:
        for i in ids:
            await agent(QUESTION, session_id=i)
            agent.reset(i)

    await agent(QUESTION, session_id="warm")
    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    rate = n / (time.perf_counter() - start)
    await agent.llm.aclose()
    return rate


async def eval_rate(base_url: str, concurrency: int, n: int) -> float:
    from plait.eval import aevaluate

    agent = make_agent(base_url)
    await agent(QUESTION, session_id="warm")
    cases = [{"id": i, "input": QUESTION, "expected": "3367"} for i in range(n)]
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        summary = await aevaluate(lambda: agent, cases, out, concurrency=concurrency)
        rate = n / (time.perf_counter() - start)
    assert summary["n"] == n and summary["errors"] == 0, summary
    await agent.llm.aclose()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="repeat each measurement; the median is reported")
    args = parser.parse_args()
    lines = [
        "| cases/s, 50 ms latency | agent's own runs | plait eval | ratio | goal |",
        "|---|---|---|---|---|",
    ]
    server = Server(latency=0.05)
    try:
        for concurrency in (1, 8, 64):
            n = max(concurrency * 6, 60)
            own: list[float] = []
            harness: list[float] = []
            for round_ in range(args.rounds):  # alternate which goes first, so warm-up and drift hit both alike
                if round_ % 2:
                    harness.append(asyncio.run(eval_rate(server.base_url, concurrency, n)))
                own.append(asyncio.run(agent_rate(server.base_url, concurrency, n)))
                if not round_ % 2:
                    harness.append(asyncio.run(eval_rate(server.base_url, concurrency, n)))
            a, e = statistics.median(own), statistics.median(harness)
            lines.append(f"| {concurrency} concurrent ({n} cases) | {a:.1f} | {e:.1f} | {e / a:.2f}x | >= 0.9x |")
    finally:
        server.close()
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
