"""Issue 38 item 3: ``plait chat --mcp`` asks the person an MCP server's question (elicitation) and goes on.

A real subprocess with stdin piped; the server is tests/actions/mcp/asking_server.py (official SDK, stdio),
whose ``book`` tool asks how many guests come and writes one line per call that ran.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from plait.testing.fake_openai import FakeOpenAIServer, Reply

pytest.importorskip("mcp.server.mcpserver", reason="the MCP tests need the official MCP SDK (test extra)")

ASKING = Path(__file__).resolve().parents[1] / "actions" / "mcp" / "asking_server.py"
SCRIPT = """
import sys
from plait.cli import main

sys.exit(main(["chat", "--api-base", sys.argv[1], "--mcp", sys.argv[2], "--tool-choice", "auto", "--context", "off"]))
"""


def model(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return Reply(f"result: {messages[-1]['content']}")
    return Reply("", tool_calls=[("asking_server.book", {"table": "7"})])


def _chat(server: FakeOpenAIServer, lines: list[str], bookings: Path) -> subprocess.CompletedProcess[str]:
    spec = shlex.join(["env", f"BOOKINGS={bookings}", sys.executable, str(ASKING)])
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, server.base_url, spec],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("lines", "outcome"),
    [
        (["y", "x", "4", "y"], 'accept {"guests":4,"vegetarian":true}'),  # "x" is not an integer: asked again
        (["y", "2", ""], 'accept {"guests":2,"vegetarian":false}'),  # the optional field left out
        ([""], "decline"),
        (["c"], "cancel"),
    ],
)
def test_the_chat_puts_the_servers_question_to_the_person(tmp_path: Path, lines: list[str], outcome: str) -> None:
    bookings = tmp_path / "bookings.txt"
    with FakeOpenAIServer(handler=model) as server:
        done = _chat(server, ["book table 7", *lines, "/quit"], bookings)
    assert done.returncode == 0, done.stderr
    assert "asking-server asks, while asking_server.book(table='7') runs: How many guests at table 7?" in done.stdout
    assert f"result: {outcome}" in done.stdout
    assert bookings.read_text().splitlines() == [f"7: {outcome}"]  # the call ran exactly once
