"""Issue 18: ``plait chat`` asks before a tool that needs approval runs (a real subprocess, stdin piped)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from plait.testing.fake_openai import FakeOpenAIServer, Reply

SCRIPT = """
import sys
import approval_tools  # registers Transfer, a tool that needs approval
from plait.cli import main

sys.exit(main(["chat", "--api-base", sys.argv[1], "--tools", "Transfer", "--tool-choice", "auto", "--context", "off"]))
"""


def model(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return Reply(f"result: {messages[-1]['content']}")
    return Reply("", tool_calls=[("Transfer", {"to": "bob", "amount": 5})])


def _chat(server: FakeOpenAIServer, lines: list[str], count: Path) -> subprocess.CompletedProcess[str]:
    tests = str(Path(__file__).resolve().parents[1])  # where approval_tools lives
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, server.base_url],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**env, "APPROVAL_COUNT_FILE": str(count)},
    )


def _runs(count: Path) -> int:
    return count.read_text().count("ran") if count.exists() else 0


def test_the_chat_asks_and_runs_the_call_once_approved(tmp_path: Path) -> None:
    with FakeOpenAIServer(handler=model) as server:
        done = _chat(server, ["pay bob", "y", "/quit"], tmp_path / "count")
    assert done.returncode == 0, done.stderr
    assert "Run Transfer(to='bob', amount=5)? [y/N/reason]" in done.stdout
    assert "result: sent 5 to bob" in done.stdout and _runs(tmp_path / "count") == 1


def test_the_chat_passes_a_refusal_reason_to_the_model_and_the_tool_never_runs(tmp_path: Path) -> None:
    with FakeOpenAIServer(handler=model) as server:
        done = _chat(server, ["pay bob", "bob is not a payee", "pay bob", "", "/quit"], tmp_path / "count")
        tool_messages = [m["content"] for body in server.requests for m in body["messages"] if m["role"] == "tool"]
    assert done.returncode == 0, done.stderr
    assert _runs(tmp_path / "count") == 0
    assert any("bob is not a payee" in str(content) for content in tool_messages)
    assert any("A person refused this call" in str(content) for content in tool_messages)
