"""Shared fixtures: every behaviour test runs in sync and async mode from one body."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from plait.testing.fake_openai import FakeOpenAIServer

# Tests never reach beyond 127.0.0.1: make sure no real key leaks into a test run.
for _var in (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "ANTHROPIC_API_KEY",
    "SERPER_API_KEY",
    "BING_MAP_KEY",
):
    os.environ.pop(_var, None)


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    """The mode a test body runs in; build components with `_support.make(mode, ...)`."""
    return str(request.param)


@pytest.fixture
def fake_server() -> Iterator[Callable[..., FakeOpenAIServer]]:
    """``fake_server(script=None, **options)``: a started `FakeOpenAIServer`, stopped after the test."""
    servers: list[FakeOpenAIServer] = []

    def start(script: Any = None, **options: Any) -> FakeOpenAIServer:
        server = FakeOpenAIServer(script, **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
