"""Issue 17: the 'summarise' policy, pinned messages, a stable cut for the prompt cache, calibrated counts.

Scripted servers only: the summariser is recognised by its instructions and answers with a
numbered summary, every other request is echoed. The fake server counts a token per word,
which is what the policy's calibrated estimates learn from its usage.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from _support import collect, resolve
from plait.agents import Agent, AsyncAgent, AsyncSequential, AsyncStreamingAgent, Sequential, StreamingAgent
from plait.context import Calibration, ContextPolicy, estimate_tokens, split_request
from plait.context.summary import SUMMARY_HEADING
from plait.exceptions import ContextWindowExceeded, UserError
from plait.interceptors import intercept
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.memory import SessionStore
from plait.replay import record, replay
from plait.schema import AgentMessage
from plait.testing.fake_openai import FakeOpenAIServer, Reply
from plait.testing.llms import AsyncFunctionLLM, FunctionLLM

WINDOW, RESERVE = 700, 100
BUDGET = WINDOW - RESERVE


class Scripted:
    """Answers summarising requests with ``SUMMARY n`` (n counts them), echoes the others."""

    def __init__(self) -> None:
        self.summaries = itertools.count(1)

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if messages[0]["content"].startswith("You keep the running summary"):
            return Reply(f"SUMMARY {next(self.summaries)} of: {messages[1]['content'][-40:]}")
        return Reply(f"ok {len(messages)}")


def _words(body: dict[str, Any]) -> int:
    """The prompt tokens the fake server reports for a request (a token a word)."""
    return sum(len(str(m.get("content") or "").split()) for m in body["messages"])


def _is_summarising(body: dict[str, Any]) -> bool:
    return str(body["messages"][0]["content"]).startswith("You keep the running summary")


def _llm(mode: str, server: FakeOpenAIServer) -> Any:
    return (AsyncGPTAPI if mode == "async" else GPTAPI)(model_type="m", api_base=server.base_url, key="k", retry=0)


def _turn(n: int) -> str:
    return "abc " * 110 + f"turn {n}"  # four characters a word: the bare estimate is about right


def test_summarise_folds_old_turns_keeps_every_request_in_budget_and_stores_the_summary(mode: str) -> None:
    with FakeOpenAIServer(handler=Scripted()) as server:
        policy = ContextPolicy("summarise", context_window=WINDOW, reserve=RESERVE)
        agent = (AsyncAgent if mode == "async" else Agent)(
            _llm(mode, server), template="be brief", context_policy=policy
        )
        for n in range(12):
            resolve(agent(_turn(n), session_id="s"))
        requests = server.requests
    answers = [body for body in requests if not _is_summarising(body)]
    assert len(answers) == 12 and all(_words(body) <= BUDGET for body in answers)
    last = answers[-1]["messages"]
    # the system prompt first, then the summary (the OpenAI client merges adjacent system messages)
    assert last[0]["role"] == "system" and last[0]["content"].startswith(f"be brief\n{SUMMARY_HEADING}\nSUMMARY ")
    assert last[-1]["content"].endswith("turn 11") and "turn 0" not in str(last)
    folds = policy.summarised["s"]
    assert 1 <= folds <= 4  # headroom: not a summary every turn (each fold may take a few requests)
    state = agent.state_dict("s")
    assert len(state["memory"]) == 24  # every message is still stored
    summaries = len(requests) - len(answers)
    assert state["summary"]["text"].startswith(f"SUMMARY {summaries} ") and state["summary"]["covers"] > 0


def test_a_streaming_agent_summarises_the_same_way(mode: str) -> None:
    with FakeOpenAIServer(handler=Scripted()) as server:
        cls = AsyncStreamingAgent if mode == "async" else StreamingAgent
        agent = cls(
            _llm(mode, server), context_policy=ContextPolicy("summarise", context_window=WINDOW, reserve=RESERVE)
        )
        for n in range(8):
            chunks = resolve(collect(agent(_turn(n), session_id="s")))
            assert chunks[-1].content.startswith("ok")
        answers = [body for body in server.requests if not _is_summarising(body)]
    assert all(_words(body) <= BUDGET for body in answers) and SUMMARY_HEADING in str(answers[-1]["messages"])


def test_the_summary_survives_a_save_and_load(tmp_path: Path) -> None:
    with FakeOpenAIServer(handler=Scripted()) as server:
        agent = Agent(_llm("sync", server), context_policy="summarise")
        agent.context_policy.context_window, agent.context_policy.reserve = WINDOW, RESERVE
        for n in range(6):
            agent(_turn(n))
        agent.save_state(tmp_path / "s.json")
        folds = sum(map(_is_summarising, server.requests))
        assert folds >= 1
        again = Agent(_llm("sync", server), context_policy=ContextPolicy("summarise", WINDOW, RESERVE))
        again.load_state(tmp_path / "s.json")
        assert again.state_dict() == agent.state_dict()
        again(_turn(6))
        assert sum(map(_is_summarising, server.requests)) == folds  # the loaded summary was used as it was
        assert SUMMARY_HEADING in str(server.requests[-1]["messages"])


def test_the_summary_survives_a_session_store_restart(tmp_path: Path) -> None:
    with FakeOpenAIServer(handler=Scripted()) as server:
        with SessionStore(tmp_path / "s.db") as store:
            agent = store.attach(
                Agent(_llm("sync", server), context_policy=ContextPolicy("summarise", WINDOW, RESERVE))
            )
            for n in range(6):
                agent(_turn(n), session_id="u")
            summary = agent.memory.get("u").summary
            assert summary is not None
        folds = sum(map(_is_summarising, server.requests))
        with SessionStore(tmp_path / "s.db") as store:
            again = store.attach(
                Agent(_llm("sync", server), context_policy=ContextPolicy("summarise", WINDOW, RESERVE))
            )
            assert again.memory.get("u").summary == summary
            again(_turn(6), session_id="u")
        assert sum(map(_is_summarising, server.requests)) == folds
        assert any(summary.text in m["content"] for m in server.requests[-1]["messages"])
        with SessionStore(tmp_path / "s.db") as store:  # a reset forgets the stored summary too
            store.attach(again).reset("u")
            store.flush()
            assert store.read_summary("memory", "u") is None


def test_a_recorded_run_with_summaries_replays_without_the_server(tmp_path: Path) -> None:
    def build(server_url: str) -> Agent:
        llm = GPTAPI(model_type="m", api_base=server_url, key="k", retry=0)
        return Agent(llm, context_policy=ContextPolicy("summarise", WINDOW, RESERVE))

    with FakeOpenAIServer(handler=Scripted()) as server:
        agent = build(server.base_url)
        with record(agent, tmp_path / "run.jsonl"):
            replies = [agent(_turn(n)).content for n in range(6)]
        url = server.base_url
    assert any(map(_is_summarising, server.requests))
    again = build(url)  # the server is gone: every model call, summaries included, comes from the log
    with replay(again, tmp_path / "run.jsonl") as log:
        assert [again(_turn(n)).content for n in range(6)] == replies
    assert log.unused() == 0 and again.state_dict() == agent.state_dict()


@pytest.mark.parametrize("policy", ["trim", "summarise"])
def test_pinned_and_system_messages_are_always_sent(mode: str, policy: str) -> None:
    with FakeOpenAIServer(handler=Scripted()) as server:
        agent = (AsyncAgent if mode == "async" else Agent)(
            _llm(mode, server),
            template="sys",
            context_policy=ContextPolicy(policy, WINDOW, RESERVE),  # type: ignore[arg-type]
        )
        pinned = AgentMessage(sender="user", content="My name is Ada.", extra_info={"pinned": True})
        agent.memory.add([pinned, AgentMessage(sender=agent.name, content="Noted.")], "p")
        for n in range(10):
            resolve(agent(_turn(n), session_id="p"))
        answers = [body for body in server.requests if not _is_summarising(body)]
    assert all(_words(body) <= BUDGET for body in answers)
    assert all(body["messages"][0]["content"].startswith("sys") for body in answers)
    assert all("My name is Ada." in [m["content"] for m in body["messages"]] for body in answers)
    assert "turn 0" not in str(answers[-1]["messages"])


def test_a_trim_keeps_cutting_at_the_same_place_so_the_prompt_cache_keeps_working() -> None:
    with FakeOpenAIServer(handler=Scripted()) as server:
        policy = ContextPolicy("trim", context_window=1000, reserve=100)
        agent = Agent(_llm("sync", server), context_policy=policy)
        for n in range(20):
            agent(_turn(n))
        firsts = [body["messages"][0]["content"] for body in server.requests]
    trimmed = [first for first in firsts if not first.endswith("turn 0")]
    assert all(first.startswith("abc") for first in firsts)  # whole turns are left out: a question comes first
    # each new cut is kept for the following turns: far fewer distinct request starts than trimmed requests
    assert len(trimmed) >= 8 and len(set(trimmed)) <= len(trimmed) // 2
    assert policy.trimmed[0] == len(trimmed)
    agent.reset()
    assert 0 not in policy.trimmed and 0 not in policy.last  # a reset forgets the session's cut


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_composed_request_never_splits_tool_rounds_and_keeps_pins(data: st.DataObject) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s"}]
    for turn in range(data.draw(st.integers(0, 8))):
        messages.append({"role": "user", "content": f"u{turn}"})
        for _ in range(data.draw(st.integers(0, 2))):
            ids = [f"c{turn}-{len(messages)}-{i}" for i in range(data.draw(st.integers(1, 3)))]
            messages.append({"role": "assistant", "content": "", "tool_calls": [{"id": i} for i in ids]})
            messages += [{"role": "tool", "tool_call_id": i, "content": "r"} for i in ids]
        messages.append({"role": "assistant", "content": f"a{turn}"})
    messages.append({"role": "user", "content": "now"})
    pins = {m["content"] for m in messages if m["role"] == "user" and data.draw(st.booleans())} - {"now"}
    request = split_request(messages, pins)
    dropped = data.draw(st.integers(0, len(request.older)))
    summary = {"role": "system", "content": "summary"} if data.draw(st.booleans()) else None
    sent = request.compose(dropped, summary)
    assert sent[0] == messages[0] and sent[-1] == messages[-1]
    assert all(pin in [m["content"] for m in sent] for pin in pins)
    for i, message in enumerate(sent):
        if message["role"] == "tool":
            caller = next(m for m in reversed(sent[:i]) if m["role"] != "tool")
            assert message["tool_call_id"] in {c["id"] for c in caller["tool_calls"]}
        if message.get("tool_calls"):
            assert {m.get("tool_call_id") for m in sent[i + 1 : i + 1 + len(message["tool_calls"])]} == {
                c["id"] for c in message["tool_calls"]
            }


def test_calibrated_counts_follow_what_the_server_reports() -> None:
    """A conversation whose text the bare estimate gets wrong by 2x is counted within a few tokens after one reply."""

    def truth(messages: list[dict[str, str]]) -> int:  # a tokenizer that splits every two characters
        return sum(3 + len(m["content"]) // 2 for m in messages)

    calibration = Calibration()
    history: list[dict[str, str]] = []
    errors = []
    for turn in range(20):
        history = [*history, {"role": "user", "content": f"question {turn} " + "ab" * (50 + 7 * turn)}]
        if turn:
            errors.append(abs(calibration.count("s", "m", history) - truth(history)) / truth(history))
        calibration.observe("s", "m", history, truth(history))
        history = [*history, {"role": "assistant", "content": "cd" * (30 + turn)}]
    assert max(errors[3:]) < 0.05 and 1.5 < calibration.ratio < 2.5


def _sized(mode: str, window: int, sent: list[list[dict[str, Any]]]) -> Any:
    """A model that tells its context size and records what it was sent."""

    def reply(messages: list[dict[str, Any]], params: Any) -> str:
        sent.append(messages)
        return "ok"

    llm = (AsyncFunctionLLM if mode == "async" else FunctionLLM)(reply, max_new_tokens=50)
    llm.context_window = window
    return llm


def test_by_default_an_agent_trims_for_a_model_that_knows_its_size_wherever_it_runs(mode: str) -> None:
    sent: list[list[dict[str, Any]]] = []
    member = (AsyncAgent if mode == "async" else Agent)(_sized(mode, 600, sent), name="member")
    pipeline = (AsyncSequential if mode == "async" else Sequential)(member)
    for n in range(10):
        resolve(pipeline(_turn(n)))
    assert len(sent) == 10 and all(estimate_tokens(messages) <= 550 for messages in sent)
    assert "turn 0" not in str(sent[-1]) and len(member.memory.get_memory()) == 20


def test_by_default_a_model_of_unknown_size_is_left_alone_and_asked_once(mode: str) -> None:
    with FakeOpenAIServer(handler=Scripted()) as server:
        agent = (AsyncAgent if mode == "async" else Agent)(_llm(mode, server))
        for n in range(12):
            resolve(agent(_turn(n)))
        assert len(server.requests[-1]["messages"]) == 23 and len(server.model_listings) == 1


def test_an_agents_own_policy_is_not_doubled_by_one_around_it_and_none_opts_out() -> None:
    shaped: list[list[dict[str, Any]]] = []
    own = Agent(_sized("sync", 600, shaped), name="own", context_policy="trim")
    bare = Agent(_sized("sync", 600, []), name="bare", context_policy=None)
    default = Agent(_sized("sync", 600, []), name="default")  # "auto": a policy around it applies too
    around = ContextPolicy("error", context_window=600, reserve=50)
    with intercept(own, around):  # the agent's own policy decides: it trims, the outer one never refuses
        for n in range(10):
            own(_turn(n))
    assert all(estimate_tokens(messages) <= 550 for messages in shaped) and "turn 0" not in str(shaped[-1])
    with intercept(bare, around), pytest.raises(ContextWindowExceeded):  # no policy of its own: the outer one
        for n in range(10):
            bare(_turn(n))
    assert len(bare.memory.get_memory()) in range(4, 20, 2)
    with intercept(default, around), pytest.raises(ContextWindowExceeded):
        for n in range(10):
            default(_turn(n))


def test_a_policy_from_a_config_dict_as_the_seeds_write_components() -> None:
    summariser = _sized("sync", 600, [])
    agent = Agent(
        _sized("sync", 600, []),
        context_policy={"type": "plait.context.ContextPolicy", "policy": "summarise", "summariser": summariser},
    )
    assert agent.context_policy is not None and agent.context_policy.policy == "summarise"
    assert agent.context_policy.summariser is summariser and agent.context_policy.owned
    with pytest.raises(UserError, match="context_policy must be"):
        Agent(summariser, context_policy={"type": "plait.memory.Memory"})


@pytest.mark.parametrize("policy", ["trim", "summarise"])
def test_a_tool_using_agent_under_each_policy_sends_whole_tool_rounds(mode: str, policy: str) -> None:
    from plait.actions import Calculator
    from plait.agents import AsyncFunctionCallingAgent, FunctionCallingAgent

    def reply(body: dict[str, Any]) -> Reply:
        if _is_summarising(body):
            return Reply("SUMMARY")
        if body["messages"][-1]["role"] == "tool":
            return Reply("done")
        return Reply("", tool_calls=[("Calculator", {"expression": "6*7"})])

    with FakeOpenAIServer(handler=reply) as server:
        cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
        agent = cls(_llm(mode, server), [Calculator()], context_policy=ContextPolicy(policy, WINDOW, RESERVE))  # type: ignore[arg-type]
        for n in range(8):
            assert resolve(agent(_turn(n), session_id="t")).content == "done"
        answers = [body for body in server.requests if not _is_summarising(body)]
    assert all(_words(body) <= BUDGET for body in answers) and "turn 0" not in str(answers[-1]["messages"])
    for body in answers:
        messages = body["messages"]
        for i, message in enumerate(messages):
            if message["role"] == "tool":  # every result right after the call that asked for it
                assert messages[i - 1]["role"] == "assistant" and messages[i - 1]["tool_calls"]
        assert messages[-1]["role"] in ("user", "tool")
