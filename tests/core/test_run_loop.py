"""The one run loop: cancellation, offloading, real async entry points, interceptors.

Each test here pins a bug of the four-driver loop it replaced (see issue 14) or a property
of the new one (one driver per agent tree, every effect meeting the same interceptors).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import plait.agents as agents_module
from _support import Doubler, collect, resolve
from plait.actions import ActionExecutor, AsyncActionExecutor, BaseAction, tool_api
from plait.agents import (
    Agent,
    AsyncAgent,
    AsyncSequential,
    AsyncStreamingAgent,
    AsyncStreamingFunctionCallingAgent,
    AsyncStreamingSequential,
    FunctionCallingAgent,
    Sequential,
    StreamingAgent,
    StreamingSequential,
)
from plait.effects import ActionCall, Call, Effect, Flow, ModelCall
from plait.exceptions import ModeError
from plait.hooks import JSONLTracer
from plait.interceptors import Interceptor, intercept
from plait.llms.base_llm import AsyncBaseLLM, BaseLLM
from plait.llms.response import ModelResponse, ToolCall
from plait.schema import ActionReturn, AgentMessage, AgentStatusCode
from plait.testing import ScriptedLLM


class SlowAsyncLLM(AsyncBaseLLM):
    """Answers after `delay` seconds (awaited), so a call can be cancelled while it waits."""

    def __init__(self, delay: float) -> None:
        super().__init__(path="slow")
        self.delay = delay

    async def chat(self, inputs: Any, session_ids: Any = None, **gen_params: Any) -> str:
        await asyncio.sleep(self.delay)
        return "late"


class BlockingLLM(BaseLLM):
    """A synchronous model that blocks its thread for `delay` seconds per call (chat and stream)."""

    def __init__(self, delay: float) -> None:
        super().__init__(path="blocking")
        self.delay = delay

    def chat(self, inputs: Any, **gen_params: Any) -> str:
        time.sleep(self.delay)
        return "done"

    def stream_chat(self, inputs: Any, **gen_params: Any) -> Iterator[Any]:
        for piece in ("do", "done"):
            time.sleep(self.delay / 2)
            yield AgentStatusCode.STREAM_ING, piece, None
        yield AgentStatusCode.END, "done", None


async def _ticks_while(awaitable: Any) -> tuple[Any, int]:
    """Run `awaitable` while another task ticks every 10 ms; returns its result and the ticks counted meanwhile."""
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # the ticker is running before the work starts
    try:
        result = await awaitable
    finally:
        done.set()
        await task
    return result, ticks


# -- cancellation -------------------------------------------------------------------------------


def test_a_cancelled_async_call_rolls_memory_back_and_closes_its_span(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    agent = AsyncAgent(SlowAsyncLLM(delay=30), name="slow")
    tracer = JSONLTracer(trace).attach(agent)

    async def main() -> None:
        task = asyncio.create_task(agent("hello", session_id="s"))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    tracer.close()
    assert agent.memory is not None and agent.memory.get_memory("s") == []
    lines = [json.loads(line) for line in trace.read_text("utf-8").splitlines()]
    spans = [(line["event"], line["error"].split(":")[0]) for line in lines]
    assert spans == [("model", "CancelledError"), ("agent", "CancelledError")]
    assert lines[0]["parent"] == lines[1]["span"]


def test_an_abandoned_stream_rolls_memory_back() -> None:
    agent = StreamingAgent(ScriptedLLM(["one two three four"]), name="s")
    stream = agent("hi")
    first = next(stream)
    assert first.stream_state == AgentStatusCode.STREAM_ING
    stream.close()
    assert agent.memory is not None and agent.memory.get_memory(0) == []


class SlowStreamingLLM(AsyncBaseLLM):
    """Streams two chunks, then waits `delay` seconds before the last; its cleanup awaits (and is recorded)."""

    def __init__(self, delay: float) -> None:
        super().__init__(path="slow-stream")
        self.delay = delay
        self.closed: list[str] = []

    async def stream_chat(self, inputs: Any, **gen_params: Any) -> Any:
        try:
            yield AgentStatusCode.STREAM_ING, "one", None
            yield AgentStatusCode.STREAM_ING, "one two", None
            await asyncio.sleep(self.delay)
            yield AgentStatusCode.END, "one two three", None
        finally:
            await asyncio.sleep(0)  # cleanup that suspends: only a closing that lets it await gets past here
            self.closed.append("closed")


def test_an_abandoned_async_stream_closes_the_model_stream_and_rolls_memory_back() -> None:
    llm = SlowStreamingLLM(delay=30)
    agent = AsyncStreamingAgent(llm, name="s")

    async def main() -> None:
        stream = agent("hi", session_id="s")
        first = await anext(stream)
        assert first.content == "one" and first.stream_state == AgentStatusCode.STREAM_ING
        await stream.aclose()

    asyncio.run(main())
    assert llm.closed == ["closed"]
    assert agent.memory.get_memory("s") == []
    assert agent._calls == {}  # the session is free again


def test_a_task_cancelled_while_it_reads_an_async_stream_closes_it_and_rolls_memory_back() -> None:
    llm = SlowStreamingLLM(delay=30)
    agent = AsyncStreamingAgent(llm, name="s")
    seen: list[str] = []
    two = asyncio.Event()

    async def read() -> None:
        async for chunk in agent("hi", session_id="s"):
            seen.append(chunk.content)
            if len(seen) == 2:
                two.set()

    async def main() -> None:
        task = asyncio.create_task(read())
        await two.wait()  # the run now waits for the model's last chunk
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert seen == ["one", "one two"] and llm.closed == ["closed"]
    assert agent.memory.get_memory("s") == []
    assert agent._calls == {}


def test_a_finished_async_stream_ends_with_its_final_message() -> None:
    llm = SlowStreamingLLM(delay=0)
    agent = AsyncStreamingAgent(llm, name="s")

    async def main() -> list[AgentMessage]:
        return [chunk async for chunk in agent("hi", session_id="s")]

    chunks = asyncio.run(main())
    assert [(c.content, c.stream_state) for c in chunks] == [
        ("one", AgentStatusCode.STREAM_ING),
        ("one two", AgentStatusCode.STREAM_ING),
        ("one two three", AgentStatusCode.END),
    ]
    assert llm.closed == ["closed"]
    assert [m.content for m in agent.memory.get_memory("s")] == ["hi", "one two three"]


# -- the event loop stays free ------------------------------------------------------------------


def test_a_sync_agent_in_an_async_sequential_leaves_the_loop_responsive() -> None:
    pipeline = AsyncSequential(Agent(BlockingLLM(delay=0.5), name="blocking"))
    reply, ticks = asyncio.run(_ticks_while(pipeline("go")))
    assert reply.content == "done"
    assert ticks >= 20, f"the event loop ticked only {ticks} times in 0.5 s"


def test_a_sync_streaming_agent_in_an_async_streaming_sequential_is_read_in_a_thread() -> None:
    pipeline = AsyncStreamingSequential(StreamingAgent(BlockingLLM(delay=0.5), name="blocking"))

    async def chunks() -> list[AgentMessage]:
        return [chunk async for chunk in pipeline("go")]

    result, ticks = asyncio.run(_ticks_while(chunks()))
    assert [c.content for c in result] == ["do", "done", "done"]
    assert ticks >= 20, f"the event loop ticked only {ticks} times in 0.5 s"


def test_async_streaming_function_calling_agent_takes_a_sync_llm() -> None:
    script = [ModelResponse(tool_calls=[ToolCall("c1", "Doubler", '{"x": 21}')]), "It is 42."]
    llm = ScriptedLLM(script)
    llm.stream_tools = True  # type: ignore[attr-defined]
    agent = AsyncStreamingFunctionCallingAgent(llm, [Doubler()], name="fc")
    chunks = collect(agent("double 21"))
    assert chunks[-1].content == "It is 42." and chunks[-1].stream_state == AgentStatusCode.END
    assert llm.calls[0].method == "stream_chat"


def test_a_sync_driver_refuses_async_work_before_the_flow_can_swallow_it() -> None:
    class AwaitedEcho(BaseAction):
        """An async tool."""

        @tool_api
        async def run(self, x: int) -> int:
            """Echo.

            Args:
                x: The number.
            """
            return x

    agent = FunctionCallingAgent(
        ScriptedLLM([ModelResponse(tool_calls=[ToolCall("c1", "AwaitedEcho", '{"x": 1}')]), "never"]),
        [AwaitedEcho()],
        name="fc",
    )
    with pytest.raises(ModeError, match="AsyncActionExecutor"):
        agent("go", session_id="m")
    assert agent.memory is not None and agent.memory.get_memory("m") == []  # rolled back


# -- real async entry points --------------------------------------------------------------------


def _exported_agent_classes() -> list[type[Any]]:
    return [
        cls
        for name in agents_module.__all__
        if isinstance(cls := getattr(agents_module, name), type) and issubclass(cls, Agent)
    ]


@pytest.mark.parametrize("cls", _exported_agent_classes(), ids=lambda cls: cls.__name__)
def test_every_agent_class_has_a_real_call_of_its_mode(cls: type[Any]) -> None:
    call = cls.__call__
    if cls.__name__ in {"AgentList", "AgentDict"}:
        return  # containers without a call of their own
    if cls.__name__.startswith("AsyncStreaming"):
        assert inspect.isasyncgenfunction(call)
    elif cls.__name__.startswith("Async"):
        assert inspect.iscoroutinefunction(call)
    elif cls.__name__.startswith("Streaming"):
        assert inspect.isgeneratorfunction(call)
    else:
        assert not inspect.iscoroutinefunction(call) and not inspect.isasyncgenfunction(call)


def test_async_executor_call_is_a_coroutine_function() -> None:
    assert inspect.iscoroutinefunction(AsyncActionExecutor.__call__)
    assert not inspect.iscoroutinefunction(ActionExecutor.__call__)


# -- interceptors -------------------------------------------------------------------------------


class Log(Interceptor):
    """Records the kinds of effects it sees and can answer tool calls itself."""

    def __init__(self, answer_tools: bool = False) -> None:
        self.seen: list[str] = []
        self.answer_tools = answer_tools

    def around(self, effect: Effect[Any]) -> Flow[Any]:
        self.seen.append(type(effect).__name__)
        if self.answer_tools and isinstance(effect, ActionCall):
            return ActionReturn(type=effect.action.name, result=[{"type": "text", "content": "84"}])
        return (yield effect)


def test_interceptors_see_every_effect_of_the_tree_in_every_mode(mode: str) -> None:
    script = [ModelResponse(tool_calls=[ToolCall("c1", "Doubler", '{"x": 21}')]), "It is 84."]
    if mode == "sync":
        member: Any = FunctionCallingAgent(ScriptedLLM(script), [Doubler()], name="fc")
        pipeline: Any = Sequential(member)
    else:
        from plait.agents import AsyncFunctionCallingAgent

        member = AsyncFunctionCallingAgent(ScriptedLLM(script), [Doubler()], name="fc")
        pipeline = AsyncSequential(member)
    log = Log(answer_tools=True)
    with intercept(pipeline, log):
        reply = resolve(pipeline("double 21"))
    assert reply.content == "It is 84."
    assert log.seen.count("ModelCall") == 2 and "ToolCall" in log.seen and "ActionCall" in log.seen
    assert "AgentCall" in log.seen
    tool_result = member.memory.get_memory(0)[2]
    assert tool_result.content.result == [{"type": "text", "content": "84"}]  # answered by the interceptor
    assert not pipeline._interceptors and not member._interceptors  # removed on exit


def test_a_streaming_tree_streams_through_interceptors() -> None:
    log = Log()
    pipeline = StreamingSequential(StreamingAgent(ScriptedLLM(["a b c"]), name="s"))
    with intercept(pipeline, log):
        chunks = list(pipeline("hi"))
    assert chunks[-1].content == "a b c" and chunks[-1].stream_state == AgentStatusCode.END
    assert len(chunks) > 1 and log.seen == ["AgentCall", "ModelCall"]


def test_the_driver_chooses_whether_a_plain_agent_streams() -> None:
    """A plain `Agent` asks with ``chat``, but streams when the run streams (the driver owns the mode)."""
    llm = ScriptedLLM(["a b c", "d e f"])
    chunks = list(StreamingSequential(Agent(llm, name="plain"))("hi"))
    assert len(chunks) > 1 and chunks[-1].content == "a b c" and chunks[-1].stream_state == AgentStatusCode.END
    assert [call.method for call in llm.calls] == ["stream_chat"]
    assert Sequential(Agent(llm, name="plain"))("hi").content == "d e f"
    assert [call.method for call in llm.calls] == ["stream_chat", "chat"]


def test_an_interceptor_may_change_the_model_call(mode: str) -> None:
    class Louder(Interceptor):
        effects = (ModelCall,)

        def around(self, effect: Effect[Any]) -> Flow[Any]:
            assert isinstance(effect, ModelCall)
            reply = yield effect.replace(params={**effect.params, "temperature": 0})
            return str(reply).upper()

    llm = ScriptedLLM(["quiet"])
    agent: Any = Agent(llm, name="a") if mode == "sync" else AsyncAgent(llm, name="a")
    with intercept(agent, Louder()):
        assert resolve(agent("hi")).content == "QUIET"
    assert llm.calls[0].params["temperature"] == 0


def test_the_interceptors_an_agent_runs_with_follow_every_change_of_its_tree() -> None:
    """`interceptors()` is kept between calls: each way of changing a tree must show in the next call."""
    from plait.agents import AgentDict, AgentList
    from plait.context import ContextPolicy
    from plait.interceptors import register_interceptor

    inner = Agent(ScriptedLLM(["x"]), name="inner", context_policy=None)
    outer = Sequential(inner)
    outer.context_policy = None
    assert outer.interceptors() == ()
    policy = ContextPolicy("trim")
    inner.context_policy = policy  # a sub-agent's attribute
    assert outer.interceptors() == (policy,)
    del inner.context_policy
    assert outer.interceptors() == ()
    inner.context_policy = policy
    log = Log()
    handle = register_interceptor(outer, log)  # the registries of the tree
    assert outer.interceptors() == (log, policy) and inner.interceptors() == (log, policy)
    handle.remove()
    assert outer.interceptors() == (policy,) and inner.interceptors() == (policy,)
    late, late_policy = Agent(ScriptedLLM(["y"]), name="late", context_policy=None), ContextPolicy("error")
    late.context_policy = late_policy
    members = AgentList([inner])  # containers that change their members in place
    members.context_policy = None
    assert members.interceptors() == (policy,)
    members.append(late)
    assert members.interceptors() == (policy, late_policy)
    members.pop(0)
    assert members.interceptors() == (late_policy,)
    table = AgentDict({"a": inner})
    table.context_policy = None
    assert table.interceptors() == (policy,)
    table["b"] = late
    assert table.interceptors() == (policy, late_policy)
    del table["a"]
    assert table.interceptors() == (late_policy,)


# -- fault injection ----------------------------------------------------------------------------


def test_fault_injection_in_every_mode(mode: str) -> None:
    from plait.agents import AsyncFunctionCallingAgent
    from plait.exceptions import LLMConnectionError
    from plait.testing import FaultInjector, scripted_llm

    script = [ModelResponse(tool_calls=[ToolCall("c1", "Doubler", '{"x": 21}')]), "The tool failed."]
    cls: Any = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
    agent = cls(scripted_llm(script, mode), [Doubler()], name="fc")
    faults = FaultInjector().fail(Call, RuntimeError("disk full"))  # the tool API's own call raises
    with intercept(agent, faults):
        reply = resolve(agent("double 21", session_id="t"))
    assert reply.content == "The tool failed."
    assert "disk full" in agent.memory.get_memory("t")[2].content.errmsg  # the tool's error became an observation
    assert faults.seen == [("Call", 1, "failed")]

    down = FaultInjector().fail(ModelCall, LLMConnectionError("down"), nth=1)
    agent2 = cls(scripted_llm([], mode), [Doubler()], name="fc")
    with intercept(agent2, down), pytest.raises(LLMConnectionError):
        resolve(agent2("hi", session_id="u"))
    assert agent2.memory.get_memory("u") == []  # rolled back
