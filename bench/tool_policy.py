"""When does the CLI's default agent call its tool? Candidate system prompts and tool-choice policies.

Twenty questions to the default embedded model (SmolLM2-135M, temperature 0) through the
agent ``plait run`` builds (`StreamingFunctionCallingAgent` with the Calculator): ten need
arithmetic, ten do not (greetings, small talk, general knowledge). For each candidate:

* *arithmetic*: the Calculator ran and the answer holds the right number;
* *no tool*: a question that needs none was answered without calling the tool;

    PYTHONPATH=src .venv/bin/python bench/tool_policy.py
"""

from __future__ import annotations

import sys
import time
from typing import Any

from plait.actions import get_tool
from plait.agents.routing import ToolRouter
from plait.cli import build_agent
from plait.hooks import ToolLog
from plait.interceptors import register_interceptor
from plait.llms import LlamaCppModel

ARITHMETIC = [
    ("What is 1234 + 5678?", "6912"),
    ("What is 37 * 91?", "3367"),
    ("Compute 144 / 12.", "12"),
    ("How much is 999 - 456?", "543"),
    ("What is 17 times 23?", "391"),
    ("Calculate 2 ** 10.", "1024"),
    ("What is 58 + 77?", "135"),
    ("Multiply 123 by 4.", "492"),
    ("What is 1000 - 1?", "999"),
    ("What is 81 / 9?", "9"),
]
SMALL_TALK = [
    "hi",
    "Hello, how are you?",
    "Tell me a joke.",
    "What is the capital of France?",
    "Thank you!",
    "Who wrote Romeo and Juliet?",
    "What colour is the sky?",
    "Good morning!",
    "What is your name?",
    "Say something nice.",
]

CURRENT = (
    "You are a helpful assistant. When a question needs exact computation or outside information, "
    "call one of your tools, then answer the user briefly using the tool's result."
)
CANDIDATES: dict[str, tuple[str, Any]] = {
    "current prompt, tool_choice auto": (CURRENT, "auto"),
    "arithmetic-only prompt, auto": (
        "You are a helpful assistant. Use the calculator only for arithmetic with numbers in the question; "
        "answer greetings and other questions directly.",
        "auto",
    ),
    "no system prompt, auto": ("", "auto"),
    "current prompt, routed (plait.agents.routing.ToolRouter; every app's default)": (CURRENT, "routed"),
    "current prompt, routed, then tool_choice none after the tool": (CURRENT, "routed:none"),
    "current prompt, routed, tool forced until the last round": (CURRENT, "routed:None"),
}


def ask(llm: Any, system: str, tool_choice: Any, question: str) -> tuple[str, list[Any]]:
    """The answer to `question` and the tool calls made (by the agent ``plait run`` builds: max_turn 3)."""
    agent = build_agent(llm, [get_tool("Calculator")], system, max_turn=3)
    if tool_choice.startswith("routed:"):  # another reset_tool_choice than the CLI's
        tool_choice, reset = tool_choice.split(":")
        agent.reset_tool_choice = None if reset == "None" else reset
    log = ToolLog()
    register_interceptor(agent, log)
    choice = ToolRouter()(question, ["Calculator"]) if tool_choice == "routed" else tool_choice
    reply = list(agent(question, tool_choice=choice))[-1]
    return str(reply.content), log.take(0)


def run(system: str, tool_choice: Any, llm: Any) -> tuple[int, int, float]:
    arithmetic = plain = 0
    start = time.perf_counter()
    for question, answer in ARITHMETIC:
        text, calls = ask(llm, system, tool_choice, question)
        arithmetic += any(c["ok"] for c in calls) and answer in text
    for question in SMALL_TALK:
        plain += not ask(llm, system, tool_choice, question)[1]
    return arithmetic, plain, time.perf_counter() - start


def main() -> None:
    llm = LlamaCppModel(temperature=0, max_new_tokens=96)
    print("| candidate | arithmetic: tool + right answer | no tool for small talk | seconds |")
    print("|---|---|---|---|")
    for name, (system, choice) in CANDIDATES.items():
        if len(sys.argv) > 1 and sys.argv[1] not in name:
            continue
        arithmetic, plain, seconds = run(system, choice, llm)
        print(f"| {name} | {arithmetic}/{len(ARITHMETIC)} | {plain}/{len(SMALL_TALK)} | {seconds:.0f} |", flush=True)


if __name__ == "__main__":
    main()
