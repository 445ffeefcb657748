"""Issue 36 item 4: a typed answer cut at the token limit says so, for every paradigm with typed outputs.

The OpenAI-compatible client against a scripted `FakeOpenAIServer` that answers with
``finish_reason='length'``; sync and async from one body (the `mode` fixture). The embedded
engine's side (the repetition guard, retries that differ) is in tests/llms/test_llama_typed_retry.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from _support import collect, resolve
from plait.agents import (
    Agent,
    AsyncAgent,
    AsyncFunctionCallingAgent,
    AsyncStreamingAgent,
    FunctionCallingAgent,
    StreamingAgent,
)
from plait.agents.react import AsyncReAct, ReAct
from plait.exceptions import OutputValidationError
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.testing.fake_openai import FakeOpenAIServer, Reply


class Sentiment(BaseModel):
    label: str
    keywords: list[str]


CUT = '{"label": "positive", "keywords": ["delightful", "delightful", "delightful", "deli'
VALID = '{"label": "positive", "keywords": ["delightful"]}'


def _llm(mode: str, server: FakeOpenAIServer, **kwargs: Any) -> Any:
    cls = AsyncGPTAPI if mode == "async" else GPTAPI
    return cls(model_type="m", api_base=server.base_url, key="k", retry=0, **kwargs)


def _cut(body: object) -> Reply:
    return Reply(CUT, finish_reason="length")


def _assert_cut(error: OutputValidationError, limit: int) -> None:
    assert error.finish_reason == "length"
    assert error.errors[0].startswith(f"(reply): the reply was cut at max_new_tokens={limit} before its JSON ended")
    assert f"cut at max_new_tokens={limit}" in str(error)


def test_an_agent_says_its_typed_answer_was_cut_at_the_token_limit(mode: str) -> None:
    with FakeOpenAIServer(handler=_cut) as server:
        agent = (AsyncAgent if mode == "async" else Agent)(
            _llm(mode, server, max_new_tokens=64), output_type=Sentiment, output_retries=1
        )
        with pytest.raises(OutputValidationError) as caught:
            resolve(agent("How was the film?", session_id="s"))
        _first, second = server.requests
    _assert_cut(caught.value, 64)
    told = second["messages"][-1]["content"]  # the model is told why too
    assert "cut at max_new_tokens=64" in told


def test_the_limit_named_is_the_one_the_call_asked_for(mode: str) -> None:
    with FakeOpenAIServer(handler=_cut) as server:
        agent = (AsyncAgent if mode == "async" else Agent)(_llm(mode, server), output_type=Sentiment, output_retries=0)
        with pytest.raises(OutputValidationError) as caught:
            resolve(agent("How was the film?", max_new_tokens=32))
    _assert_cut(caught.value, 32)


def test_a_reply_that_ended_on_its_own_says_nothing_of_a_limit(mode: str) -> None:
    with FakeOpenAIServer(handler=lambda body: Reply('{"label": 1}')) as server:
        agent = (AsyncAgent if mode == "async" else Agent)(_llm(mode, server), output_type=Sentiment, output_retries=0)
        with pytest.raises(OutputValidationError) as caught:
            resolve(agent("How was the film?"))
    assert caught.value.finish_reason is None
    assert not any("cut" in line for line in caught.value.errors)


def test_a_function_calling_agent_says_so_too_and_its_reply_carries_the_finish_reason(mode: str) -> None:
    cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
    with FakeOpenAIServer(handler=_cut) as server:
        agent = cls(_llm(mode, server, max_new_tokens=48), [], output_type=Sentiment, output_retries=1)
        with pytest.raises(OutputValidationError) as caught:
            resolve(agent("How was the film?", session_id="s"))
        assert len(server.requests) == 2
    _assert_cut(caught.value, 48)
    with FakeOpenAIServer([Reply("It was delightful, deli", finish_reason="length")]) as server:
        reply = resolve(cls(_llm(mode, server), [])("How was the film?"))
    assert reply.extra_info["finish_reason"] == "length"  # carried where the reply message is built


def test_a_reply_that_ended_on_its_own_carries_no_finish_reason(mode: str) -> None:
    cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
    with FakeOpenAIServer([Reply("It was delightful.")]) as server:
        reply = resolve(cls(_llm(mode, server), [])("How was the film?"))
    assert set(reply.extra_info) == {"usage"}  # unchanged: what memory and the exported trajectories hold


def test_react_says_so_in_its_correction_turn(mode: str) -> None:
    replies = [Reply(f"Thought: done.\nFinal Answer: {CUT}", finish_reason="length"), _cut(None)]
    with FakeOpenAIServer(replies) as server:
        llm = _llm(mode, server, max_new_tokens=40)
        agent = (AsyncReAct if mode == "async" else ReAct)(llm, [], output_type=Sentiment, output_retries=1)
        with pytest.raises(OutputValidationError) as caught:
            resolve(agent("How was the film?", session_id="s"))
    _assert_cut(caught.value, 40)


def test_internlm_agents_say_so_in_their_inner_agents_correction(mode: str) -> None:
    from plait.agents import AgentForInternLM, AsyncAgentForInternLM

    with FakeOpenAIServer(handler=_cut) as server:
        llm = _llm(mode, server, max_new_tokens=56)
        agent = (AsyncAgentForInternLM if mode == "async" else AgentForInternLM)(
            llm, output_type=Sentiment, output_retries=1
        )
        assert agent.answer_llm() is agent.agent.llm  # the inner agent's model takes the corrections
        with pytest.raises(OutputValidationError) as caught:
            resolve(agent("How was the film?", session_id="s"))
    _assert_cut(caught.value, 56)


@pytest.mark.parametrize("streaming", [StreamingAgent, AsyncStreamingAgent])
def test_a_streaming_agent_says_so_too(fake_server: Any, streaming: Any) -> None:
    server = fake_server(handler=_cut, chunk_size=16)
    llm = (AsyncGPTAPI if streaming is AsyncStreamingAgent else GPTAPI)(
        model_type="m", api_base=server.base_url, key="k", retry=0, max_new_tokens=24
    )
    with pytest.raises(OutputValidationError) as caught:
        collect(streaming(llm, output_type=Sentiment, output_retries=1)("How was the film?"))
    _assert_cut(caught.value, 24)
