"""Issue 37.6: the served agent's reasoning reaches OpenAI clients as ``reasoning_content``, never in ``content``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from plait.agents import AsyncStreamingAgent, StreamingAgent
from plait.distributed import AgentAPIServer
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.testing.fake_openai import FakeOpenAIServer, Reply

openai = pytest.importorskip("openai")


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(handler=lambda body: Reply("<think>Six sevens.</think>It is 42.")) as server:
        yield server


def served(mode: str, model: FakeOpenAIServer) -> AgentAPIServer:
    llm = (AsyncGPTAPI if mode == "async" else GPTAPI)(model_type="m", api_base=model.base_url, key="k", retry=0)
    agent = (AsyncStreamingAgent if mode == "async" else StreamingAgent)(llm)
    return AgentAPIServer(agent, port=0).start()


def ask(server: AgentAPIServer, stream: bool) -> tuple[str, str]:
    """``(content, reasoning_content)`` of one request with the official async client (streamed or whole)."""

    async def go() -> tuple[str, str]:
        async with openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0) as client:
            messages: Any = [{"role": "user", "content": "6*7?"}]
            if not stream:
                reply = await client.chat.completions.create(model="m", messages=messages)
                message = reply.choices[0].message
                return message.content or "", (message.model_extra or {}).get("reasoning_content", "")
            content, reasoning = "", ""
            async for chunk in await client.chat.completions.create(model="m", messages=messages, stream=True):
                if chunk.choices:
                    delta = chunk.choices[0].delta
                    content += delta.content or ""
                    reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
            return content, reasoning

    return asyncio.run(go())


@pytest.mark.parametrize("stream", [False, True])
def test_reasoning_is_reasoning_content(mode: str, model: FakeOpenAIServer, stream: bool) -> None:
    server = served(mode, model)
    try:
        assert ask(server, stream) == ("It is 42.", "Six sevens.")
    finally:
        server.stop()
