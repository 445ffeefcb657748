"""Issue 18: ``plait chat`` asks before a tool that needs approval runs (a real subprocess, stdin piped)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from plait.testing.fake_openai import FakeOpenAIServer, Reply

SCRIPT = """
import sys
from plait.actions import BaseAction, tool_api
from plait.cli import main

class Transfer(BaseAction):
    @tool_api(requires_approval=True)
    def run(self, to: str, amount: int) -> str:
        '''Send money.

        Args:
            to (str): who gets it
            amount (int): how much
        '''
        print("TRANSFER RAN", file=sys.stderr)
        return f"sent {amount} to {to}"

sys.exit(main(["chat", "--api-base", sys.argv[1], "--tools", "Transfer", "--tool-choice", "auto", "--context", "off"]))
"""


def model(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return Reply(f"result: {messages[-1]['content']}")
    return Reply("", tool_calls=[("Transfer", {"to": "bob", "amount": 5})])


def _chat(server: FakeOpenAIServer, lines: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, server.base_url],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_chat_asks_and_runs_the_call_once_approved() -> None:
    with FakeOpenAIServer(handler=model) as server:
        done = _chat(server, ["pay bob", "y", "/quit"])
    assert done.returncode == 0, done.stderr
    assert "Run Transfer(to='bob', amount=5)? [y/N/reason]" in done.stdout
    assert "result: sent 5 to bob" in done.stdout and done.stderr.count("TRANSFER RAN") == 1


def test_the_chat_passes_a_refusal_reason_to_the_model_and_the_tool_never_runs() -> None:
    with FakeOpenAIServer(handler=model) as server:
        done = _chat(server, ["pay bob", "bob is not a payee", "pay bob", "", "/quit"])
        tool_messages = [m["content"] for body in server.requests for m in body["messages"] if m["role"] == "tool"]
    assert done.returncode == 0, done.stderr
    assert "TRANSFER RAN" not in done.stderr
    assert any("bob is not a payee" in str(content) for content in tool_messages)
    assert any("A person refused this call" in str(content) for content in tool_messages)
