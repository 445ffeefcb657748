"""`plait chat` / `plait run` show an answer from its typed events (issues 36.1 and 37.6)."""

from __future__ import annotations

import io
import sys

from plait.cli import main
from plait.testing.fake_openai import FakeOpenAIServer, Reply


def run_main(*args: str, stdin: str = "") -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    saved, sys.stderr = sys.stderr, err
    try:
        status = main(list(args), stdin=io.StringIO(stdin), stdout=out)
    finally:
        sys.stderr = saved
    return status, out.getvalue()


def test_reasoning_is_one_line_until_think_on_then_shown_after_the_answer() -> None:
    with FakeOpenAIServer(handler=lambda body: Reply("<think>six times seven</think>42")) as server:
        lines = ["what is 6*7?", "/think on", "and again?", "/think", "/think off", "once more?"]
        status, out = run_main("chat", "--api-base", server.base_url, "--tools", "", stdin="\n".join(lines) + "\n")
    assert status == 0
    shown = [line.removeprefix("> ") for line in out.splitlines()]
    assert shown[1:9] == [
        "42",
        "(the model reasoned for 3 words: /think on shows it)",
        "(reasoning shown after each answer)",
        "42",
        "thinking: six times seven",
        "/think on: say /think on or /think off",
        "(reasoning hidden)",
        "42",
    ]
    assert "<think>" not in out


def test_tool_lines_come_from_the_events_once_each() -> None:
    def model(body: dict[str, object]) -> Reply:
        messages = body["messages"]
        assert isinstance(messages, list)
        if messages[-1]["role"] == "tool":
            return Reply(f"It is {messages[-1]['content']}.")
        return Reply("", tool_calls=[("Calculator", {"expression": "6*7"})])

    with FakeOpenAIServer(handler=model) as server:
        status, out = run_main("run", "--api-base", server.base_url, "--tools", "Calculator", "6*7?")
    assert status == 0
    assert out.splitlines() == ["[tool call] Calculator {'expression': '6*7'}", "[tool result] 42", "It is 42."]


def test_tools_command_on_an_agent_without_tools() -> None:
    from plait.agents import Agent
    from plait.repl import _command
    from plait.testing import ScriptedLLM

    assert _command(Agent(ScriptedLLM([])), "/tools") == "(no tools)"  # a user's --agent may hold none
