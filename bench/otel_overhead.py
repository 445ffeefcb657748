"""What OpenTelemetry tracing (`plait.tracing.instrument`) adds to an agent run, and what it costs when off.

One run = a sync `FunctionCallingAgent` on a scripted model: 2 model calls and 1 tool call
(no network: the framework's own cost). Measured: not instrumented; instrumented with the
OpenTelemetry API alone (no SDK configured: non-recording spans); instrumented with the SDK
and an in-memory exporter (every span recorded), with and without ``record_content``.
Medians of 5 blocks of 2,000 runs.

``--only-off`` measures the first row only, without importing `plait.tracing`: run it with
``PYTHONPATH`` on an older checkout to compare the cost of the off path before the change.

    PYTHONPATH=src .venv/bin/python bench/otel_overhead.py
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from plait.actions import BaseAction, tool_api
from plait.agents.function_calling import FunctionCallingAgent
from plait.llms.response import ModelResponse, ToolCall
from plait.testing import FunctionLLM

BLOCKS = 5
RUNS = 2000


class Doubler(BaseAction):
    """Doubles numbers."""

    @tool_api
    def run(self, x: int) -> int:
        """Double it.

        Args:
            x: The number.
        """
        return 2 * x


def reply(messages: Any, params: Any) -> ModelResponse | str:
    if messages[-1]["role"] == "tool":
        return "It is 42."
    return ModelResponse(tool_calls=[ToolCall("c1", "Doubler", '{"x": 21}')], finish_reason="tool_calls")


def per_run_us(agent: Any) -> float:
    """Median microseconds per run over `BLOCKS` blocks (each run a fresh session, reset after)."""
    medians = []
    for _ in range(BLOCKS):
        start = time.perf_counter()
        for i in range(RUNS):
            agent("Double 21.", session_id=i)
        medians.append((time.perf_counter() - start) / RUNS * 1e6)
        agent.reset()
    return statistics.median(medians)


def measure(setup: Callable[[], Callable[[], None]] | None) -> float:
    agent = FunctionCallingAgent(FunctionLLM(reply), [Doubler()], "Use tools.", name="calc")
    per_run_us(agent)  # warm up
    stop = setup() if setup is not None else None
    try:
        return per_run_us(agent)
    finally:
        if stop is not None:
            stop()


def sdk(record_content: bool) -> Callable[[], Callable[[], None]]:
    def setup() -> Callable[[], None]:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from plait.tracing import instrument, uninstrument

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        instrument(provider, record_content=record_content)

        def stop() -> None:
            uninstrument()
            spans = len(exporter.get_finished_spans())
            assert spans == 4 * BLOCKS * RUNS, spans  # agent, chat, tool, chat per run
            provider.shutdown()

        return stop

    return setup


def api_only() -> Callable[[], None]:
    from plait.tracing import instrument, uninstrument

    instrument()  # no SDK configured: the API's non-recording spans
    return uninstrument


def main() -> None:
    off = measure(None)
    print("| configuration | us per run | vs off |")
    print("|---|---|---|")
    print(f"| not instrumented | {off:.1f} | 1.00x |")
    if "--only-off" in sys.argv:
        return
    for label, setup in (
        ("instrument(), API only (non-recording spans)", api_only),
        ("instrument(SDK provider), in-memory exporter", sdk(False)),
        ("instrument(SDK provider, record_content=True)", sdk(True)),
    ):
        value = measure(setup)
        print(f"| {label} | {value:.1f} | {value / off:.2f}x |")


if __name__ == "__main__":
    main()
