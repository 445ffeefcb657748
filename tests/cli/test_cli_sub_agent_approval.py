"""Issue 39.1: ``plait chat`` asks about a tool call inside a sub-agent run as a tool (a real subprocess, stdin piped).

The chat's agent holds ``Billing``, a sub-agent (its model: the same fake server) whose tool
``Transfer`` needs approval. The prompt names the sub-agent's call; ``y`` resumes the top-level
run, the transfer runs once, and the answer uses the sub-agent's reply.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from plait.testing.fake_openai import FakeOpenAIServer, Reply

SCRIPT = """
import sys
from approval_tools import Transfer  # needs approval
from plait.agents import FunctionCallingAgent
from plait.agents.agent_tool import AgentTool
from plait.cli import main
from plait.llms import GPTAPI


class Billing(AgentTool):
    def __init__(self) -> None:
        llm = GPTAPI("any-model", api_base=sys.argv[1], key=None)
        super().__init__(FunctionCallingAgent(llm, [Transfer()], "You pay.", name="billing"), "Billing", "Pays people.")


sys.exit(main(["chat", "--api-base", sys.argv[1], "--tools", "Billing", "--tool-choice", "auto", "--context", "off"]))
"""


def model(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    offered = [tool["function"]["name"] for tool in body.get("tools") or []]
    if messages[-1]["role"] == "tool":
        return Reply(f"{'top' if 'Billing' in offered else 'billing'} says: {messages[-1]['content']}")
    if "Billing" in offered:
        return Reply("", tool_calls=[("Billing", {"message": "pay bob 5"})])
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


def test_the_chat_asks_about_the_sub_agents_call_and_runs_it_once(tmp_path: Path) -> None:
    with FakeOpenAIServer(handler=model) as server:
        done = _chat(server, ["pay bob", "y", "/quit"], tmp_path / "count")
    assert done.returncode == 0, done.stderr
    assert "Run Transfer(to='bob', amount=5)? [y/N/reason]" in done.stdout
    assert "top says: billing says: sent 5 to bob" in done.stdout
    assert (tmp_path / "count").read_text().count("ran") == 1


def test_the_chat_refuses_the_sub_agents_call(tmp_path: Path) -> None:
    with FakeOpenAIServer(handler=model) as server:
        done = _chat(server, ["pay bob", "not bob", "/quit"], tmp_path / "count")
    assert done.returncode == 0, done.stderr
    assert "top says: billing says: A person refused this call" in done.stdout and "not bob" in done.stdout
    assert not (tmp_path / "count").exists()
