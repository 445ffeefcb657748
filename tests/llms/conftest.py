"""Fixtures for model-backend tests: fake OpenAI-compatible servers and clients in either mode."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from plait.llms import GPTAPI, AsyncGPTAPI
from plait.testing.fake_openai import FakeOpenAIServer


@pytest.fixture
def make_llm(mode: str) -> Iterator[Callable[..., GPTAPI | AsyncGPTAPI]]:
    """``make_llm(server, **kwargs)``: a `GPTAPI` (sync mode) or `AsyncGPTAPI` (async mode) for `server`.

    Defaults suit tests: no key, fast backoff, 3 attempts.
    """
    clients: list[GPTAPI] = []

    def build(server: FakeOpenAIServer, **kwargs: Any) -> GPTAPI | AsyncGPTAPI:
        kwargs.setdefault("key", None)
        kwargs.setdefault("retry", 3)
        kwargs.setdefault("backoff_base", 0.01)
        kwargs.setdefault("backoff_max", 0.05)
        kwargs.setdefault("model_type", "test-model")
        cls = AsyncGPTAPI if mode == "async" else GPTAPI
        llm = cls(api_base=server.base_url, **kwargs)
        if isinstance(llm, GPTAPI):
            clients.append(llm)
        return llm

    yield build
    for client in clients:
        client.close()
