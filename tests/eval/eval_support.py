"""What the `plait eval` tests share: the fake model's answers, the data sets, running the command."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from plait.testing.fake_openai import Reply

SRC = str(Path(__file__).resolve().parents[2] / "src")
HERE = str(Path(__file__).resolve().parent)

CAPITALS = {
    "France": "Paris",
    "Japan": "Tokyo",
    "Italy": "Rome",
    "Spain": "Madrid",
    "Egypt": "Cairo",
    "Kenya": "Nairobi",
    "Peru": "Lima",
    "Chile": "Santiago",
    "Canada": "Ottawa",
    "Norway": "Oslo",
}
WRONG = {"Canada": "Toronto", "Chile": "Valparaiso"}
"""The fake model's mistakes: these two countries get a wrong capital."""


def capital_cases(n: int = 20) -> list[dict[str, Any]]:
    """`n` cases cycling over `CAPITALS`, with ids ``c00``, ``c01``... and a metadata key."""
    countries = list(CAPITALS)
    return [
        {
            "id": f"c{i:02d}",
            "input": f"What is the capital of {countries[i % len(countries)]}? (case {i})",
            "expected": CAPITALS[countries[i % len(countries)]],
            "round": i // len(countries),
        }
        for i in range(n)
    ]


def capital_reply(body: dict[str, Any]) -> Reply:
    """The capital of the country the last message names (a wrong one for `WRONG`)."""
    text = str(body["messages"][-1]["content"])
    for country, capital in CAPITALS.items():
        if country in text:
            return Reply(WRONG.get(country, capital))
    return Reply("I do not know.")


class InFlight:
    """An async handler that answers like `capital_reply` after `delay` s, counting requests in flight."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.now = 0
        self.most = 0

    async def __call__(self, body: dict[str, Any]) -> Reply:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(self.delay)
            return capital_reply(body)
        finally:
            self.now -= 1


class Held:
    """An async handler that holds every answer (then answers like `capital_reply`) until `released`.

    It lets go by itself once more than `most` requests wait at once: a second run is asking
    too, so a test of "one run per folder" fails on its assertions instead of hanging.
    """

    def __init__(self, most: int) -> None:
        self.most = most
        self.now = 0
        self.seen = 0
        self.released = False

    async def __call__(self, body: dict[str, Any]) -> Reply:
        self.now += 1
        self.seen += 1
        try:
            while not self.released:
                if self.now > self.most:
                    self.released = True
                await asyncio.sleep(0.01)
            return capital_reply(body)
        finally:
            self.now -= 1


def arithmetic_cases() -> list[dict[str, Any]]:
    """Cases that need the calculator."""
    return [
        {"id": "mul", "input": "What is 6 * 7?", "expected": "42"},
        {"id": "add", "input": "What is 19 + 23?", "expected": "42"},
        {"id": "pow", "input": "What is 2 ** 10?", "expected": "1024"},
    ]


def tool_reply(body: dict[str, Any]) -> Reply:
    """A model that calls the calculator once, then answers with its result — in whichever protocol it is asked."""
    messages = body["messages"]
    system = " ".join(str(m.get("content")) for m in messages if m["role"] == "system")
    question = next(str(m["content"]) for m in messages if m["role"] == "user")
    expression = re.search(r"What is (.+)\?", question)
    assert expression is not None, question
    asked = any(m["role"] == "assistant" for m in messages)
    result = re.findall(r"-?\d+", str(messages[-1].get("content")))
    if body.get("tools"):  # native tool calls
        if messages[-1]["role"] == "tool":
            return Reply(f"The answer is {messages[-1]['content']}.")
        return Reply(tool_calls=[("Calculator", {"expression": expression.group(1)})])
    if "Action Input" in system:  # ReAct
        if asked:
            return Reply(f"Thought: I have it.\nFinal Answer: {result[-1]}")
        arguments = json.dumps({"expression": expression.group(1)})
        return Reply(f"Thought: I should compute.\nAction: Calculator\nAction Input: {arguments}")
    if "<|action_start|>" in system:  # InternLM2 plugin protocol
        if asked:
            return Reply(f"The answer is {result[-1]}.")
        call = json.dumps({"name": "Calculator", "parameters": {"expression": expression.group(1)}})
        return Reply(f"Let me compute.<|action_start|><|plugin|>\n{call}<|action_end|>\n")
    raise AssertionError(f"no protocol recognised in {system[:200]!r}")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def env(base_url: str) -> dict[str, str]:
    """The subprocess environment: plait and the factories importable, the fake server's URL."""
    path = os.pathsep.join([SRC, HERE, os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "EVAL_API_BASE": base_url}


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "plait.cli", *args]


def plait(base_url: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``plait ARGS`` against the fake server at `base_url`."""
    return subprocess.run(
        command(*args), capture_output=True, text=True, timeout=timeout, env=env(base_url), check=False
    )
