"""``--session FILE`` does what it says (issue 36, item 5): checked first, loading announced, cleared by /reset.

Before, a session in a missing directory printed the answer and then a traceback (exit 1),
a file was continued without a word, and ``/reset`` left the file as it was, so the next
run continued the "forgotten" conversation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import plait

from plait.testing.fake_openai import FakeOpenAIServer, Reply


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(handler=lambda body: Reply(f"You said: {body['messages'][-1]['content']}")) as fake:
        yield fake


def _users(server: FakeOpenAIServer) -> list[str]:
    return [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]


@pytest.mark.parametrize("command", ["run", "chat"])
def test_missing_directory_fails_before_the_run(server: FakeOpenAIServer, tmp_path: Path, command: str) -> None:
    session = tmp_path / "no" / "such" / "dir" / "x.json"
    args = ("hi",) if command == "run" else ()
    result = plait(command, "--api-base", server.base_url, "--session", str(session), *args, stdin="hi\n/quit\n")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"plait: error: --session {session}: the directory {str(session.parent)!r} does not exist"
    ]
    assert server.requests == [] and "Traceback" not in result.stderr


def test_a_file_that_is_not_a_conversation_fails_before_the_run(server: FakeOpenAIServer, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    result = plait("run", "--api-base", server.base_url, "--session", str(broken), "hi")
    assert result.returncode == 2
    assert result.stderr.startswith(f"plait: error: --session {broken}: not a saved conversation (bad JSON")
    assert len(result.stderr.strip().splitlines()) == 1 and server.requests == []
    folder = plait("run", "--api-base", server.base_url, "--session", str(tmp_path), "hi")
    assert folder.returncode == 2 and "is a directory" in folder.stderr
    beside_a_file = plait("run", "--api-base", server.base_url, "--session", str(broken / "x.json"), "hi")
    assert beside_a_file.returncode == 2 and "does not exist" in beside_a_file.stderr


def test_loading_says_how_many_messages(server: FakeOpenAIServer, tmp_path: Path) -> None:
    session = tmp_path / "s.json"
    first = plait("run", "--api-base", server.base_url, "--session", str(session), "one")
    assert first.returncode == 0 and "continuing" not in first.stderr  # nothing to continue yet
    second = plait("run", "--api-base", server.base_url, "--session", str(session), "two")
    assert second.returncode == 0, second.stderr
    assert f"plait: continuing 2 messages from {session}" in second.stderr
    assert "continuing" not in second.stdout and _users(server) == ["one", "two"]


def test_reset_in_chat_clears_the_file(server: FakeOpenAIServer, tmp_path: Path) -> None:
    session = tmp_path / "chat.json"
    assert plait("run", "--api-base", server.base_url, "--session", str(session), "remember me").returncode == 0
    result = plait("chat", "--api-base", server.base_url, "--session", str(session), stdin="/reset\n/quit\n")
    assert result.returncode == 0, result.stderr
    assert f"continuing 2 messages from {session}" in result.stderr
    assert f"(conversation cleared, and {session})" in result.stdout
    assert json.loads(session.read_text())["state"]["memory"] == []
    again = plait("run", "--api-base", server.base_url, "--session", str(session), "who am I?")
    assert again.returncode == 0 and _users(server) == ["who am I?"]  # the forgotten turn stays forgotten
