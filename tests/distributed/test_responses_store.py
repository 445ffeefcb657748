"""Stored responses of `POST /v1/responses` (issue 38): the official openai client continues a conversation with
`previous_response_id` (a chain in one session, a branch from an older response that sees only its own turns),
retrieves and deletes responses; `store=False`, another tenant's ids and the bound on stored responses."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from plait.actions import Calculator
from plait.agents import AsyncFunctionCallingAgent, FunctionCallingAgent
from plait.distributed import AgentAPIServer
from plait.distributed.http_serve.requests import ServerLimits
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.testing.fake_openai import FakeOpenAIServer, Reply

openai = pytest.importorskip("openai")

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789"}


def model_reply(body: dict[str, Any]) -> Reply:
    """Calls get_weather when asked about the weather, else echoes the question."""
    messages = body["messages"]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    question = [m["content"] for m in messages if m["role"] == "user"][-1]
    if "weather" in question and not results and body.get("tools"):
        return Reply(tool_calls=[("get_weather", {"city": "Oslo"})])
    return Reply(f"Answer: {'; '.join(results) or question}")


def seen(model: FakeOpenAIServer) -> list[tuple[str, str]]:
    """The conversation the model was last asked with (roles and texts, no system prompt)."""
    return [(m["role"], m["content"]) for m in model.requests[-1]["messages"] if m["role"] != "system"]


def chat(*questions: str) -> list[tuple[str, str]]:
    return [turn for q in questions for turn in (("user", q), ("assistant", f"Answer: {q}"))]


@pytest.fixture(params=["sync", "async"])
def served(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from _serve(request.param)


def _serve(kind: str, **options: Any) -> Iterator[tuple[AgentAPIServer, FakeOpenAIServer]]:
    with FakeOpenAIServer(handler=model_reply) as model:
        llm_cls, agent_cls = (
            (GPTAPI, FunctionCallingAgent) if kind == "sync" else (AsyncGPTAPI, AsyncFunctionCallingAgent)
        )
        agent = agent_cls(llm_cls(model_type="m", api_base=model.base_url, key="k", retry=0), [Calculator()])
        with AgentAPIServer(agent, port=0, model_name="helper-1", **options) as server:
            yield server, model


def sdk(server: AgentAPIServer, token: str = "unused") -> Any:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=token, max_retries=0)


def sessions(server: AgentAPIServer) -> int:
    return len(server.agent.memory.memory_map)


def test_a_chain_goes_on_in_one_session_and_a_branch_sees_only_its_turns(served: Any) -> None:
    server, model = served
    with sdk(server) as client:
        first = client.responses.create(model="helper-1", input="one")
        assert first.store is True and first.output_text == "Answer: one"
        second = client.responses.create(model="helper-1", input="two", previous_response_id=first.id)
        assert second.previous_response_id == first.id
        third = client.responses.create(model="helper-1", input="three", previous_response_id=second.id)
        assert seen(model)[:-1] == chat("one", "two") and seen(model)[-1] == ("user", "three")
        assert third.output_text == "Answer: three"
        assert sessions(server) == 1  # the chain went on in its session: nothing copied
        branch = client.responses.create(model="helper-1", input="other", previous_response_id=first.id)
        assert seen(model) == [*chat("one"), ("user", "other")]  # not two, not three
        assert sessions(server) == 2
        client.responses.create(model="helper-1", input="four", previous_response_id=third.id)
        assert seen(model) == [*chat("one", "two", "three"), ("user", "four")]  # the chain undisturbed
        client.responses.create(model="helper-1", input="more", previous_response_id=branch.id)
        assert seen(model) == [*chat("one", "other"), ("user", "more")]


def test_streamed_and_a_client_tool_answered_through_previous_response_id(served: Any) -> None:
    server, model = served
    with sdk(server) as client:
        events = list(client.responses.create(model="helper-1", input="one", stream=True))
        final = events[-1].response
        assert final.store is True and client.responses.retrieve(final.id).output_text == "Answer: one"
        asked = client.responses.create(
            model="helper-1", input="the weather in Oslo?", tools=[WEATHER], previous_response_id=final.id
        )
        (call,) = asked.output
        assert call.type == "function_call"
        result = [{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]
        answer = client.responses.create(model="helper-1", input=result, tools=[WEATHER], previous_response_id=asked.id)
        assert answer.output_text == "Answer: sunny"
        assert seen(model)[:3] == [*chat("one"), ("user", "the weather in Oslo?")]


def test_retrieve_delete_and_store_false(served: Any) -> None:
    server, model = served
    with sdk(server) as client:
        first = client.responses.create(model="helper-1", input="one")
        fetched = client.responses.retrieve(first.id)
        assert fetched.model_dump() == first.model_dump()
        off = client.responses.create(model="helper-1", input="aside", previous_response_id=first.id, store=False)
        assert off.store is False
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(off.id)
        with pytest.raises(openai.BadRequestError) as bad:
            client.responses.create(model="helper-1", input="x", previous_response_id=off.id)
        assert bad.value.param == "previous_response_id"
        client.responses.create(model="helper-1", input="two", previous_response_id=first.id)
        assert seen(model) == [*chat("one"), ("user", "two")]  # the unstored turn left no trace
        deleted = httpx.delete(f"{server.url}/v1/responses/{first.id}")
        assert deleted.json() == {"id": first.id, "object": "response.deleted", "deleted": True}
        for missing in (first.id, "resp_nope", "../../etc"):
            with pytest.raises(openai.NotFoundError) as gone:
                client.responses.retrieve(missing)
            assert gone.value.body["message"].startswith("Response with id")
            with pytest.raises(openai.NotFoundError):
                client.responses.delete(missing)
        with pytest.raises(openai.BadRequestError) as bad:
            client.responses.create(model="helper-1", input="x", previous_response_id=first.id)
        assert bad.value.param == "previous_response_id"
        for wrong in ({"previous_response_id": 42}, {"store": "yes"}):
            answer = httpx.post(f"{server.url}/v1/responses", json={"model": "helper-1", "input": "x", **wrong})
            assert answer.status_code == 400 and answer.json()["error"]["param"] == next(iter(wrong))
        head = client.responses.create(model="helper-1", input="x")
        two: list[Any] = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
        with pytest.raises(openai.BadRequestError) as bad:  # the agent would only get the last message
            client.responses.create(model="helper-1", input=two, previous_response_id=head.id)
        assert bad.value.param == "input"
        client.responses.create(model="helper-1", input="y", instructions="Be brief.", previous_response_id=head.id)
        with pytest.raises(openai.BadRequestError) as bad:  # a session and a stored conversation at once
            client.responses.create(
                model="helper-1", input="y", previous_response_id=head.id, metadata={"session_id": "s"}
            )
        assert bad.value.param == "previous_response_id"


def test_an_unstored_pause_leaves_the_chain_as_it_was(served: Any) -> None:
    server, model = served
    with sdk(server) as client:
        first = client.responses.create(model="helper-1", input="one")
        off = client.responses.create(
            model="helper-1", input="the weather?", tools=[WEATHER], previous_response_id=first.id, store=False
        )
        assert off.output[0].type == "function_call"
        after = client.responses.create(model="helper-1", input="two", previous_response_id=first.id)
        assert after.output_text == "Answer: two" and seen(model) == [*chat("one"), ("user", "two")]


def test_another_tenant_cannot_see_or_continue_a_response() -> None:
    for server, model in _serve("sync", token=TOKENS):
        with sdk(server, TOKENS["alice"]) as alice, sdk(server, TOKENS["bob"]) as bob:
            mine = alice.responses.create(model="helper-1", input="secret")
            with pytest.raises(openai.NotFoundError):
                bob.responses.retrieve(mine.id)
            with pytest.raises(openai.NotFoundError):
                bob.responses.delete(mine.id)
            asked = len(model.requests)
            with pytest.raises(openai.BadRequestError) as bad:
                bob.responses.create(model="helper-1", input="tell me", previous_response_id=mine.id)
            assert bad.value.param == "previous_response_id" and len(model.requests) == asked
            assert alice.responses.retrieve(mine.id).output_text == "Answer: secret"
            alice.responses.create(model="helper-1", input="again", previous_response_id=mine.id)
            assert seen(model) == [*chat("secret"), ("user", "again")]


def test_the_oldest_stored_response_goes_first_with_its_session() -> None:
    for server, _ in _serve("async", limits=ServerLimits(max_stored_responses=2)):
        with sdk(server) as client:
            ids = [client.responses.create(model="helper-1", input=f"q{i}").id for i in range(3)]
            with pytest.raises(openai.NotFoundError):
                client.responses.retrieve(ids[0])
            assert [client.responses.retrieve(i).output_text for i in ids[1:]] == ["Answer: q1", "Answer: q2"]
            assert sessions(server) == 2  # the dropped response's conversation went with it


def test_the_bound_is_a_serve_flag() -> None:
    import argparse

    from plait.cli import add_server_limit_flags, server_limits

    parser = argparse.ArgumentParser()
    add_server_limit_flags(parser)
    assert server_limits(parser.parse_args(["--max-stored-responses", "3"])).max_stored_responses == 3
    assert server_limits(parser.parse_args([])).max_stored_responses == ServerLimits().max_stored_responses


def test_async_client_chain(served: Any) -> None:
    server, model = served

    async def run() -> None:
        async with openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0) as client:
            first = await client.responses.create(model="helper-1", input="one")
            stream = await client.responses.create(
                model="helper-1", input="two", previous_response_id=first.id, stream=True
            )
            final = [event async for event in stream][-1].response
            assert seen(model) == [*chat("one"), ("user", "two")]
            await client.responses.create(model="helper-1", input="three", previous_response_id=final.id)
            assert seen(model) == [*chat("one", "two"), ("user", "three")]
            assert (await client.responses.retrieve(final.id)).output_text == "Answer: two"
            await client.responses.delete(final.id)
            with pytest.raises(openai.NotFoundError):
                await client.responses.retrieve(final.id)

    asyncio.run(run())
