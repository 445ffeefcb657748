"""A served agent takes an OpenAI client's own tools (issue 38, item 1): the client's `tools` are offered to the
agent's model beside the agent's tools, a call to one ends the reply with `tool_calls` / `finish_reason:
"tool_calls"`, and the client's `tool` messages go back to the run as those calls' results (`ToolOutput`), with
a session or from the whole history a stateless client sends back. LangChain's `bind_tools`, litellm's `tools`
and the official openai client (streaming and not), sync and async agents, on a real server."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from plait.actions import Calculator
from plait.agents import (
    Agent,
    AsyncFunctionCallingAgent,
    AsyncStreamingFunctionCallingAgent,
    FunctionCallingAgent,
    StreamingFunctionCallingAgent,
)
from plait.distributed import AgentAPIServer
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.testing.fake_openai import FakeOpenAIServer, Reply

openai = pytest.importorskip("openai")

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def model_reply(body: dict[str, Any]) -> Reply:
    """Calls the tools the question asks for that have no result yet, then answers with the results."""
    messages = body["messages"]
    names = {
        call["id"]: call["function"]["name"]
        for m in messages
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    }
    answered = {names.get(m["tool_call_id"]): m["content"] for m in messages if m["role"] == "tool"}
    question = [m["content"] for m in messages if m["role"] == "user"][-1]
    offered = {tool["function"]["name"] for tool in body.get("tools") or []}
    calls: list[tuple[str, dict[str, str]]] = []
    if "6*7" in question and "Calculator" not in answered and "Calculator" in offered:
        calls.append(("Calculator", {"expression": "6*7"}))
    if "weather" in question and "get_weather" not in answered and "get_weather" in offered:
        calls.append(("get_weather", {"city": "Oslo"}))
    if calls and body.get("tool_choice") != "none":
        return Reply(tool_calls=calls)
    return Reply("Answer: " + "; ".join(f"{name}={text}" for name, text in sorted(answered.items())))


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(handler=model_reply) as server:
        yield server


class CountingCalculator(Calculator):
    """A Calculator that counts its runs (the agent's own tool runs once, server-side)."""

    def __init__(self) -> None:
        super().__init__(Calculator.__tool_description__)  # named Calculator, as the model knows it
        self.runs = 0

    def run(self, expression: str) -> Any:  # type: ignore[override]
        self.runs += 1
        return super().run(expression)


AGENTS = {
    "sync": (FunctionCallingAgent, GPTAPI),
    "async": (AsyncFunctionCallingAgent, AsyncGPTAPI),
    "streaming": (StreamingFunctionCallingAgent, GPTAPI),
    "async-streaming": (AsyncStreamingFunctionCallingAgent, AsyncGPTAPI),
}


def serve(model: FakeOpenAIServer, kind: str = "sync", calculator: Calculator | None = None) -> AgentAPIServer:
    agent_cls, llm_cls = AGENTS[kind]
    llm = llm_cls(model_type="m", api_base=model.base_url, key="k", retry=0)
    return AgentAPIServer(agent_cls(llm, [calculator or Calculator()]), port=0, model_name="helper-1").start()


@pytest.fixture
def served(model: FakeOpenAIServer) -> Iterator[AgentAPIServer]:
    server = serve(model)
    yield server
    server.stop()


def client(server: AgentAPIServer) -> Any:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def create(server: AgentAPIServer, stream: bool, **request: Any) -> dict[str, Any]:
    """One request with the official client; a stream is put together as the SDK's users do."""
    with client(server) as sdk:
        if not stream:
            return sdk.chat.completions.create(model="helper-1", **request).model_dump()  # type: ignore[no-any-return]
        content, calls, finish = "", {}, None
        for chunk in sdk.chat.completions.create(model="helper-1", stream=True, **request):
            for choice in chunk.choices:
                content += choice.delta.content or ""
                for delta in choice.delta.tool_calls or []:
                    call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] += delta.id or ""
                    call["name"] += delta.function.name or ""
                    call["arguments"] += delta.function.arguments or ""
                finish = choice.finish_reason or finish
        tool_calls = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())
        ]
        message = {"role": "assistant", "content": content or None, "tool_calls": tool_calls or None}
        return {"choices": [{"message": message, "finish_reason": finish}]}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("kind", list(AGENTS))
def test_the_openai_client_runs_a_client_tool_and_sends_its_result_back(
    kind: str, stream: bool, model: FakeOpenAIServer
) -> None:
    server = serve(model, kind)
    try:
        question = [{"role": "user", "content": "What is the weather in Oslo?"}]
        first = create(server, stream, messages=question, tools=[WEATHER])
        choice = first["choices"][0]
        assert choice["finish_reason"] == "tool_calls"  # was a 400 naming `tools`
        (call,) = choice["message"]["tool_calls"]
        assert call["function"]["name"] == "get_weather"
        assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
        offered = [tool["function"]["name"] for tool in model.requests[0]["tools"]]
        assert offered == ["Calculator", "get_weather"]  # beside the agent's own tool
        history = [
            *question,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "sunny, 21 C"},
        ]
        final = create(server, stream, messages=history, tools=[WEATHER])
        assert final["choices"][0]["finish_reason"] == "stop"
        assert final["choices"][0]["message"]["content"] == "Answer: get_weather=sunny, 21 C"
        assert model.requests[-1]["messages"][-1] == {
            "role": "tool",
            "tool_call_id": call["id"],
            "content": "sunny, 21 C",
        }
    finally:
        server.stop()


def test_langchain_bind_tools_gets_the_call_and_the_answer_uses_the_result(served: AgentAPIServer) -> None:
    chat_openai = pytest.importorskip("langchain_openai")
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    llm = chat_openai.ChatOpenAI(model="helper-1", base_url=served.url + "/v1", api_key="unused", max_retries=0)
    bound = llm.bind_tools([get_weather])
    history: list[Any] = [HumanMessage("What is the weather in Oslo?")]
    asked = bound.invoke(history)
    assert [(c["name"], c["args"]) for c in asked.tool_calls] == [("get_weather", {"city": "Oslo"})]
    history += [asked, get_weather.invoke(asked.tool_calls[0])]  # a ToolMessage with the call's id
    answer = bound.invoke(history)
    assert answer.content == "Answer: get_weather=sunny in Oslo" and not answer.tool_calls
    streamed = [chunk.content for chunk in bound.stream(history)]
    assert "".join(str(c) for c in streamed) == "Answer: get_weather=sunny in Oslo"


def test_litellm_tools_get_the_call_and_the_answer_uses_the_result(
    served: AgentAPIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from GitHub on import
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        litellm = pytest.importorskip("litellm")
    where = {"model": "openai/helper-1", "api_base": served.url + "/v1", "api_key": "unused"}
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Oslo?"}]
    try:
        with warnings.catch_warnings():  # its pydantic models warn as they are built
            warnings.simplefilter("ignore", UserWarning)
            asked = litellm.completion(messages=messages, tools=[WEATHER], **where)
            assert asked.choices[0].finish_reason == "tool_calls"
            call = asked.choices[0].message.tool_calls[0]
            assert call.function.name == "get_weather"
            messages += [
                asked.choices[0].message.model_dump(),
                {"role": "tool", "tool_call_id": call.id, "content": "rain"},
            ]
            answer = litellm.completion(messages=messages, tools=[WEATHER], **where)
        assert answer.choices[0].message.content == "Answer: get_weather=rain"
    finally:  # litellm's sync completion leaves an open event loop set as the thread's: close it here, not at GC
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            asyncio.get_event_loop().close()
        asyncio.set_event_loop(None)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_agents_own_tool_and_a_client_tool_in_one_conversation(kind: str, model: FakeOpenAIServer) -> None:
    """In one turn the model calls the agent's Calculator and the client's tool: the first runs on the server,
    once; the second goes to the client; its result resumes the same run (a session)."""
    calculator = CountingCalculator()
    server = serve(model, kind, calculator)
    try:
        session = {"session_id": f"mixed-{kind}"}
        question = [{"role": "user", "content": "What is 6*7, and the weather in Oslo?"}]
        first = create(server, False, messages=question, tools=[WEATHER], metadata=session)
        (call,) = first["choices"][0]["message"]["tool_calls"]  # only the client's tool is the client's business
        assert call["function"]["name"] == "get_weather" and calculator.runs == 1
        ran = first["choices"][0]["message"]["plait_tool_calls"]
        assert [(c["tool"], c["result"]) for c in ran] == [("Calculator", "42")]
        result = [{"role": "tool", "tool_call_id": call["id"], "content": "sunny"}]
        final = create(server, False, messages=result, tools=[WEATHER], metadata=session)
        assert final["choices"][0]["message"]["content"] == "Answer: Calculator=42; get_weather=sunny"
        assert calculator.runs == 1  # the resumed run did not run it again
    finally:
        server.stop()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_stateless_client_resumes_the_parked_run_and_the_agents_own_call_is_not_made_again(
    stream: bool, model: FakeOpenAIServer
) -> None:
    """Without a session the paused run is parked under the conversation: the history the client sends back
    (no session, as LangChain sends it) takes it up, the Calculator's result of the first request included."""
    calculator = CountingCalculator()
    server = serve(model, "sync", calculator)
    try:
        question = [{"role": "user", "content": "What is 6*7, and the weather in Oslo?"}]
        first = create(server, stream, messages=question, tools=[WEATHER])
        (call,) = first["choices"][0]["message"]["tool_calls"]
        history = [
            *question,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "sunny"},
        ]
        final = create(server, stream, messages=history, tools=[WEATHER])
        assert final["choices"][0]["message"]["content"] == "Answer: Calculator=42; get_weather=sunny"
        assert calculator.runs == 1  # answered from the history alone, the model would have asked for it again
        # another worker (no parked run) answers the same history from the history itself
        other = serve(model, "async")
        try:
            again = create(other, stream, messages=history, tools=[WEATHER])
        finally:
            other.stop()
        assert again["choices"][0]["message"]["content"] == "Answer: Calculator=42; get_weather=sunny"
    finally:
        server.stop()


def test_parked_runs_expire_and_are_capped() -> None:
    from plait.distributed.http_serve.openai_request import Turn
    from plait.distributed.http_serve.parked_runs import ParkedRuns

    dropped: list[object] = []
    now = [0.0]
    parked = ParkedRuns(dropped.append, limit=2, ttl=10, clock=lambda: now[0])
    asked = [Turn("user", "q")]
    answer = [
        *asked,
        Turn("assistant", "", None, ({"id": "c1", "name": "f", "arguments": "{}"},)),
        Turn("tool", "r", "c1"),
    ]
    parked.park("t", asked, ["c1"], "s1")
    assert parked.take("other-tenant", answer) is None and parked.take("t", answer[:-1]) is None
    assert parked.take("t", answer) == "s1" and parked.take("t", answer) is None  # taken once
    for session in ("a", "b", "c"):
        parked.park("t", [Turn("user", session)], ["c1"], session)
    assert dropped == ["a"] and len(parked) == 2  # the oldest beyond the cap
    now[0] = 11.0
    parked.park("t", asked, ["c1"], "s2")
    assert dropped == ["a", "b", "c"] and len(parked) == 1  # the expired


def test_tool_choice_reaches_the_model(served: AgentAPIServer, model: FakeOpenAIServer) -> None:
    question = [{"role": "user", "content": "What is the weather in Oslo?"}]
    forced = {"type": "function", "function": {"name": "get_weather"}}
    create(served, False, messages=question, tools=[WEATHER], tool_choice=forced)
    assert model.requests[-1]["tool_choice"] == forced
    reply = create(served, False, messages=question, tools=[WEATHER], tool_choice="none")
    assert model.requests[-1]["tool_choice"] == "none"
    assert reply["choices"][0]["finish_reason"] == "stop"


def refused(server: AgentAPIServer, **request: Any) -> Any:
    with pytest.raises(openai.BadRequestError) as bad, client(server) as sdk:
        sdk.chat.completions.create(model="helper-1", **request)
    assert bad.value.type == "invalid_request_error"
    return bad.value


def test_client_tool_mistakes_are_400s_naming_the_field(served: AgentAPIServer) -> None:
    question = [{"role": "user", "content": "What is the weather in Oslo?"}]
    unknown = [*question, {"role": "tool", "tool_call_id": "call_nobody_made", "content": "x"}]
    assert refused(served, messages=unknown, tools=[WEATHER]).param == "messages[1].tool_call_id"
    session = {"session_id": "no-paused-run"}
    assert refused(served, messages=unknown[1:], metadata=session).param == "messages[0].tool_call_id"
    other = {"type": "function", "function": {"name": "not_offered"}}
    assert refused(served, messages=question, tools=[WEATHER], tool_choice=other).param == "tool_choice.function.name"
    bad_name = {"type": "function", "function": {"name": "get weather"}}
    assert refused(served, messages=question, tools=[bad_name]).param == "tools[0].function.name"
    own = {"type": "function", "function": {"name": "Calculator"}}
    assert refused(served, messages=question, tools=[own]).param == "tools[0].function.name"
    assert refused(served, messages=question, tool_choice="required").param == "tool_choice"


def test_an_agent_without_tool_calling_refuses_client_tools(model: FakeOpenAIServer) -> None:
    llm = GPTAPI(model_type="m", api_base=model.base_url, key="k", retry=0)
    with AgentAPIServer(Agent(llm), port=0) as server:
        error = refused(server, messages=[{"role": "user", "content": "hi"}], tools=[WEATHER])
    assert error.param == "tools" and error.code == "unsupported_parameter"


def test_async_client(served: AgentAPIServer) -> None:
    """The async official client, streamed: the call arrives as tool_call deltas."""

    async def go() -> list[Any]:
        async with openai.AsyncOpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0) as sdk:
            stream = await sdk.chat.completions.create(
                model="helper-1",
                messages=[{"role": "user", "content": "the weather in Oslo?"}],
                tools=[WEATHER],
                stream=True,
            )
            return [chunk async for chunk in stream]

    chunks = asyncio.run(go())
    deltas = [call for c in chunks for choice in c.choices for call in choice.delta.tool_calls or []]
    assert [d.function.name for d in deltas] == ["get_weather"]
    assert [choice.finish_reason for c in chunks for choice in c.choices if choice.finish_reason] == ["tool_calls"]
