"""CPU per run of a function-calling agent with one tool call, on a scripted model (no I/O).

What the tool loop's per-call checks cost (issue 33: one id per call; issue 34: repeated
calls answered from the run's results): run it against two checkouts and compare the
minimum of several runs (bench/README.md, "Tool loop per-call checks")::

    PYTHONPATH=src .venv/bin/python bench/tool_loop_overhead.py
"""

from __future__ import annotations

import time

from plait.actions import BaseAction, tool_api
from plait.agents import FunctionCallingAgent
from plait.llms.response import ModelResponse, ToolCall
from plait.testing import ScriptedLLM

RUNS = 2000


class Inventory(BaseAction):
    """What the shop has."""

    @tool_api
    def stock(self, item: str) -> str:
        """How many of an item are in stock.

        Args:
            item (str): the item
        """
        return "12"


def main() -> None:
    call = ModelResponse(tool_calls=[ToolCall("c0", "Inventory.stock", '{"item": "apples"}')])
    agent = FunctionCallingAgent(ScriptedLLM([call, "ok"] * (RUNS + 50)), [Inventory()])
    for session in range(50):  # warm up
        agent("How many apples?", session_id=session)
    start = time.process_time()
    for session in range(100, RUNS + 100):
        agent("How many apples?", session_id=session)
    print(f"{(time.process_time() - start) / RUNS * 1e6:.1f} us CPU per run (1 tool call)")


if __name__ == "__main__":
    main()
