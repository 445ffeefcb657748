"""Issue 36.1: the HTTP server streams a run's typed events as SSE (``"stream": "events"``), for any agent."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from plait.actions import BaseAction, tool_api
from plait.agents import AsyncFunctionCallingAgent, FunctionCallingAgent, StreamingFunctionCallingAgent
from plait.distributed import AgentAPIServer
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.testing.fake_openai import FakeOpenAIServer, Reply


class Transfer(BaseAction):
    """Move money."""

    def __init__(self) -> None:
        super().__init__(requires_approval=True)
        self.calls = 0

    @tool_api
    def run(self, to: str, amount: int) -> str:
        """Send money.

        Args:
            to: who gets it
            amount: how much
        """
        self.calls += 1
        return f"sent {amount} to {to}"


def model(body: dict[str, Any]) -> Reply:
    if body["messages"][-1]["role"] == "tool":
        return Reply("Done: " + body["messages"][-1]["content"])
    return Reply("", tool_calls=[("Transfer", {"to": "bob", "amount": 5})])


def post(server: AgentAPIServer, route: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.port}{route}", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        text = response.read().decode()
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields.get("event", "message"), json.loads(fields["data"])))
    return events


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(handler=model) as server:
        yield server


@pytest.mark.parametrize("kind", ["sync", "async", "streaming"])
def test_events_over_sse_with_an_approval_pause_and_resume(kind: str, fake: FakeOpenAIServer) -> None:
    llm = (AsyncGPTAPI if kind == "async" else GPTAPI)(model_type="m", api_base=fake.base_url, key="k", retry=0)
    cls = {"sync": FunctionCallingAgent, "async": AsyncFunctionCallingAgent, "streaming": StreamingFunctionCallingAgent}
    tool = Transfer()
    server = AgentAPIServer(cls[kind](llm, [tool], name="bank"), port=0).start()
    try:
        paused = post(server, "/chat_completion", {"message": ["pay bob"], "session_id": "s", "stream": "events"})
        written = [data for name, data in paused if name == "tool_call_delta"]  # the call as the model wrote it
        assert "".join(data["delta"] for data in written) == json.dumps({"to": "bob", "amount": 5})
        paused = paused[len(written) :]
        assert [name for name, _ in paused] == ["approval_needed", "final"]
        (call,) = paused[0][1]["calls"]
        assert (call["name"], call["arguments"], paused[0][1]["agent"]) == (
            "Transfer",
            {"to": "bob", "amount": 5},
            "bank",
        )
        assert paused[1][1]["paused"] is True and tool.calls == 0
        resumed = post(server, "/resume", {"decisions": {call["id"]: True}, "session_id": "s", "stream": "events"})
        names = [name for name, _ in resumed]
        assert names[:2] == ["tool_call_started", "tool_result"] and names[-1] == "final"
        assert set(names[2:-1]) == {"text_delta"}
        assert resumed[1][1] | {"id": None} == {"type": "tool_result", "agent": "bank", "id": None, "name": "Transfer",
                                                "status": "ok", "output": "sent 5 to bob"}  # fmt: skip
        text = "".join(data["delta"] for name, data in resumed if name == "text_delta")
        assert text == resumed[-1][1]["message"]["content"] == "Done: sent 5 to bob" and tool.calls == 1
    finally:
        server.stop()


def test_a_bad_stream_value_is_a_400(fake: FakeOpenAIServer) -> None:
    server = AgentAPIServer(FunctionCallingAgent(GPTAPI(model_type="m", api_base=fake.base_url, key="k")), port=0)
    server.start()
    try:
        with pytest.raises(urllib.error.HTTPError) as info:
            post(server, "/chat_completion", {"message": ["hi"], "stream": "chunks"})
        assert info.value.code == 400 and b'\\"events\\"' in info.value.read()
    finally:
        server.stop()
