"""Every field of an OpenAI chat request is honoured or refused with a 400 naming it (issue 38, item 1):
the `developer` role, unknown roles, non-text content, `n`, `logprobs`, client tools, `response_format`,
`seed` and the penalties, `max_completion_tokens`, `metadata.session_id` and the operator's model name,
with the official openai client (sync and async from one body), LangChain and litellm."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from plait.agents import AsyncAgent
from plait.distributed import AgentAPIServer
from plait.llms import AsyncGPTAPI
from plait.testing.fake_openai import FakeOpenAIServer, Reply

openai = pytest.importorskip("openai")


def echo(body: dict[str, Any]) -> Reply:
    if body.get("response_format"):  # a model that follows it
        return Reply('{"name": "Oslo", "population": 709037}')
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return Reply(f"echo {users[-1]} after {len(users) - 1} earlier", usage={"prompt_tokens": 7, "completion_tokens": 5})


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(handler=echo) as server:
        yield server


@pytest.fixture
def served(model: FakeOpenAIServer) -> Iterator[AgentAPIServer]:
    llm = AsyncGPTAPI(model_type="m", api_base=model.base_url, key="k", retry=0)
    agent = AsyncAgent(llm, template="You are the served agent.")
    server = AgentAPIServer(agent, port=0, model_name="helper-1").start()
    yield server
    server.stop()


def create(mode: str, server: AgentAPIServer, **request: Any) -> Any:
    """One ``chat.completions.create`` with the sync or the async official client."""
    base = {"base_url": server.url + "/v1", "api_key": "unused", "max_retries": 0}
    request.setdefault("model", "anything")
    if mode == "sync":
        with openai.OpenAI(**base) as client:
            return client.chat.completions.create(**request)

    async def go() -> Any:
        async with openai.AsyncOpenAI(**base) as client:
            return await client.chat.completions.create(**request)

    return asyncio.run(go())


def refused(mode: str, server: AgentAPIServer, **request: Any) -> Any:
    with pytest.raises(openai.BadRequestError) as bad:
        create(mode, server, **request)
    assert bad.value.type == "invalid_request_error"
    return bad.value


HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_fields_the_agent_cannot_honour_are_refused_naming_them(mode: str, served: AgentAPIServer) -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    cases: dict[str, dict[str, Any]] = {  # each was silently dropped
        "n": {"n": 2},
        "logprobs": {"logprobs": True},
        "top_logprobs": {"top_logprobs": 3},
        "tools": {"tools": [tool]},
        "tool_choice": {"tool_choice": "required"},
        "response_format": {"response_format": {"type": "xml"}},
        "reasoning_effort": {"reasoning_effort": "high"},
        "timeout_s": {"extra_body": {"timeout_s": 3}},  # not an OpenAI field at all
    }
    for param, fields in cases.items():
        error = refused(mode, served, messages=HI, **fields)
        assert error.param == param, param
    assert refused(mode, served, messages=HI, tools=[tool]).code == "unsupported_parameter"
    # the no-op values of the same fields are fine
    reply = create(mode, served, messages=HI, n=1, logprobs=False, response_format={"type": "text"})
    assert reply.choices[0].message.content == "echo hi after 0 earlier"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_messages_are_checked_and_developer_is_a_system_message(
    mode: str, served: AgentAPIServer, model: FakeOpenAIServer
) -> None:
    developer = [{"role": "developer", "content": "Answer only in French."}, *HI]
    create(mode, served, messages=developer)
    assert any("Answer only in French." in str(m["content"]) for m in model.requests[-1]["messages"][1:])
    wizard = [*HI, {"role": "assistant", "content": "?"}, {"role": "wizard", "content": "hi"}]
    assert refused(mode, served, messages=wizard).param == "messages[2].role"  # was accepted
    assert refused(mode, served, messages=[{"role": "user", "content": 42}]).param == "messages[0].content"
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    parts = [{"role": "user", "content": [{"type": "text", "text": "what is it?"}, image]}]
    assert refused(mode, served, messages=parts).param == "messages[0].content[1].type"
    text_parts = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert create(mode, served, messages=text_parts).choices[0].message.content == "echo ab after 0 earlier"
    stray = [*HI, {"role": "tool", "tool_call_id": "call_x", "content": "42"}]
    assert refused(mode, served, messages=stray).param == "messages[1].tool_call_id"  # was user text


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_sampling_fields_reach_the_model_within_the_servers_caps(
    mode: str, served: AgentAPIServer, model: FakeOpenAIServer
) -> None:
    create(mode, served, messages=HI, seed=7, presence_penalty=0.5, frequency_penalty=-0.5, stop=["END"])
    sent = model.requests[-1]
    assert (sent["seed"], sent["presence_penalty"], sent["frequency_penalty"], sent["stop"]) == (7, 0.5, -0.5, ["END"])
    create(mode, served, messages=HI, max_completion_tokens=33)
    assert model.requests[-1]["max_tokens"] == 33
    error = refused(mode, served, messages=HI, max_tokens=-1)
    assert error.param == "max_tokens" and "max_tokens" in str(error) and "max_new_tokens" not in str(error)
    assert refused(mode, served, messages=HI, max_completion_tokens=10**6).param == "max_completion_tokens"
    assert refused(mode, served, messages=HI, presence_penalty=3).param == "presence_penalty"
    assert refused(mode, served, messages=HI, seed="x").param == "seed"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_metadata_session_joins_turns_and_the_model_has_the_operators_name(mode: str, served: AgentAPIServer) -> None:
    session = {"session_id": f"meta-{mode}"}
    create(mode, served, messages=[{"role": "user", "content": "one"}], metadata=session)
    reply = create(mode, served, messages=[{"role": "user", "content": "two"}], metadata=session)
    assert reply.choices[0].message.content == "echo two after 1 earlier"
    assert reply.model == "helper-1"
    with openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0) as client:
        assert [m.id for m in client.models.list()] == ["helper-1"]  # was the agent's class name


def test_langchain_and_litellm_talk_to_a_served_agent(served: AgentAPIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    chat_openai = pytest.importorskip("langchain_openai")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from GitHub on import
    with warnings.catch_warnings():  # its pydantic models warn on import
        warnings.simplefilter("ignore")
        litellm = pytest.importorskip("litellm")
    llm = chat_openai.ChatOpenAI(model="helper-1", base_url=served.url + "/v1", api_key="unused", max_retries=0)
    assert llm.invoke("hello").content == "echo hello after 0 earlier"
    seeded = llm.bind(seed=3, stop=["END"])
    assert seeded.invoke("again").content == "echo again after 0 earlier"
    with warnings.catch_warnings():  # its pydantic models warn as they are built
        warnings.simplefilter("ignore", UserWarning)
        reply = litellm.completion(
            model="openai/helper-1", api_base=served.url + "/v1", api_key="unused", messages=HI, max_tokens=20
        )
    assert reply.choices[0].message.content == "echo hi after 0 earlier"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_response_format_reaches_the_model_and_the_reply_is_the_json(
    mode: str, served: AgentAPIServer, model: FakeOpenAIServer
) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["name", "population"],
        "additionalProperties": False,
    }
    wanted = {"type": "json_schema", "json_schema": {"name": "City", "schema": schema, "strict": True}}
    reply = create(mode, served, messages=HI, response_format=wanted)  # was dropped: the model never saw it
    assert model.requests[-1]["response_format"] == wanted
    assert json.loads(reply.choices[0].message.content) == {"name": "Oslo", "population": 709037}
    create(mode, served, messages=HI, response_format={"type": "json_object"})
    assert model.requests[-1]["response_format"] == {"type": "json_object"}
    create(mode, served, messages=HI, response_format={"type": "text"})
    assert "response_format" not in model.requests[-1]


def test_langchain_with_structured_output_gets_the_object(served: AgentAPIServer) -> None:
    chat_openai = pytest.importorskip("langchain_openai")
    from pydantic import BaseModel

    class City(BaseModel):
        name: str
        population: int

    llm = chat_openai.ChatOpenAI(model="helper-1", base_url=served.url + "/v1", api_key="unused", max_retries=0)
    assert llm.with_structured_output(City).invoke("the capital of Norway") == City(name="Oslo", population=709037)
