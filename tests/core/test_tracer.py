"""JSONLTracer: agent and tool spans as JSON lines; the on_agent_error hook point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _support import Doubler, collect, resolve
from plait.agents import Agent, AsyncAgent, StreamingAgent
from plait.agents.function_calling import AsyncFunctionCallingAgent, FunctionCallingAgent
from plait.exceptions import LLMConnectionError
from plait.hooks import Hook, JSONLTracer
from plait.llms.response import ModelResponse, ToolCall
from plait.testing import FunctionLLM, scripted_llm


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def test_agent_and_tool_spans_form_a_tree(mode: str, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    script = [ModelResponse(tool_calls=[ToolCall("c1", "Doubler", '{"x": 21}')]), "It is 42."]
    cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
    agent = cls(scripted_llm(script, mode), [Doubler()], "Use tools.")
    tracer = JSONLTracer(trace).attach(agent)
    resolve(agent("Double 21.", session_id="s"))
    tracer.close()
    first_model, tool, second_model, call = read(trace)
    assert (tool["event"], tool["tool"], tool["state"], tool["args"]) == ("tool", "Doubler", 0, {"x": 21})
    for model in (first_model, second_model):
        assert (model["event"], model["method"], model["session"]) == ("model", "complete", "s")
        assert model["parent"] == call["span"]
    assert first_model["tool_calls"] == [{"name": "Doubler", "arguments": '{"x": 21}'}]
    assert second_model["output"] == "It is 42."
    assert tool["result"] == [{"type": "text", "content": "42"}]
    assert (call["event"], call["agent"], call["session"], call["output"]) == ("agent", agent.name, "s", "It is 42.")
    assert call["input"] == ["Double 21."] and call["parent"] is None
    assert tool["parent"] == call["span"]
    assert call["duration_ms"] >= tool["duration_ms"] >= 0


def test_nested_agents_and_errors(tmp_path: Path) -> None:
    trace = tmp_path / "nested.jsonl"

    def broken(messages: Any, params: Any) -> str:
        raise LLMConnectionError("down")

    class Pair(Agent):
        def __init__(self) -> None:
            super().__init__(name="pair")
            self.writer = Agent(FunctionLLM(lambda m, p: "draft"), name="writer")
            self.critic = Agent(FunctionLLM(broken), name="critic")

        def forward(self, *message: Any, session_id: Any = 0, **kwargs: Any) -> Any:
            draft = self.writer(*message, session_id=session_id)
            return self.critic(draft, session_id=session_id)

    pair = Pair()
    JSONLTracer(trace, record_content=False).attach(pair)
    with pytest.raises(LLMConnectionError):
        pair("go")
    pair.writer("alone")  # after a failure the next call starts a fresh tree
    lines = read(trace)
    models = [line for line in lines if line["event"] == "model"]
    writer, critic, outer, alone = [line for line in lines if line["event"] == "agent"]
    assert [m["parent"] for m in models] == [writer["span"], critic["span"], alone["span"]]
    assert models[1]["error"] == "LLMConnectionError: down" and "output" not in models[0]
    assert (writer["agent"], critic["agent"], outer["agent"]) == ("writer", "critic", "pair")
    assert writer["parent"] == critic["parent"] == outer["span"]
    assert critic["error"] == "LLMConnectionError: down" and outer["error"] == "LLMConnectionError: down"
    assert alone["parent"] is None and "error" not in alone and "output" not in alone and "input" not in alone


def test_on_agent_error_is_told_in_every_mode(mode: str) -> None:
    seen: list[str] = []

    class Watch(Hook):
        def on_agent_error(self, agent: Any, error: BaseException, session_id: Any) -> None:
            seen.append(f"{session_id}: {error}")

    def broken(messages: Any, params: Any) -> str:
        raise LLMConnectionError("down")

    async def abroken(messages: Any, params: Any) -> str:
        raise LLMConnectionError("down")

    from plait.testing import AsyncFunctionLLM

    agent = AsyncAgent(AsyncFunctionLLM(abroken)) if mode == "async" else Agent(FunctionLLM(broken))
    agent.register_hook(Watch())
    agent.memory.add("kept", session_id=3)
    with pytest.raises(LLMConnectionError):
        resolve(agent("lost", session_id=3))
    assert seen == ["3: down"]
    assert [m.content for m in agent.memory.get_memory(3)] == ["kept"]


def test_closing_a_stream_early_is_not_an_error() -> None:
    seen: list[str] = []

    class Watch(Hook):
        def on_agent_error(self, agent: Any, error: BaseException, session_id: Any) -> None:
            seen.append(type(error).__name__)

    agent = StreamingAgent(scripted_llm(["one two three four"], "sync"))
    agent.register_hook(Watch())
    stream = agent("go")
    next(stream)
    stream.close()  # GeneratorExit inside the flow: rolled back quietly
    assert seen == [] and agent.memory.get_memory() == []
    assert collect(StreamingAgent(scripted_llm(["fine"], "sync"))("go"))[-1].content == "fine"
