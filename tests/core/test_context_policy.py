"""`ContextPolicy` keeps requests within the context window (issue 17, first stage): trim without ever
splitting a tool call from its results, or refuse before sending; the stored history is never changed."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from _support import resolve
from plait.actions import BaseAction, Calculator, tool_api
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
                resolve(agent("word " * 120 + f"turn {turn}", session_id="long"))
        sent = server.requests[-1]["messages"]
        assert sent[0] == {"role": "system", "content": "be brief"} and sent[-1]["content"].endswith("turn 7")
        # what the server counts (a token a word: its usage calibrates the policy's estimates) always fits
        assert all(sum(len(m["content"].split()) for m in body["messages"]) <= 600 for body in server.requests)
        assert len(sent) < 16
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


@pytest.mark.parametrize("seed", [0])
def test_the_embedded_models_count_is_llama_cpps_own(seed: int) -> None:
    """`LlamaCppModel.count_tokens` equals the prompt tokens llama.cpp reports, for 20 random histories."""
    import random

    from plait.llms import LlamaCppModel

    rng = random.Random(seed)
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "a",
        "lazy",
        "dog,",
        "42",
        "times!",
        "Ünïcode",
        "ok?",
        "数字",
    ]
    llm = LlamaCppModel(temperature=0, max_new_tokens=1, n_ctx=2048)
    for _ in range(20):
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": " ".join(rng.choices(words, k=rng.randint(0, 6)))}
        ]
        for _ in range(rng.randint(1, 3)):
            messages.append({"role": "user", "content": " ".join(rng.choices(words, k=rng.randint(1, 15)))})
            messages.append({"role": "assistant", "content": " ".join(rng.choices(words, k=rng.randint(1, 15)))})
        messages.append({"role": "user", "content": " ".join(rng.choices(words, k=rng.randint(1, 20)))})
        reported = llm.complete(messages).usage
        assert reported is not None and llm.count_tokens(messages) == reported.prompt_tokens
    assert llm.context_window == 2048
    llm.close()


def test_a_long_chat_on_the_embedded_model_runs_under_trim_and_refuses_under_error() -> None:
    from plait.llms import LlamaCppModel

    llm = LlamaCppModel(temperature=0, max_new_tokens=4, n_ctx=512)
    agent = Agent(llm)
    turn = "Here is some context about the history of Rome and its emperors. " * 4  # ~60 tokens
    with intercept(agent, ContextPolicy("trim", reserve=8)):
        for n in range(10):  # ~700 tokens of history: more than the context
            agent(f"{turn} Question {n}: who was first?", session_id="trim")
    assert len(agent.memory.get_memory("trim")) == 20
    refusing = Agent(llm)
    with intercept(refusing, ContextPolicy("error", reserve=8)):
        with pytest.raises(ContextWindowExceeded):
            for n in range(10):
                refusing(f"{turn} Question {n}: who was first?", session_id="error")
        stored = len(refusing.memory.get_memory("error"))
        refusing.reset("error")
        refusing("Short question?", session_id="error")  # usable again after a reset
    assert stored % 2 == 0 and stored < 20
    llm.close()


def test_a_long_chat_on_the_embedded_model_runs_under_summarise() -> None:
    """The model summarises its own older turns; every request fits, counted by llama.cpp itself."""
    from plait.llms import LlamaCppModel

    llm = LlamaCppModel(temperature=0, max_new_tokens=4, n_ctx=768)
    policy = ContextPolicy("summarise", reserve=8, summary_tokens=24)
    agent = Agent(llm, context_policy=policy)
    turn = "Here is some context about the history of Rome and its emperors. " * 4  # ~60 tokens
    sent: list[tuple[int, int, int]] = []
    for n in range(14):  # ~1,000 tokens of history: more than the context
        agent(f"{turn} Question {n}: who was first?")
        sent.append(policy.last[0])  # (tokens sent as llama.cpp counts them, budget, context window)
    assert policy.summarised[0] >= 1 and agent.memory.get(0).summary is not None
    assert len(agent.memory.get_memory()) == 28 and all(used <= budget == 768 - 8 for used, budget, _ in sent)
    assert sent[-1][0] < 14 * 60  # not the whole history
    llm.close()


def test_a_tool_result_too_long_for_the_context_is_cut_and_says_so() -> None:
    from plait.context import shorten_tool_results

    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "read the file"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1"}, {"id": "2"}]},
        {"role": "tool", "tool_call_id": "1", "content": "A" * 20_000},
        {"role": "tool", "tool_call_id": "2", "content": "short"},
    ]
    fitted = shorten_tool_results(messages, 1000)
    assert estimate_tokens(fitted) <= 1000 and fitted[4]["content"] == "short"  # the short one is untouched
    cut = str(fitted[3]["content"])
    assert cut.startswith("A" * 200) and cut.endswith("of 20000 characters cut to fit the context]")
    assert messages[3]["content"] == "A" * 20_000  # the caller's (stored) messages are not changed

    class Reader(BaseAction):
        @tool_api
        def run(self, path: str) -> str:
            """Read a file.

            Args:
                path (str): the file
            """
            return "B" * 20_000

    script = [Reply("", tool_calls=[("Reader", {"path": "big.txt"})]), Reply("a big file")]
    with FakeOpenAIServer(script) as server:
        llm = GPTAPI(model_type="m", api_base=server.base_url, key="k", retry=0)
        agent = FunctionCallingAgent(llm, [Reader()], context_policy=ContextPolicy("trim", 800, 100))
        assert agent("read big.txt").content == "a big file"
        tool_message = server.requests[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and "characters cut to fit the context]" in tool_message["content"]


def _thinking_call(thought: str) -> dict[str, Any]:
    """A DeepSeek thinking-mode completion that calls the Calculator (its documented ``reasoning_content``)."""
    function = {"name": "Calculator", "arguments": '{"expression": "6*7"}'}
    call = {"id": "call_1", "type": "function", "function": function}
    message = {"role": "assistant", "content": "", "reasoning_content": thought, "tool_calls": [call]}
    return {
        "id": "r1",
        "object": "chat.completion",
        "created": 0,
        "model": "deepseek-reasoner",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


def test_reasoning_sent_back_is_counted_and_given_up_before_any_turn() -> None:
    """A model that is sent reasoning back (DeepSeek): it counts, and older turns lose it before any turn is dropped."""
    thought = "I will multiply six by seven with the calculator. " * 60  # ~3,000 characters: ~750 tokens
    script = [_thinking_call(thought), Reply("42"), Reply("you asked for 6*7")]
    with FakeOpenAIServer(script) as server:
        llm = GPTAPI(model_type="deepseek-reasoner", api_base=server.base_url, key="k", retry=0)
        assert llm.profile.reasoning_replay == "field"
        agent = FunctionCallingAgent(llm, [Calculator()])
        agent("what is 6*7?")
        with intercept(agent, ContextPolicy("trim", context_window=500, reserve=100)):
            agent("what did I ask?")
        last = server.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant", "user"]  # every turn kept
    assert "reasoning_content" not in last[1] and thought not in str(last)  # the old turn's reasoning given up


def test_reasoning_the_model_is_not_sent_does_not_count() -> None:
    """A model whose profile drops reasoning (the default): a long stored thought costs nothing and trims nothing."""
    thought = "Let me think about this carefully. " * 90  # ~3,000 characters, never sent
    script = [_thinking_call(thought), Reply("42"), Reply("you asked for 6*7")]
    with FakeOpenAIServer(script) as server:
        llm = GPTAPI(model_type="qwen3-8b", api_base=server.base_url, key="k", retry=0)
        agent = FunctionCallingAgent(llm, [Calculator()])
        agent("what is 6*7?")
        assert agent.memory.get_memory(0)[1].reasoning is not None  # kept with the turn
        policy = ContextPolicy("trim", context_window=500, reserve=100)
        with intercept(agent, policy):
            agent("what did I ask?")
        last = server.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant", "user"]
    assert policy.trimmed.get(0, 0) == 0
