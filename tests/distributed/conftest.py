"""What the agent-server tests share: a model that echoes the last user message and counts the earlier ones."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from plait.testing.fake_openai import FakeOpenAIServer, Reply


def echo(body: dict[str, Any]) -> Reply:
    """``echo <last user message> after <n> earlier``: a reply that shows what history the model got."""
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return Reply(f"echo {users[-1]} after {len(users) - 1} earlier")


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    """A scripted OpenAI-compatible server answering with `echo` (test_http_serve's own streams slowly)."""
    with FakeOpenAIServer(handler=echo) as server:
        yield server
