"""Streamed reasoning arrives while it streams: `ReasoningDelta` events come before the answer's first `TextDelta`.

The model's reasoning on each server's wire (a field such as ``reasoning_content`` or
``reasoning``, or inline ``<think>`` text in the content) is streamed before the answer; the
stream items of `GPTAPI`/`AsyncGPTAPI` carry the reasoning so far, the agents put it on
their streamed chunks, and `plait.events` turns its growth into `ReasoningDelta`s. Inline
think text never shows in a streamed chunk's content.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from plait.agents.agent import AsyncStreamingAgent, StreamingAgent
from plait.agents.function_calling import AsyncStreamingFunctionCallingAgent, StreamingFunctionCallingAgent
from plait.events import ReasoningDelta, TextDelta
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.llms.base_llm import ModelStatusCode
from plait.schema import Reasoning
from plait.testing.fake_openai import FakeOpenAIServer, RawSSE

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "reasoning"
SERVERS = sorted(path.stem for path in FIXTURES.glob("*.json") if path.stem != "anthropic")


def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return {"Oslo": "sunny, 21 degrees", "Bergen": "rain, 12 degrees"}[city]


def last_turn(server: str) -> dict[str, Any]:
    """The fixture's final turn: reasoning, then the answer (no tool call)."""
    turn: dict[str, Any] = json.loads((FIXTURES / f"{server}.json").read_text())["turns"][-1]
    return turn


def model_of(server: str) -> str:
    model: str = json.loads((FIXTURES / f"{server}.json").read_text())["model"]
    return model


def events_in_order(events: list[Any], turn: dict[str, Any]) -> None:
    kinds = [type(event) for event in events]
    assert ReasoningDelta in kinds and TextDelta in kinds
    first_text = kinds.index(TextDelta)
    reasoning = [event for event in events if isinstance(event, ReasoningDelta)]
    # the reasoning streamed in more than one piece, all of it before the answer's first piece
    assert len(reasoning) > 1
    assert all(kinds.index(ReasoningDelta) < first_text for _ in reasoning)
    assert kinds[first_text - 1] is ReasoningDelta
    assert "".join(event.delta for event in reasoning) == turn["reasoning"]
    shown = "".join(event.delta for event in events if isinstance(event, TextDelta))
    assert shown == turn["answer"]
    assert "think>" not in shown


def agent_for(kind: str, llm: Any) -> Any:
    return {
        "agent": StreamingAgent,
        "fc": StreamingFunctionCallingAgent,
        "async-agent": AsyncStreamingAgent,
        "async-fc": AsyncStreamingFunctionCallingAgent,
    }[kind](llm, **({"actions": [weather]} if kind.endswith("fc") else {}))


@pytest.mark.parametrize("kind", ["agent", "fc", "async-agent", "async-fc"])
@pytest.mark.parametrize("server", SERVERS)
def test_reasoning_deltas_come_before_the_first_text_delta(server: str, kind: str) -> None:
    turn = last_turn(server)
    with FakeOpenAIServer(handler=lambda body: RawSSE(turn["sse"])) as fake:
        if kind.startswith("async"):
            llm: Any = AsyncGPTAPI(model_type=model_of(server), api_base=fake.base_url, key=None, retry=1)
            agent = agent_for(kind, llm)

            async def go() -> list[Any]:
                return [event async for event in agent.stream_events("Oslo?")]

            events = asyncio.run(go())
        else:
            llm = GPTAPI(model_type=model_of(server), api_base=fake.base_url, key=None, retry=1)
            agent = agent_for(kind, llm)
            events = list(agent.stream_events("Oslo?"))
            llm.close()
    events_in_order(events, turn)


@pytest.mark.parametrize("server", SERVERS)
def test_stream_items_carry_the_reasoning_so_far(server: str) -> None:
    """Before the END item, items carry a `Reasoning` that only grows; the text never holds it."""
    turn = last_turn(server)
    with FakeOpenAIServer(handler=lambda body: RawSSE(turn["sse"])) as fake:
        llm = GPTAPI(model_type=model_of(server), api_base=fake.base_url, key=None, retry=1)
        with llm:
            items = list(llm.stream_chat([{"role": "user", "content": "Oslo?"}]))
    growing = [extra.text for status, _, extra in items if status != ModelStatusCode.END and extra is not None]
    assert all(isinstance(extra, Reasoning) for status, _, extra in items[:-1] if extra is not None)
    assert growing and growing[-1] == turn["reasoning"]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(growing))
    first_text = next(index for index, (_, text, _) in enumerate(items) if text)
    assert items[first_text][2] == Reasoning(turn["reasoning"])  # the whole reasoning came with or before the answer
    assert first_text > 1 and items[first_text - 1][2] is not None  # and started before it
    assert all("think>" not in text and turn["reasoning"] not in text for _, text, _ in items)
    assert items[-1][0] == ModelStatusCode.END


def test_recorded_stream_replays_its_growing_reasoning(tmp_path: Path) -> None:
    """A recorded stream's reasoning-so-far items replay as `Reasoning`, so the replayed events are the same."""
    from plait.replay import record, replay

    turn = last_turn("deepseek")
    log = tmp_path / "run.jsonl"
    with FakeOpenAIServer(handler=lambda body: RawSSE(turn["sse"])) as fake:
        llm = GPTAPI(model_type=model_of("deepseek"), api_base=fake.base_url, key=None, retry=1)
        with llm:
            agent = StreamingAgent(llm)
            with record(agent, log):
                recorded = list(agent.stream_events("Oslo?"))
            agent.reset()
            with replay(agent, log):
                replayed = list(agent.stream_events("Oslo?"))
            assert len(fake.requests) == 1
    assert [type(e) for e in replayed] == [type(e) for e in recorded]
    assert [e.delta for e in replayed if isinstance(e, ReasoningDelta)] == [
        e.delta for e in recorded if isinstance(e, ReasoningDelta)
    ]
    events_in_order(replayed, turn)
