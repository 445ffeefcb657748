"""`POST /v1/responses` (issue 38, item 1): a served agent answers clients of OpenAI's Responses API, the
official openai client's `responses.create`, text and function tools, whole and streamed as the API's events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from plait.actions import Calculator
from plait.agents import AsyncFunctionCallingAgent, FunctionCallingAgent
from plait.distributed import AgentAPIServer
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.testing.fake_openai import FakeOpenAIServer, Reply

openai = pytest.importorskip("openai")

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def model_reply(body: dict[str, Any]) -> Reply:
    """Calls get_weather once when asked about the weather, then answers with the results and the system text."""
    messages = body["messages"]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    question = [m["content"] for m in messages if m["role"] == "user"][-1]
    if "weather" in question and not results and body.get("tools"):
        return Reply(tool_calls=[("get_weather", {"city": "Oslo"})])
    systems = [m["content"] for m in messages if m["role"] == "system"]
    return Reply(f"Answer: {'; '.join(results) or question} ({' '.join(systems)})", usage={"prompt_tokens": 9})


@pytest.fixture(params=["sync", "async"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[AgentAPIServer, FakeOpenAIServer]]:
    with FakeOpenAIServer(handler=model_reply) as model:
        llm_cls, agent_cls = (
            (GPTAPI, FunctionCallingAgent) if request.param == "sync" else (AsyncGPTAPI, AsyncFunctionCallingAgent)
        )
        agent = agent_cls(llm_cls(model_type="m", api_base=model.base_url, key="k", retry=0), [Calculator()])
        with AgentAPIServer(agent, port=0, model_name="helper-1") as server:
            yield server, model


def sdk(server: AgentAPIServer) -> Any:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def test_text_and_a_client_tool_whole(served: tuple[AgentAPIServer, FakeOpenAIServer]) -> None:
    server, model = served
    with sdk(server) as client:
        reply = client.responses.create(model="helper-1", input="hello", instructions="Be brief.", max_output_tokens=50)
        assert model.requests[-1]["max_tokens"] == 50
        assert reply.object == "response" and reply.status == "completed" and reply.model == "helper-1"
        assert "hello" in reply.output_text and "Be brief." in reply.output_text  # instructions reach the model
        assert reply.usage is not None and reply.usage.input_tokens == 9
        question: list[Any] = [{"role": "user", "content": "What is the weather in Oslo?"}]
        asked = client.responses.create(model="helper-1", input=question, tools=[WEATHER])
        (call,) = asked.output
        assert (call.type, call.name, json.loads(call.arguments)) == ("function_call", "get_weather", {"city": "Oslo"})
        assert [t["function"]["name"] for t in model.requests[-1]["tools"]] == ["Calculator", "get_weather"]
        history = [
            *question,
            call.model_dump(),
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
        ]
        answer = client.responses.create(model="helper-1", input=history, tools=[WEATHER])
        assert answer.output_text.startswith("Answer: sunny")


def test_streamed_events(served: tuple[AgentAPIServer, FakeOpenAIServer]) -> None:
    server, _ = served
    with sdk(server) as client:
        events = list(client.responses.create(model="helper-1", input="hello", stream=True))
        types = [e.type for e in events]
        assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed"
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert text.startswith("Answer: hello") and events[-1].response.output_text == text
        assert [e.sequence_number for e in events] == list(range(len(events)))
        events = list(
            client.responses.create(model="helper-1", input="the weather in Oslo?", tools=[WEATHER], stream=True)
        )
        types = [e.type for e in events]
        assert "response.function_call_arguments.delta" in types and types[-1] == "response.completed"
        (item,) = events[-1].response.output
        assert item.type == "function_call" and item.name == "get_weather"


def test_mistakes_are_400s_naming_the_responses_field(served: tuple[AgentAPIServer, FakeOpenAIServer]) -> None:
    server, _ = served
    stray = [{"role": "user", "content": "hi"}, {"type": "function_call_output", "call_id": "call_x", "output": "1"}]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"input": stray}, "input[1].call_id"),
        ({"input": "hi", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"input": "hi", "tools": [{**WEATHER, "name": "bad name"}]}, "tools[0].name"),
        ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": [{"role": "wizard", "content": "hi"}]}, "input[0].role"),
        ({"input": "hi", "tools": [WEATHER], "tool_choice": {"type": "function", "name": "zz"}}, "tool_choice.name"),
    ]
    with sdk(server) as client:
        for request, param in cases:
            with pytest.raises(openai.BadRequestError) as bad:
                client.responses.create(model="helper-1", **request)
            assert bad.value.param == param, request
            assert "messages[" not in bad.value.message and ".function" not in bad.value.message
            assert "max_completion_tokens" not in bad.value.message
