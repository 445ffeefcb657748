"""Issue 19: typed answers (``output_type=``), validated, retried with the errors, never stored half-way.

Every behaviour runs sync and async from one body (the `mode` fixture) against a
`FakeOpenAIServer`; streaming agents and the backends' request shapes have their own tests.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from _support import collect, resolve
from plait.actions import BaseAction, tool_api
from plait.agents import (
    Agent,
    AsyncAgent,
    AsyncFunctionCallingAgent,
    AsyncSequential,
    AsyncStreamingAgent,
    FunctionCallingAgent,
    Sequential,
    StreamingAgent,
)
from plait.exceptions import OutputValidationError, UserError
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.llms._anthropic_protocol import OUTPUT_TOOL, build_request, parse_message
from plait.llms.base_llm import LLMCore
from plait.outputs import OutputInvalid, OutputType
from plait.schema import AgentStatusCode
from plait.testing.fake_openai import FakeOpenAIServer, Reply


class City(BaseModel):
    name: str
    population: int
    coastal: bool


VALID = '{"name": "Oslo", "population": 709037, "coastal": true}'


def _llm(mode: str, server: FakeOpenAIServer) -> Any:
    return (AsyncGPTAPI if mode == "async" else GPTAPI)(model_type="m", api_base=server.base_url, key="k", retry=0)


def _agent(mode: str, server: FakeOpenAIServer, **kwargs: Any) -> Any:
    return (AsyncAgent if mode == "async" else Agent)(_llm(mode, server), **kwargs)


def test_the_request_carries_a_strict_json_schema_and_formatted_is_the_instance(mode: str) -> None:
    with FakeOpenAIServer([Reply(VALID)]) as server:
        reply = resolve(_agent(mode, server, output_type=City)("Tell me about Oslo", session_id="s"))
        (body,) = server.requests
    assert reply.formatted == City(name="Oslo", population=709037, coastal=True)
    assert reply.content == VALID
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    spec = fmt["json_schema"]
    assert spec["name"] == "City" and spec["strict"] is True
    assert spec["schema"]["required"] == ["name", "population", "coastal"]
    assert spec["schema"]["additionalProperties"] is False


def test_an_invalid_reply_is_sent_back_with_the_field_then_memory_keeps_one_answer(mode: str) -> None:
    bad = '{"name": "Oslo", "population": "many", "coastal": true}'
    with FakeOpenAIServer([Reply(bad), Reply(VALID)]) as server:
        agent = _agent(mode, server, output_type=City)
        reply = resolve(agent("Oslo?", session_id="s"))
        first, second = server.requests
    assert reply.formatted.population == 709037
    correction = second["messages"][-1]["content"]
    assert "population" in correction and "integer" in correction
    assert second["messages"][-2] == {"role": "assistant", "content": bad}
    assert second["response_format"] == first["response_format"]
    stored = agent.memory.get("s").get_memory()
    assert [(m.sender, m.content) for m in stored] == [("user", "Oslo?"), (agent.name, VALID)]


def test_always_invalid_makes_one_plus_retries_requests_then_raises_and_rolls_back(mode: str) -> None:
    with FakeOpenAIServer(handler=lambda body: Reply("not json at all")) as server:
        agent = _agent(mode, server, output_type=City, output_retries=3)
        with pytest.raises(OutputValidationError) as caught:
            resolve(agent("Oslo?", session_id="s"))
        assert len(server.requests) == 4
    assert caught.value.raw == "not json at all"
    assert caught.value.attempts == 4 and caught.value.errors
    assert agent.memory.get("s") is None or len(agent.memory.get("s")) == 0


def test_output_retries_zero_means_a_single_request(mode: str) -> None:
    with FakeOpenAIServer(handler=lambda body: Reply("{}")) as server:
        with pytest.raises(OutputValidationError):
            resolve(_agent(mode, server, output_type=City, output_retries=0)("x"))
        assert len(server.requests) == 1


class Weather(BaseAction):
    """Weather of a city."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    @tool_api
    def run(self, city: str) -> str:
        """The weather.

        Args:
            city (str): the city
        """
        self.calls += 1
        return f"{city}: 21 degrees, sunny"


class Forecast(BaseModel):
    city: str
    celsius: int


def _forecaster(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return Reply('{"city": "Oslo", "celsius": "warm"}')  # invalid: retried
    if messages[-1]["role"] == "user" and "did not match" in messages[-1]["content"]:
        return Reply('{"city": "Oslo", "celsius": 21}')
    return Reply("", tool_calls=[("Weather", {"city": "Oslo"})])


def test_a_tool_agent_calls_tools_then_answers_typed(mode: str) -> None:
    tool = Weather()
    with FakeOpenAIServer(handler=_forecaster) as server:
        cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
        agent = cls(_llm(mode, server), [tool], output_type=Forecast)
        reply = resolve(agent("Weather in Oslo?", session_id="s"))
        requests = list(server.requests)
    assert reply.formatted == Forecast(city="Oslo", celsius=21)
    assert tool.calls == 1
    assert len(requests) == 3
    assert all(r["response_format"]["json_schema"]["name"] == "Forecast" for r in requests)
    assert "tools" not in requests[2]  # the correction turn asks for the answer only
    stored = agent.memory.get("s").get_memory()
    assert stored[-1].content == '{"city": "Oslo", "celsius": 21}'
    assert not any("did not match" in str(m.content) for m in stored)


def test_a_typed_answer_travels_through_sequential_to_the_next_agent(mode: str) -> None:
    def handler(body: dict[str, Any]) -> Reply:
        if "response_format" in body:
            return Reply(VALID)
        return Reply("summary of " + body["messages"][-1]["content"])

    with FakeOpenAIServer(handler=handler) as server:
        first = _agent(mode, server, output_type=City, name="extract")
        second = _agent(mode, server, name="summarise")
        chain = (AsyncSequential if mode == "async" else Sequential)(first, second)
        reply = resolve(chain("Oslo", session_id="s"))
    assert reply.content == "summary of " + VALID
    received = second.memory.get("s").get_memory()[0]
    assert received.formatted == City(name="Oslo", population=709037, coastal=True)


@pytest.mark.parametrize("streaming", [StreamingAgent, AsyncStreamingAgent])
def test_a_streaming_agent_yields_partial_json_then_the_validated_object(fake_server: Any, streaming: Any) -> None:
    server = fake_server([Reply(VALID)], chunk_size=8)
    llm = (AsyncGPTAPI if streaming is AsyncStreamingAgent else GPTAPI)(
        model_type="m", api_base=server.base_url, key="k", retry=0
    )
    chunks = collect(streaming(llm, output_type=City)("Oslo?"))
    partial = [c.content for c in chunks if c.stream_state != AgentStatusCode.END]
    assert len(partial) >= 3 and all(VALID.startswith(p) for p in partial)
    assert chunks[-1].formatted == City(name="Oslo", population=709037, coastal=True)
    assert server.requests[0]["response_format"]["json_schema"]["name"] == "City"


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Person(TypedDict):
    name: str
    age: int


@pytest.mark.parametrize(
    ("output_type", "text", "expected"),
    [
        (Point, '{"x": 1, "y": 2}', Point(1, 2)),
        (Point, 'Here: {"x": 1, "y": 2} and {"x": 3} more text', Point(1, 2)),
        (Person, '```json\n{"name": "Ada", "age": 36}\n```', {"name": "Ada", "age": 36}),
        (list[str], '{"result": ["a", "b"]}', ["a", "b"]),
        (list[str], '["a", "b"]', ["a", "b"]),
        (int, 'The answer: {"result": 42}', 42),
    ],
)
def test_output_types_beyond_pydantic_models(output_type: Any, text: str, expected: Any) -> None:
    assert OutputType(output_type).validate(text) == expected


@pytest.mark.parametrize("hostile", ["[" * 100_000, '{"x": ' + "9" * 100_000 + "}", '{"x": "\\ud800", "y": 1}', ""])
def test_hostile_replies_are_invalid_answers_never_crashes(hostile: str) -> None:
    with pytest.raises(OutputInvalid) as caught:
        OutputType(Point).validate(hostile)
    assert caught.value.errors


def test_plain_types_are_wrapped_in_an_object_for_strict_apis() -> None:
    schema = OutputType(list[str]).response_format()["json_schema"]["schema"]  # type: ignore[index]
    assert schema == {
        "type": "object",
        "properties": {"result": {"items": {"type": "string"}, "type": "array"}},
        "required": ["result"],
        "additionalProperties": False,
    }


def test_a_free_form_dict_is_not_claimed_strict() -> None:
    fmt = OutputType(dict[str, int]).response_format()
    assert fmt["json_schema"]["strict"] is False  # type: ignore[index]


def test_bad_output_arguments_are_user_errors() -> None:
    with pytest.raises(UserError, match="output_retries"):
        Agent(None, output_type=City, output_retries=-1)
    with pytest.raises(UserError, match="has no JSON Schema"):
        Agent(None, output_type=object())


def test_backends_without_a_schema_parameter_get_the_schema_in_words() -> None:
    class Plain(LLMCore):
        pass

    prompt, params = Plain()._prepare(
        [{"role": "user", "content": "Oslo?"}], {"response_format": OutputType(City).response_format()}
    )
    assert "response_format" not in params
    assert "JSON Schema" in str(prompt) and "population" in str(prompt)


def test_claude_answers_through_a_forced_output_tool() -> None:
    fmt = OutputType(City).response_format()
    request = build_request("claude", [{"role": "user", "content": "Oslo?"}], {"response_format": fmt})
    assert request["tool_choice"] == {"type": "tool", "name": OUTPUT_TOOL}
    (tool,) = request["tools"]  # type: ignore[misc]
    assert tool["input_schema"]["required"] == ["name", "population", "coastal"]
    assert "response_format" not in request
    message = {"content": [{"type": "tool_use", "id": "t1", "name": OUTPUT_TOOL, "input": json.loads(VALID)}]}
    response = parse_message(message)
    assert response.tool_calls == [] and json.loads(response.content) == json.loads(VALID)


def test_claude_with_tools_must_call_a_tool_or_answer() -> None:
    fmt = OutputType(City).response_format()
    tool = {"type": "function", "function": {"name": "w", "parameters": {"type": "object", "properties": {}}}}
    request = build_request("c", [{"role": "user", "content": "x"}], {"response_format": fmt}, [tool], "auto")
    assert [t["name"] for t in request["tools"]] == ["w", OUTPUT_TOOL]  # type: ignore[attr-defined]
    assert request["tool_choice"] == {"type": "any"}


def _weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return f"sunny, 21C in {city}"


def test_react_answers_typed_and_a_bad_final_answer_is_corrected_in_a_plain_turn(mode: str) -> None:
    from plait.agents.react import AsyncReAct, ReAct
    from plait.testing import scripted_llm

    llm = scripted_llm(
        [
            'Thought: weather first.\nAction: _weather\nAction Input: {"city": "Oslo"}',
            "Thought: done.\nFinal Answer: It is 21 degrees in Oslo.",
            '{"city": "Oslo", "celsius": 21}',
        ],
        mode,
    )
    agent = (AsyncReAct if mode == "async" else ReAct)(llm, [_weather], output_type=Forecast)
    reply = resolve(agent("Weather in Oslo?", session_id="s"))
    assert reply.formatted == Forecast(city="Oslo", celsius=21)
    react_turn, correction = llm.calls[1], llm.calls[2]
    assert "response_format" not in react_turn.params  # the ReAct turns keep their own format
    assert correction.messages[-2] == {"role": "assistant", "content": "It is 21 degrees in Oslo."}
    told = correction.messages[-1]["content"]  # a scripted model takes no schema: it is told in words
    assert "did not match" in told and '"celsius"' in told and "response_format" not in correction.params
    assert agent.memory.get("s").get_memory()[-1].content == '{"city": "Oslo", "celsius": 21}'


def test_a_typed_answer_in_memory_survives_a_json_state_round_trip(mode: str) -> None:
    with FakeOpenAIServer([Reply(VALID)]) as server:
        agent = _agent(mode, server, output_type=City)
        resolve(agent("Oslo?", session_id="s"))
        saved = json.loads(json.dumps(agent.state_dict(session_id="s")))
        fresh = _agent(mode, server, output_type=City)
        fresh.load_state_dict(saved, session_id="s")
    answer = fresh.memory.get("s").get_memory()[-1]
    assert answer.content == VALID
    assert City.model_validate(answer.formatted) == City(name="Oslo", population=709037, coastal=True)


def test_internlm_agents_answer_typed_and_their_inner_agent_takes_the_correction(mode: str) -> None:
    from plait.agents import AgentForInternLM, AsyncAgentForInternLM
    from plait.testing import scripted_llm

    llm = scripted_llm(["It is warm in Oslo.", '{"city": "Oslo", "celsius": 21}'], mode)
    agent = (AsyncAgentForInternLM if mode == "async" else AgentForInternLM)(llm, output_type=Forecast)
    reply = resolve(agent("Weather in Oslo?", session_id="s"))
    assert reply.formatted == Forecast(city="Oslo", celsius=21)
    assert "did not match" in llm.calls[1].messages[-1]["content"]
    assert [m.content for m in agent.memory.get("s").get_memory()] == [
        "Weather in Oslo?",
        '{"city": "Oslo", "celsius": 21}',
    ]
