"""`ContextPolicy` keeps requests within the context window (issue 17, first stage): trim without ever
splitting a tool call from its results, or refuse before sending; the stored history is never changed."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from _support import resolve
from plait.actions import Calculator
from plait.agents import Agent, AsyncAgent, FunctionCallingAgent
from plait.context import ContextPolicy, estimate_tokens, message_groups, trim_messages
from plait.exceptions import ContextWindowExceeded
from plait.interceptors import intercept
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.testing.fake_openai import FakeOpenAIServer, Reply


def _turns(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A random history: system messages, then user turns, some with tool rounds, then a current turn."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s" * draw(st.integers(0, 80))}]
    for turn in range(draw(st.integers(0, 8))):
        messages.append({"role": "user", "content": "u" * draw(st.integers(1, 120))})
        for _ in range(draw(st.integers(0, 2))):
            calls = [{"id": f"c{turn}{i}", "type": "function"} for i in range(draw(st.integers(1, 3)))]
            messages.append({"role": "assistant", "content": "", "tool_calls": calls})
            messages += [
                {"role": "tool", "tool_call_id": c["id"], "content": "r" * draw(st.integers(1, 60))} for c in calls
            ]
        messages.append({"role": "assistant", "content": "a" * draw(st.integers(1, 120))})
    messages.append({"role": "user", "content": "now " * draw(st.integers(1, 20))})
    if draw(st.booleans()):  # the current turn is in a tool round already
        messages.append({"role": "assistant", "content": "", "tool_calls": [{"id": "now", "type": "function"}]})
        messages.append({"role": "tool", "tool_call_id": "now", "content": "result"})
    return messages


histories = st.composite(_turns)


@settings(max_examples=500, deadline=None)
@given(histories(), st.integers(0, 600))
def test_a_trim_never_splits_a_tool_call_from_its_results(messages: list[dict[str, Any]], budget: int) -> None:
    fitted = trim_messages(messages, budget)
    assert fitted[0] == messages[0]  # the system message
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    assert fitted[-(len(messages) - last_user) :] == messages[last_user:]  # the current turn, whole
    for i, message in enumerate(fitted):  # every tool result follows the call that asked for it
        if message["role"] == "tool":
            caller = next(m for m in reversed(fitted[:i]) if m["role"] != "tool")
            assert caller["role"] == "assistant" and message["tool_call_id"] in {c["id"] for c in caller["tool_calls"]}
        if message.get("tool_calls"):
            answered = {m["tool_call_id"] for m in fitted[i + 1 : i + 1 + len(message["tool_calls"])]}
            assert answered == {c["id"] for c in message["tool_calls"]}
    position = {id(m): i for i, m in enumerate(messages)}  # the same objects, in their order
    assert all(id(m) in position for m in fitted)
    assert [position[id(m)] for m in fitted] == sorted(position[id(m)] for m in fitted)
    pinned = estimate_tokens(messages[:1] + messages[last_user:])
    assert estimate_tokens(fitted) <= max(budget, pinned)  # within budget whenever the pinned part fits


def test_groups_keep_a_tool_round_together() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1"}, {"id": "2"}]},
        {"role": "tool", "tool_call_id": "1", "content": "a"},
        {"role": "tool", "tool_call_id": "2", "content": "b"},
        {"role": "assistant", "content": "done"},
    ]
    assert [len(g) for g in message_groups(messages)] == [1, 3, 1]


def echo(body: dict[str, Any]) -> Reply:
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return Reply(f"seen {len(users)} user messages")


def test_trim_sends_what_fits_and_keeps_the_whole_history(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="plait.context")
    with FakeOpenAIServer(handler=echo) as server:
        llm = (AsyncGPTAPI if mode == "async" else GPTAPI)(model_type="m", api_base=server.base_url, key="k", retry=0)
        agent = (AsyncAgent if mode == "async" else Agent)(llm, template="be brief")
        policy = ContextPolicy("trim", context_window=700, reserve=100)
        with intercept(agent, policy):
            for turn in range(8):
                resolve(agent("x" * 600 + f" turn {turn}", session_id="long"))
        sent = server.requests[-1]["messages"]
        assert estimate_tokens(sent) <= 600 and sent[0] == {"role": "system", "content": "be brief"}
        assert sent[-1]["content"].endswith("turn 7")
        assert all(estimate_tokens(body["messages"]) <= 600 for body in server.requests)
    assert len(agent.memory.get_memory("long")) == 16  # nothing left out of what is stored
    assert policy.trimmed["long"] >= 1
    assert [r.getMessage() for r in caplog.records].count(  # one notice per session, not one per request
        next(r.getMessage() for r in caplog.records if "left out" in r.getMessage())
    ) == 1


def test_error_refuses_before_sending_and_the_session_stays_usable(mode: str) -> None:
    with FakeOpenAIServer(handler=echo) as server:
        llm = (AsyncGPTAPI if mode == "async" else GPTAPI)(model_type="m", api_base=server.base_url, key="k", retry=0)
        agent = (AsyncAgent if mode == "async" else Agent)(llm)
        with intercept(agent, ContextPolicy("error", context_window=300, reserve=100)):
            resolve(agent("short", session_id="s"))
            with pytest.raises(ContextWindowExceeded) as info:
                resolve(agent("y" * 2000, session_id="s"))
            assert len(server.requests) == 1  # the oversized request was never sent
            assert info.value.budget == 200 and info.value.tokens > 200 and "context window 300" in str(info.value)
            assert len(agent.memory.get_memory("s")) == 2  # the failed turn rolled back
            assert resolve(agent("short again", session_id="s")).content == "seen 2 user messages"


def test_a_tool_using_agent_keeps_its_current_tool_round() -> None:
    script = [Reply("first answer"), Reply("", tool_calls=[("Calculator", {"expression": "6*7"})]), Reply("42")]
    with FakeOpenAIServer(script) as server:
        llm = GPTAPI(model_type="m", api_base=server.base_url, key="k", retry=0)
        agent = FunctionCallingAgent(llm, [Calculator()])
        agent("z" * 900)  # a long first turn (no policy yet)
        with intercept(agent, ContextPolicy("trim", context_window=250, reserve=50)):
            agent("what is 6*7?")
        last = server.requests[-1]["messages"]
    roles = [m["role"] for m in last]
    assert roles[-3:] == ["user", "assistant", "tool"] and "z" * 900 not in str(last)  # old turn out, tool round in
