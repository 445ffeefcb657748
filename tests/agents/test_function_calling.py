from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from _support import resolve
from plait.actions import BaseAction, tool_api
from plait.agents.function_calling import AsyncFunctionCallingAgent, FunctionCallingAgent
from plait.llms.response import ModelResponse, ToolCall
from plait.schema import ActionReturn, ActionStatusCode
from plait.testing import scripted_llm

MEETING = threading.Barrier(4, timeout=60)
"""Where the four parallel `slow_add` calls meet: each goes on only once all four are in flight.

Calls run one after another never fill it (the first waits 60 s, then every call fails), so
the parallel test proves the calls overlapped, by counting, not by timing them.
"""


class Arithmetic(BaseAction):
    """Exact integer arithmetic."""

    @tool_api
    def multiply(self, a: int, b: int) -> int:
        """Multiply two integers.

        Args:
            a: the first factor
            b: the second factor
        """
        return a * b

    @tool_api
    def slow_add(self, a: int, b: int) -> int:
        """Add two integers once three other calls of it are running.

        Args:
            a: first
            b: second
        """
        MEETING.wait()
        return a + b


def calls(*items: tuple[str, str, str]) -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall(i, n, a) for i, n, a in items], finish_reason="tool_calls")


def agent_for(mode: str, script: list[Any], **kwargs: Any) -> FunctionCallingAgent:
    cls = FunctionCallingAgent if mode == "sync" else AsyncFunctionCallingAgent
    return cls(scripted_llm(script, mode), [Arithmetic()], "Use tools.", **kwargs)


def test_tool_round_then_answer(mode: str) -> None:
    agent = agent_for(mode, [calls(("c1", "Arithmetic__multiply", '{"a": 37, "b": 91}')), "37 * 91 = 3367"])
    reply = resolve(agent("What is 37 * 91?"))
    assert reply.content == "37 * 91 = 3367"
    first, second = agent.llm.calls
    tool_names = [t["function"]["name"] for t in first.params["tools"]]
    assert "Arithmetic__multiply" in tool_names and first.params["tool_choice"] == "auto"
    assert second.messages[-2]["tool_calls"][0]["function"] == {
        "name": "Arithmetic__multiply",
        "arguments": '{"a": 37, "b": 91}',
    }
    assert second.messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "3367"}
    memory = agent.state_dict()["memory"]
    assert [m["sender"] for m in memory] == [
        "user",
        agent.name,
        "ActionExecutor",
        agent.name,
    ]
    assert memory[2]["extra_info"]["tool_call_id"] == "c1"


def test_model_mistakes_become_observations(mode: str) -> None:
    agent = agent_for(
        mode,
        [
            calls(
                ("c1", "Nope", "{}"), ("c2", "Arithmetic__multiply", '{"a": 1}'), ("c3", "Arithmetic__multiply", "{")
            ),
            "giving up",
        ],
    )
    resolve(agent("hi"))
    tool_messages = agent.llm.calls[1].messages[-3:]
    assert [m["role"] for m in tool_messages] == ["tool", "tool", "tool"]
    assert "Arithmetic.multiply" in tool_messages[0]["content"]  # the valid tools are named
    assert "b" in tool_messages[1]["content"]  # the missing argument is named
    results = [m for m in agent.memory.get_memory() if m.sender == "ActionExecutor"]
    assert all(isinstance(m.content, ActionReturn) for m in results)
    assert results[1].content.state == ActionStatusCode.ARGS_ERROR


def test_out_of_turns_forces_a_text_answer(mode: str) -> None:
    loop = calls(("c", "Arithmetic__multiply", '{"a": 2, "b": 3}'))
    agent = agent_for(mode, [loop, loop, "final"], max_turn=3)
    assert resolve(agent("go")).content == "final"
    assert agent.llm.calls[-1].params["tool_choice"] == "none"
    agent.llm.assert_complete()


def test_parallel_calls_run_concurrently_in_async_mode() -> None:
    parallel = calls(*[(f"c{i}", "Arithmetic__slow_add", f'{{"a": {i}, "b": 1}}') for i in range(4)])
    agent = agent_for("async", [parallel, "done"])
    MEETING.reset()
    asyncio.run(agent("add"))
    results = [m["content"] for m in agent.llm.calls[1].messages if m["role"] == "tool"]
    assert results == ["1", "2", "3", "4"]  # all four met in MEETING: they were in flight at once


def test_streaming_variant_streams_turns_and_ends_once(mode: str) -> None:
    from _support import collect
    from plait.agents.function_calling import AsyncStreamingFunctionCallingAgent, StreamingFunctionCallingAgent
    from plait.schema import AgentStatusCode

    cls = StreamingFunctionCallingAgent if mode == "sync" else AsyncStreamingFunctionCallingAgent
    script = [calls(("c1", "Arithmetic__multiply", '{"a": 37, "b": 91}')), "37 times 91 is 3367"]
    agent = cls(scripted_llm(script, mode), [Arithmetic()], "Use tools.")
    chunks = collect(agent("What is 37 * 91?"))
    assert [c.stream_state for c in chunks].count(AgentStatusCode.END) == 1
    assert chunks[-1].content == "37 times 91 is 3367"
    streamed = [c.content for c in chunks[:-1] if c.content]
    # whitespace at the end shows with the next word: it would go if tool-call markup came next
    assert streamed and streamed[-1] == "37 times 91 is 3367" and streamed[0] == "37"
    assert [m["sender"] for m in agent.state_dict()["memory"]] == ["user", cls.__name__, "ActionExecutor", cls.__name__]
    assert all(call.method == "stream_chat" for call in agent.llm.calls)


@pytest.mark.parametrize(("reset", "second"), [("auto", "auto"), ("none", "none"), (None, "required")])
def test_a_forcing_tool_choice_resets_once_a_tool_ran(reset: Any, second: str) -> None:
    """'required' every round would never let the model answer: after a tool ran it becomes `reset_tool_choice`."""
    from plait.actions import Calculator
    from plait.llms import GPTAPI
    from plait.testing.fake_openai import FakeOpenAIServer, Reply

    script = [Reply(tool_calls=[("Calculator", {"expression": "6*7"})]), Reply("42"), Reply("42")]
    with FakeOpenAIServer(script) as server:
        llm = GPTAPI(model_type="m", api_base=server.base_url, key="k", retry=0)
        agent = FunctionCallingAgent(llm, [Calculator()], max_turn=3, reset_tool_choice=reset)
        agent("6*7?", tool_choice="required")  # a call's tool_choice overrides the agent's
        choices = [body.get("tool_choice") for body in server.requests]
    assert choices[:2] == ["required", second]


def test_the_final_round_answers_whatever_the_call_asked() -> None:
    from plait.actions import Calculator
    from plait.llms import GPTAPI
    from plait.testing.fake_openai import FakeOpenAIServer, Reply

    script = [Reply(tool_calls=[("Calculator", {"expression": "1+1"})]), Reply("2")]
    with FakeOpenAIServer(script) as server:
        llm = GPTAPI(model_type="m", api_base=server.base_url, key="k", retry=0)
        FunctionCallingAgent(llm, [Calculator()], max_turn=2, reset_tool_choice=None)("1+1?", tool_choice="required")
        assert [body.get("tool_choice") for body in server.requests] == ["required", "none"]
