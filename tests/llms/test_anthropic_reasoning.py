"""Claude's extended thinking in a tool loop: signed thinking blocks read, kept, and sent back unchanged.

The fixture (tests/fixtures/reasoning/anthropic.json, from Anthropic's extended-thinking docs)
holds a three-turn tool loop as JSON bodies and SSE transcripts (``thinking_delta`` and
``signature_delta`` events). The fake Messages API is as strict as the real one: a tool-call
turn sent back without its thinking block, signature unchanged, first in its content, is
refused with HTTP 400. The loop runs through the real anthropic SDK in four modes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic")

from plait.agents.function_calling import (
    AsyncFunctionCallingAgent,
    AsyncStreamingFunctionCallingAgent,
    FunctionCallingAgent,
    StreamingFunctionCallingAgent,
)
from plait.llms.anthropic_llm import AsyncClaudeAPI, ClaudeAPI
from plait.schema import Reasoning
from plait.testing.fake_http import Canned, FakeHTTPServer, RecordedRequest

FIXTURE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "reasoning" / "anthropic.json").read_text())
THINKING = {"type": "enabled", "budget_tokens": 2048}


def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return {"Oslo": "sunny, 21 degrees", "Bergen": "rain, 12 degrees"}[city]


def _refusal(message: str) -> Canned:
    return Canned.json({"type": "error", "error": {"type": "invalid_request_error", "message": message}}, 400)


def _responder() -> Any:
    turns = iter(FIXTURE["turns"])
    signatures = {turn["json"]["content"][-1].get("id"): turn for turn in FIXTURE["turns"]}

    def respond(request: RecordedRequest) -> Canned:
        body = request.json()
        assert isinstance(body, dict)
        for index, message in enumerate(body["messages"]):
            content = message["content"]
            if message["role"] != "assistant" or not isinstance(content, list):
                continue
            uses = [block for block in content if block["type"] == "tool_use"]
            if not uses:
                continue
            turn = signatures[uses[0]["id"]]
            expected = {"type": "thinking", "thinking": turn["reasoning"], "signature": turn["signature"]}
            if content[0] != expected:
                return _refusal(
                    f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                    f"`{content[0]['type']}`. When `thinking` is enabled, a final `assistant` message must start "
                    "with a thinking block"
                )
        turn = next(turns)
        if body.get("stream"):
            return Canned.text(turn["sse"], content_type="text/event-stream")
        return Canned.json(turn["json"])

    return respond


def _run(mode: str, server: FakeHTTPServer) -> tuple[Any, Any]:
    streaming = mode in ("stream", "astream")
    if mode in ("sync", "stream"):
        llm: Any = ClaudeAPI(FIXTURE["model"], key="sk-test", base_url=server.base_url, retry=1, thinking=THINKING)
        agent: Any = (StreamingFunctionCallingAgent if streaming else FunctionCallingAgent)(
            llm, [weather], "Use tools."
        )
        result = list(agent("Oslo or Bergen?")) if streaming else agent("Oslo or Bergen?")
        return agent, result
    llm = AsyncClaudeAPI(FIXTURE["model"], key="sk-test", base_url=server.base_url, retry=1, thinking=THINKING)
    agent = (AsyncStreamingFunctionCallingAgent if streaming else AsyncFunctionCallingAgent)(
        llm, [weather], "Use tools."
    )

    async def go() -> Any:
        if streaming:
            return [chunk async for chunk in agent("Oslo or Bergen?")]
        return await agent("Oslo or Bergen?")

    return agent, asyncio.run(go())


@pytest.mark.parametrize("mode", ["sync", "async", "stream", "astream"])
def test_claude_tool_loop_sends_signed_thinking_back_unchanged(mode: str) -> None:
    server = FakeHTTPServer().start()
    try:
        server.route("POST", "/v1/messages", _responder())
        agent, result = _run(mode, server)
        bodies = [r.body for r in server.requests_to("/v1/messages")]
    finally:
        server.stop()
    turns = FIXTURE["turns"]
    reply = result[-1] if isinstance(result, list) else result
    assert reply.content == turns[2]["answer"]
    assert reply.reasoning == Reasoning(turns[2]["reasoning"], turns[2]["signature"])
    assert len(bodies) == 3
    for index, body in enumerate(bodies):
        sent = json.loads(body)
        assert sent["thinking"] == THINKING
        for turn in turns[:index]:  # each earlier tool-call turn's signed block, once, and never as text
            assert body.count(turn["signature"].encode()) == 1
            assert all(
                turn["reasoning"] not in json.dumps(block)
                for message in sent["messages"]
                for block in (message["content"] if isinstance(message["content"], list) else [message["content"]])
                if not (isinstance(block, dict) and block.get("type") == "thinking")
            )
    kept = [m["reasoning"] for m in agent.state_dict()["memory"] if m.get("reasoning")]
    assert [(r["text"], r["signature"]) for r in kept] == [(t["reasoning"], t["signature"]) for t in turns]
