"""Tool calls written in a reply's text, through a real function-calling agent (issue 37, item 3).

A server without a tool parser for the model answers with the calls in ``content``. Each
format's markup comes from `FakeOpenAIServer` (a real HTTP server, JSON and SSE) to `GPTAPI` /
`AsyncGPTAPI` and the function-calling agents, sync and async from one body, streamed and not:
the call runs as a native one would, the text around it is the thought, the markup is never
shown (not in a streamed chunk, not in the answer) and a call to a tool that was not offered
never runs.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import pytest

from _support import collect, resolve
from plait.agents.function_calling import (
    AsyncFunctionCallingAgent,
    AsyncStreamingFunctionCallingAgent,
    FunctionCallingAgent,
    StreamingFunctionCallingAgent,
)
from plait.exceptions import UserError
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.schema import AgentMessage, AgentStatusCode
from plait.testing.fake_openai import FakeOpenAIServer, Reply

RAN: list[tuple[str, dict[str, object]]] = []
"""The tools' calls, in order: what really ran."""


def get_weather(city: str, days: int = 1) -> str:
    """The weather forecast.

    Args:
        city: the city
        days: how many days
    """
    RAN.append(("get_weather", {"city": city, "days": days}))
    return f"sunny in {city} for {days} day(s)"


def search(query: str) -> str:
    """Search the web.

    Args:
        query: what to look for
    """
    RAN.append(("search", {"query": query}))
    return f"results for {query}"


DS_CALLS, DS_CALLS_END = "<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581calls\u2581end\uff5c>"
DS_CALL, DS_CALL_END = "<\uff5ctool\u2581call\u2581begin\uff5c>", "<\uff5ctool\u2581call\u2581end\uff5c>"
DS_SEP = "<\uff5ctool\u2581sep\uff5c>"
MARKERS = ("<tool_call", "</tool_call", "<function", "<parameter", "<|", "[TOOL_CALLS", "[ARGS]", "\uff5c", '"name"')
"""Pieces of markup that must never reach what a user sees."""

PARIS = ("get_weather", {"city": "Paris", "days": 1})
PARIS_3 = ("get_weather", {"city": "Paris", "days": 3})

# (id, the reply's content, the tools that run, the thought left)
FORMATS: list[tuple[str, str, list[tuple[str, dict[str, object]]], str]] = [
    (
        "hermes",
        'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        [PARIS],
        "Let me check.",
    ),
    (
        "hermes-parallel",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>\n'
        '<tool_call>\n{"name": "search", "arguments": {"query": "Paris events"}}\n</tool_call>',
        [PARIS_3, ("search", {"query": "Paris events"})],
        "",
    ),
    (
        "qwen3-coder",
        "I'll check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        [PARIS_3],  # "3" typed by the tool's schema
        "I'll check.",
    ),
    (
        "internlm2",
        "I need the weather first.<|action_start|><|plugin|>\n"
        '{"name": "get_weather", "parameters": {"city": "Paris"}}<|action_end|>\n',
        [PARIS],
        "I need the weather first.",
    ),
    ("llama3-python-tag", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}', [PARIS], ""),
    ("llama3-bare-json", '{"name": "get_weather", "parameters": {"city": "Paris"}}', [PARIS], ""),
    ("mistral", '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]', [PARIS], ""),
    ("mistral-args", 'Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3}', [PARIS_3], "Sure."),
    (
        "deepseek-v3",
        f"Checking.{DS_CALLS}{DS_CALL}function{DS_SEP}get_weather\n```json\n"
        + '{"city": "Paris"}\n```'
        + f"{DS_CALL_END}{DS_CALLS_END}",
        [PARIS],
        "Checking.",
    ),
    (
        "deepseek-v3.1",
        f'{DS_CALLS}{DS_CALL}get_weather{DS_SEP}{{"city": "Paris"}}{DS_CALL_END}{DS_CALLS_END}',
        [PARIS],
        "",
    ),
    (
        "repaired-arguments",  # single quotes, a Python literal and a missing closing brace, at the end
        "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Paris', 'days': 3}</tool_call>",
        [PARIS_3],
        "",
    ),
]


@dataclass
class Run:
    answer: AgentMessage
    chunks: list[AgentMessage]
    requests: list[dict[str, Any]]
    agent: Any


def run(mode: str, streamed: bool, script: list[Any], chunk_size: int = 3, **kwargs: Any) -> Run:
    """Ask the agent of `mode` (streamed or not) about Paris, the server answering with `script`."""
    RAN.clear()
    classes = {
        ("sync", False): FunctionCallingAgent,
        ("async", False): AsyncFunctionCallingAgent,
        ("sync", True): StreamingFunctionCallingAgent,
        ("async", True): AsyncStreamingFunctionCallingAgent,
    }
    with FakeOpenAIServer(script, chunk_size=chunk_size) as server:
        llm = (GPTAPI if mode == "sync" else AsyncGPTAPI)(model_type="m", api_base=server.base_url, key="k", retry=0)
        kwargs.setdefault("actions", [get_weather, search])
        agent = classes[mode, streamed](llm, template="Use tools.", **kwargs)
        if streamed:
            chunks = collect(agent("What is the weather in Paris?"))
            assert [c.stream_state for c in chunks].count(AgentStatusCode.END) == 1
            answer, chunks = chunks[-1], chunks[:-1]
        else:
            answer, chunks = resolve(agent("What is the weather in Paris?")), []
        server.assert_done()
        return Run(answer, chunks, list(server.requests), agent)


def shows_no_markup(result: Run) -> None:
    """Nothing a user sees or the model's turns keep holds markup: chunks, the answer, the stored turns.

    (The observations that name what was wrong may name the tag, as ``<tool_call>: ...``.)
    """
    seen = [c.content for c in result.chunks] + [result.answer.content]
    memory = result.agent.state_dict()["memory"]
    seen += [m["content"] for m in memory if m["sender"] == result.agent.name and isinstance(m["content"], str)]
    for text in seen:
        assert not any(marker in text for marker in MARKERS), text


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(("content", "ran", "thought"), [c[1:] for c in FORMATS], ids=[c[0] for c in FORMATS])
def test_each_format_becomes_a_call_that_runs(
    mode: str, streamed: bool, content: str, ran: list[tuple[str, dict[str, object]]], thought: str
) -> None:
    result = run(mode, streamed, [Reply(content), Reply("It is sunny in Paris.")])
    assert ran == RAN
    assert result.answer.content == "It is sunny in Paris."
    second = result.requests[1]["messages"]
    turn = second[-1 - len(ran)]
    assert turn["role"] == "assistant" and (turn.get("content") or "") == thought
    calls = turn["tool_calls"]
    assert [c["function"]["name"] for c in calls] == [name for name, _ in ran]
    for call, (_, ran_with) in zip(calls, ran, strict=True):  # the arguments as written (a default left out)
        assert json.loads(call["function"]["arguments"]).items() <= ran_with.items()
    results = second[-len(ran) :]
    assert [m["role"] for m in results] == ["tool"] * len(ran)
    assert [m["tool_call_id"] for m in results] == [c["id"] for c in calls]
    assert all(len(c["id"]) == 9 and c["id"].isalnum() for c in calls)  # the ids Mistral's tokenizer takes
    shows_no_markup(result)
    if streamed and thought:  # the thought streamed before the calls ran
        assert thought in [c.content for c in result.chunks]


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_a_tool_that_was_not_offered_is_told_never_run(mode: str, streamed: bool) -> None:
    bad = 'Deleting.<tool_call>{"name": "rm_rf", "arguments": {"path": "/"}}</tool_call>'
    result = run(mode, streamed, [Reply(bad), Reply("I cannot do that.")])
    assert RAN == []
    assert result.answer.content == "I cannot do that."
    *_, turn, observation = result.requests[1]["messages"]
    assert turn == {"role": "assistant", "content": "Deleting."}
    assert observation["role"] == "user"
    assert "'rm_rf' is not an offered tool" in observation["content"] and "not run" in observation["content"]
    shows_no_markup(result)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_good_and_bad_calls_in_one_reply(mode: str, streamed: bool) -> None:
    """The good call runs; what was wrong with the other is told after its result (tool messages stay together)."""
    reply = (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'
        '<tool_call>{"name": "search", "arguments": ["not", "an", "object"]}</tool_call>'
    )
    result = run(mode, streamed, [Reply(reply), Reply("Sunny.")])
    assert RAN == [PARIS]
    *_, turn, tool, observation = result.requests[1]["messages"]
    assert [c["function"]["name"] for c in turn["tool_calls"]] == ["get_weather"]
    assert tool["role"] == "tool" and tool["tool_call_id"] == turn["tool_calls"][0]["id"]
    assert observation["role"] == "user" and "arguments of 'search' are a JSON array" in observation["content"]
    assert result.answer.content == "Sunny."


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_markup_in_the_final_turn_is_not_the_answer(mode: str, streamed: bool) -> None:
    """The last call of the budget (``tool_choice='none'``) answers with the thought; the call does not run."""
    reply = 'Paris is usually mild.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    result = run(mode, streamed, [Reply(reply)], max_turn=1)
    assert result.requests[0]["tool_choice"] == "none"
    assert RAN == []
    assert result.answer.content == "Paris is usually mild."
    shows_no_markup(result)


def test_streamed_markup_is_held_back_character_by_character(mode: str) -> None:
    """Fed one character at a time, no chunk shows any piece of the markup (not even ``<``), and chunks only grow."""
    reply = 'Let me check.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    result = run(mode, True, [Reply(reply), Reply("Sunny.")], chunk_size=1)
    assert RAN == [PARIS]
    first_turn = [c.content for c in result.chunks if c.content and not "Sunny.".startswith(c.content)]
    assert first_turn[-1] == "Let me check."
    assert all(b.startswith(a) for a, b in itertools.pairwise(first_turn))
    assert not any("<" in text for text in first_turn)


def test_native_calls_win_and_content_is_left_alone(mode: str) -> None:
    """A reply with native ``tool_calls`` is not read again from its text."""
    native = Reply("Checking.", tool_calls=[("search", {"query": "x"})])
    result = run(mode, False, [native, Reply("done")])
    assert RAN == [("search", {"query": "x"})]
    assert result.requests[1]["messages"][-2]["content"] == "Checking."


def test_without_tools_the_text_is_the_answer(mode: str) -> None:
    """No tool offered: there is no call to find, and the reply is the answer as it came."""
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    result = run(mode, False, [Reply(text)], actions=[])
    assert "tools" not in result.requests[0]
    assert result.answer.content == text


def test_formats_can_be_chosen_or_turned_off(mode: str) -> None:
    hermes = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    result = run(mode, False, [Reply(hermes)], text_call_formats=())
    assert RAN == [] and result.answer.content == hermes
    bare = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    result = run(mode, False, [Reply(bare)], text_call_formats=["hermes"])
    assert RAN == [] and result.answer.content == bare
    result = run(mode, False, [Reply(hermes), Reply("ok")], text_call_formats=["hermes"])
    assert RAN == [PARIS]


def test_an_unknown_format_name_fails_at_construction() -> None:
    with pytest.raises(UserError, match="did you mean 'hermes'"):
        FunctionCallingAgent(None, [get_weather], text_call_formats=["hermez"])
