"""Reasoning on each server's real wire format: a three-turn tool loop with thinking on, per fixture.

The fixtures (tests/fixtures/reasoning/*.json, written from each server's documentation:
see their ``source``) hold the three replies of a tool loop, as a JSON body and as an SSE
transcript. `FakeOpenAIServer` serves them to `FunctionCallingAgent` in four modes (sync,
async, streamed, async streamed). What is asserted is what went on the wire: the requests
after a tool call carry the reasoning exactly when the model's profile sends it back, in the
profile's field and never in ``content``; the agent's answer never holds reasoning, and the
reasoning is kept on the agent's messages. OpenRouter's fixtures (its profile is chosen by its
URL; here the fixture names it) send each tool-call turn's ``reasoning_details`` back byte for
byte as the server gave them, whether they came whole or as streamed fragments.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from plait.agents.function_calling import (
    AsyncFunctionCallingAgent,
    AsyncStreamingFunctionCallingAgent,
    FunctionCallingAgent,
    StreamingFunctionCallingAgent,
)
from plait.exceptions import LLMAPIError
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.llms.profiles import PROFILES, ModelProfile, profile_for
from plait.schema import AgentStatusCode, Reasoning
from plait.testing.fake_openai import FakeOpenAIServer, HTTPFault, RawSSE

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "reasoning"
SERVERS = sorted(path.stem for path in FIXTURES.glob("*.json") if path.stem != "anthropic")  # Claude: own test


def profile_of(fixture: dict[str, Any]) -> ModelProfile:
    """The profile the fixture's server gets: the one it names (OpenRouter's), else the model's."""
    return PROFILES[fixture["profile"]] if "profile" in fixture else profile_for(fixture["model"])


def replayed_field(fixture: dict[str, Any]) -> str | None:
    """The field the profile sends reasoning back in (None: its profile drops it)."""
    profile = profile_of(fixture)
    return profile.reasoning_field if profile.reasoning_replay == "field" else None


def compact(value: object) -> bytes:
    """`value` as plait's request bodies write it (compact UTF-8 JSON, orjson's form)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


DEEPSEEK_400 = {
    "error": {
        "message": "The reasoning_content in the thinking mode must be passed back to the API.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request_error",
    }
}
"""DeepSeek's answer to a thinking-mode tool loop whose tool-call turns lack their reasoning_content."""

MODES = ("sync", "async", "stream", "astream")


def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return {"Oslo": "sunny, 21 degrees", "Bergen": "rain, 12 degrees"}[city]


def load(server: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{server}.json").read_text())
    return data


def handler_for(fixture: dict[str, Any]) -> Any:
    """Answers the n-th request with the n-th turn (JSON or SSE as asked); DeepSeek checks the history first."""
    turns = iter(fixture["turns"])

    def handle(body: dict[str, Any]) -> Any:
        if fixture["server"] == "deepseek":
            for message in body["messages"]:
                if message.get("tool_calls") and "reasoning_content" not in message:
                    return HTTPFault(400, DEEPSEEK_400)
        turn = next(turns)
        return RawSSE(turn["sse"]) if body.get("stream") else turn["json"]

    return handle


def run_loop(mode: str, llm_kwargs: dict[str, Any], question: str) -> tuple[Any, Any]:
    streaming = mode in ("stream", "astream")
    if mode in ("sync", "stream"):
        llm: Any = GPTAPI(key=None, retry=1, **llm_kwargs)
        agent: Any = (StreamingFunctionCallingAgent if streaming else FunctionCallingAgent)(
            llm, [weather], "Use tools."
        )
        if streaming:
            chunks = list(agent(question))
            llm.close()
            return agent, chunks
        reply = agent(question)
        llm.close()
        return agent, reply
    llm = AsyncGPTAPI(key=None, retry=1, **llm_kwargs)
    agent = (AsyncStreamingFunctionCallingAgent if streaming else AsyncFunctionCallingAgent)(
        llm, [weather], "Use tools."
    )

    async def go() -> Any:
        if streaming:
            return [chunk async for chunk in agent(question)]
        return await agent(question)

    return agent, asyncio.run(go())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("server", SERVERS)
def test_three_turn_tool_loop_with_thinking(server: str, mode: str) -> None:
    fixture = load(server)
    turns = fixture["turns"]
    with FakeOpenAIServer(handler=handler_for(fixture)) as fake:
        kwargs = {"model_type": fixture["model"], "api_base": fake.base_url, "profile": profile_of(fixture)}
        agent, result = run_loop(mode, kwargs, "Oslo or Bergen?")
        assert not fake.errors
        bodies = list(fake.bodies)
    reply = result[-1] if isinstance(result, list) else result
    if isinstance(result, list):  # streamed: no chunk ever shows reasoning or a think tag
        for chunk in result:
            text = chunk.content if isinstance(chunk.content, str) else ""
            assert "<think>" not in text and "</think>" not in text
            assert all(turn["reasoning"] not in text for turn in turns)
        assert result[-1].stream_state == AgentStatusCode.END
    details = [turn["json"]["choices"][0]["message"].get("reasoning_details") for turn in turns]
    assert reply.content == turns[2]["answer"]
    assert reply.reasoning is not None and reply.reasoning.text == turns[2]["reasoning"]
    assert reply.reasoning == Reasoning(turns[2]["reasoning"], details=reply.reasoning.details)
    assert (json.loads(reply.reasoning.details) if reply.reasoning.details else None) == details[2]
    assert len(bodies) == 3
    field = replayed_field(fixture)
    assert (field is not None) == (server == "deepseek" or server.startswith("openrouter"))  # who needs it back
    for index, body in enumerate(bodies):
        sent = json.loads(body)
        earlier = [turn["reasoning"] for turn in turns[:index]]
        assistant = [m for m in sent["messages"] if m["role"] == "assistant"]
        assert len(assistant) == index
        for message, reasoning in zip(assistant, earlier, strict=True):
            assert reasoning not in (message.get("content") or "")
            assert "reasoning" not in message  # plait's own key never reaches a server
            if field is None:
                assert not set(message) & {"reasoning_content", "thinking", "reasoning_details"}
            elif field == "reasoning_details":  # OpenRouter: the items, unchanged, and nothing else
                assert not set(message) & {"reasoning_content", "thinking"}
            else:
                assert message[field] == reasoning
        # the bytes: each earlier reasoning appears once per request when replayed, else never
        for reasoning in earlier:
            assert body.count(json.dumps(reasoning, ensure_ascii=False)[1:-1].encode()) == (1 if field else 0)
        for items in details[:index] if field == "reasoning_details" else ():  # byte for byte as the server sent
            assert body.count(b'"reasoning_details":' + compact(items)) == 1
    memory = agent.state_dict()["memory"]
    kept = [m["reasoning"]["text"] for m in memory if m.get("reasoning")]
    assert kept == [turn["reasoning"] for turn in turns]
    assert all(turn["reasoning"] not in json.dumps([m["content"] for m in memory]) for turn in turns)


@pytest.mark.parametrize("mode", MODES)
def test_deepseek_without_replay_gets_the_documented_400(mode: str) -> None:
    """The fixture's server is as strict as DeepSeek's: the loop with replay turned off fails on its second request.

    So the fixture tests something: without reasoning_content on the tool-call turn the request is refused.
    """
    fixture = load("deepseek")
    with FakeOpenAIServer(handler=handler_for(fixture)) as fake:
        kwargs = {"model_type": fixture["model"], "api_base": fake.base_url, "reasoning_replay": "drop"}
        with pytest.raises(LLMAPIError, match="reasoning_content in the thinking mode must be passed back"):
            run_loop(mode, kwargs, "Oslo?")
        assert len(fake.requests) == 2
        assert "reasoning_content" not in json.dumps(fake.requests[1]["messages"])
