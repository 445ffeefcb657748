"""Tool-calling accuracy of the embedded model under each protocol plait offers.

The same 12 arithmetic questions ("What is A * B? Use the calculator tool.") go to
SmolLM2-135M (the default embedded model, temperature 0) through:

* native function calling (`FunctionCallingAgent`: schema-constrained decoding),
* ReAct, text protocol (``Thought / Action / Action Input``),
* ReAct, JSON protocol,
* the InternLM2 plugin protocol (`AgentForInternLM`).

For each: the share of questions where the model made a valid Calculator call (the tool
ran and succeeded), and where the final answer holds the right product.

    PYTHONPATH=src .venv/bin/python bench/tool_calling.py
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from plait.actions import get_tool
from plait.agents import AgentForInternLM, FunctionCallingAgent, ReAct
from plait.hooks import Hook
from plait.llms import LlamaCppModel
from plait.schema import ActionStatusCode

QUESTIONS = 12


class ToolWatch(Hook):
    """Counts the tool calls that succeeded."""

    def __init__(self) -> None:
        self.successes = 0

    def after_action(self, executor: Any, message: Any, session_id: Any) -> None:
        if getattr(message.content, "state", None) == ActionStatusCode.SUCCESS:
            self.successes += 1


def executors_of(agent: Any) -> list[Any]:
    names = ("executor", "plugin_executor", "interpreter_executor")
    return [getattr(agent, n) for n in names if getattr(agent, n, None) is not None]


def builders(llm: Any) -> dict[str, Callable[[], Any]]:
    calculator = get_tool("Calculator")
    return {
        "native function calling (constrained)": lambda: FunctionCallingAgent(
            llm,
            [calculator],
            "You are a helpful assistant. Use the calculator tool, then answer with the result.",
            max_turn=2,
        ),
        "ReAct, text protocol": lambda: ReAct(llm, [calculator], max_turn=3),
        "ReAct, JSON protocol": lambda: ReAct(llm, [calculator], output_format="json", max_turn=3),
        "InternLM2 plugin protocol": lambda: AgentForInternLM(llm, plugins=[calculator], max_turn=3),
    }


def main() -> None:
    rng = random.Random(7)
    pairs = [(rng.randint(11, 99), rng.randint(11, 99)) for _ in range(QUESTIONS)]
    llm = LlamaCppModel(temperature=0, max_new_tokens=160)
    print("| protocol | valid tool call | right answer | seconds |")
    print("|---|---|---|---|")
    for name, build in builders(llm).items():
        valid = right = 0
        start = time.perf_counter()
        for a, b in pairs:
            agent = build()
            watch = ToolWatch()
            for executor in executors_of(agent):
                executor.register_hook(watch)
            reply = agent(f"What is {a} * {b}? Use the calculator tool.")
            valid += watch.successes > 0
            right += str(a * b) in str(reply.content)
        seconds = time.perf_counter() - start
        print(f"| {name} | {valid}/{QUESTIONS} | {right}/{QUESTIONS} | {seconds:.0f} |")


if __name__ == "__main__":
    main()
