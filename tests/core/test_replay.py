"""Record a run, replay it offline: same replies, no model call, no tool side effect."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from _support import collect, resolve
from plait.actions import BaseAction, tool_api
from plait.agents import Agent, AsyncAgent
from plait.agents.function_calling import (
    AsyncFunctionCallingAgent,
    AsyncStreamingFunctionCallingAgent,
    FunctionCallingAgent,
    StreamingFunctionCallingAgent,
)
from plait.exceptions import ReplayMismatchError, ScriptError, UserError
from plait.llms.response import ModelResponse, ToolCall
from plait.replay import record, replay
from plait.testing import AsyncFunctionLLM, FunctionLLM, scripted_llm


class Ledger(BaseAction):
    """Adds to a ledger (a side effect a replay must not repeat)."""

    entries: ClassVar[list[int]] = []

    @tool_api
    def add(self, amount: int) -> str:
        """Add an amount.

        Args:
            amount: How much.
        """
        self.entries.append(amount)
        return f"total {sum(self.entries)}"


def tool_call(amount: int, call_id: str = "c1") -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall(call_id, "Ledger__add", json.dumps({"amount": amount}))])


def ledger_agent(mode: str, script: list[Any], streaming: bool = False) -> FunctionCallingAgent:
    if streaming:
        cls: Any = AsyncStreamingFunctionCallingAgent if mode == "async" else StreamingFunctionCallingAgent
    else:
        cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
    return cls(scripted_llm(script, mode), [Ledger()], "Keep the ledger.")  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _clean_ledger() -> None:
    Ledger.entries.clear()


def test_a_replayed_run_gives_the_same_answer_without_model_or_tools(mode: str, tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    agent = ledger_agent(mode, [tool_call(5), "Booked 5; the total is 5."])
    with record(agent, log):
        first = resolve(agent("Book 5.", session_id="s"))
    assert Ledger.entries == [5]
    memory = agent.state_dict("s")

    agent.reset("s")
    with replay(agent, log) as run:
        again = resolve(agent("Book 5.", session_id="s"))  # the script is used up: a real call would fail
        assert run.unused() == 0
    assert again.content == first.content == "Booked 5; the total is 5."
    assert Ledger.entries == [5]  # the tool did not run again
    assert agent.state_dict("s") == memory
    with pytest.raises(ScriptError):  # outside the block the real model is back
        resolve(agent("Book 5.", session_id="t"))


def test_a_diverging_run_is_reported(mode: str, tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    agent = ledger_agent(mode, [tool_call(5), "Booked."])
    with record(agent, log):
        resolve(agent("Book 5."))
    agent.reset()
    with replay(agent, log), pytest.raises(ReplayMismatchError, match=r"'Book 6\.'"):
        resolve(agent("Book 6."))


def test_streaming_runs_replay_chunk_for_chunk(mode: str, tmp_path: Path) -> None:
    log = tmp_path / "stream.jsonl"
    agent = ledger_agent(mode, [tool_call(2), "two booked, total two"], streaming=True)
    with record(agent, log):
        recorded = [(c.content, c.stream_state) for c in collect(agent("Book 2."))]
    agent.reset()
    with replay(agent, log):
        replayed = [(c.content, c.stream_state) for c in collect(agent("Book 2."))]
    assert replayed == recorded and len(recorded) > 2
    assert Ledger.entries == [2]


def test_concurrent_sessions_replay_in_any_order(tmp_path: Path) -> None:
    log = tmp_path / "sessions.jsonl"

    async def reply(messages: Any, params: Any) -> Any:
        last = messages[-1]
        if last["role"] == "tool":
            return f"done: {last['content']}"
        amount = int(last["content"].split()[1])
        return ModelResponse(tool_calls=[ToolCall(f"c{amount}", "Ledger__add", json.dumps({"amount": amount}))])

    agent = AsyncFunctionCallingAgent(AsyncFunctionLLM(reply), [Ledger()], "Keep the ledger.")

    async def run(order: list[int]) -> dict[int, str]:
        replies = await asyncio.gather(*(agent(f"book {i}", session_id=i) for i in order))
        return {i: r.content for i, r in zip(order, replies, strict=True)}

    with record(agent, log):
        recorded = asyncio.run(run(list(range(1, 21))))
    booked = sorted(Ledger.entries)
    for i in range(1, 21):
        agent.reset(i)
    with replay(agent, log) as played:
        replayed = asyncio.run(run(list(range(20, 0, -1))))
        assert played.unused() == 0
    assert replayed == recorded
    assert sorted(Ledger.entries) == booked  # nothing booked twice


def test_every_model_of_a_tree_is_recorded_and_put_back(tmp_path: Path) -> None:
    log = tmp_path / "tree.jsonl"

    class Pair(Agent):
        def __init__(self) -> None:
            super().__init__(name="pair")
            self.writer = Agent(FunctionLLM(lambda m, p: f"draft of {m[-1]['content']}"), name="writer")
            self.critic = Agent(FunctionLLM(lambda m, p: f"review of {m[-1]['content']}"), name="critic")

        def forward(self, *message: Any, session_id: Any = 0, **kwargs: Any) -> Any:
            draft = self.writer(*message, session_id=session_id)
            return self.critic(draft, session_id=session_id)

    pair = Pair()
    originals = (pair.writer.llm, pair.critic.llm)
    with record(pair, log):
        first = pair("cats")
    assert (pair.writer.llm, pair.critic.llm) == originals
    lines = log.read_text("utf-8").splitlines()
    assert json.loads(lines[0]) == {"format": "plait-run-log", "version": 1}
    assert [json.loads(line)["kind"] for line in lines[1:]] == ["llm", "llm"]
    pair.reset(recursive=True)
    with replay(pair, log):
        assert pair("cats").content == first.content == "review of draft of cats"


def test_plain_async_agent_and_missing_log(tmp_path: Path) -> None:
    async def reply(messages: Any, params: Any) -> str:
        return "pong"

    agent = AsyncAgent(AsyncFunctionLLM(reply))
    with record(agent, tmp_path / "a.jsonl"):
        assert asyncio.run(agent("ping")).content == "pong"
    agent.reset()
    with replay(agent, tmp_path / "a.jsonl"):
        assert asyncio.run(agent("ping")).content == "pong"
    with pytest.raises(UserError, match="no run log"), replay(agent, tmp_path / "missing.jsonl"):
        pass


def test_a_run_against_a_server_replays_with_the_server_gone(mode: str, tmp_path: Path) -> None:
    from plait.llms import GPTAPI, AsyncGPTAPI
    from plait.testing.fake_openai import FakeOpenAIServer, Reply

    log = tmp_path / "server.jsonl"
    server = FakeOpenAIServer([Reply(tool_calls=[("Ledger__add", {"amount": 3})]), Reply("Three booked.")]).start()
    llm = (AsyncGPTAPI if mode == "async" else GPTAPI)(model_type="m", api_base=server.base_url, key="k", retry=0)
    agent = (AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent)(llm, [Ledger()], "Book.")
    try:
        with record(agent, log):
            first = resolve(agent("Book 3."))
    finally:
        server.stop()
    agent.reset()
    with replay(agent, log):
        assert resolve(agent("Book 3.")).content == first.content == "Three booked."
    assert len(server.requests) == 2 and Ledger.entries == [3]


PLUGIN_CALL = '<|action_start|><|plugin|>\n{"name": "Ledger.add", "parameters": {"amount": 5}}<|action_end|>\n'
REACT_CALL = 'Thought: book it\nAction: Ledger.add\nAction Input: {"amount": 5}'


def _paradigm(kind: str, mode: str, script: list[Any]) -> Any:
    from plait.agents import AgentForInternLM, AsyncAgentForInternLM, AsyncReAct, ReAct

    llm = scripted_llm(script, mode)
    if kind == "internlm":
        return (AsyncAgentForInternLM if mode == "async" else AgentForInternLM)(llm, plugins=[Ledger()], name="lm")
    return (AsyncReAct if mode == "async" else ReAct)(llm, [Ledger()], name="react")


@pytest.mark.parametrize(
    ("kind", "script"),
    [
        ("internlm", [PLUGIN_CALL, "Booked: total 5."]),
        ("react", [REACT_CALL, "Thought: done\nFinal Answer: Booked."]),
    ],
)
def test_replay_serves_the_tools_of_every_paradigm(kind: str, script: list[Any], mode: str, tmp_path: Path) -> None:
    log = tmp_path / f"{kind}.jsonl"
    agent = _paradigm(kind, mode, script)
    with record(agent, log):
        recorded = resolve(agent("Book 5.", session_id="s"))
    assert Ledger.entries == [5]
    kinds = [json.loads(line)["kind"] for line in log.read_text("utf-8").splitlines()[1:]]
    assert kinds == ["llm", "tool", "llm"]
    fresh = _paradigm(kind, mode, [])  # no model replies: everything must come from the log
    with replay(fresh, log) as run_log:
        replayed = resolve(fresh("Book 5.", session_id="s"))
    assert replayed.content == recorded.content
    assert Ledger.entries == [5]  # the tool did not run again
    assert run_log.unused() == 0
