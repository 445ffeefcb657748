"""plait.tracing: OpenTelemetry GenAI spans of agent, model and tool calls, read with the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK is in the test extra")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from _support import Doubler, collect, one_tool_round, resolve
from plait.actions import BaseAction, tool_api
from plait.agents import Agent, AsyncAgent, AsyncSequential, Sequential
from plait.agents.function_calling import AsyncFunctionCallingAgent, FunctionCallingAgent
from plait.exceptions import LLMConnectionError
from plait.interceptors import GLOBAL_INTERCEPTORS
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.llms.response import ModelResponse, ToolCall
from plait.testing import AsyncFunctionLLM, FakeOpenAIServer, FunctionLLM, scripted_llm
from plait.tracing import current_span, instrument, is_instrumented, uninstrument

SECRET = "hunter2hunter2"


class Traced:
    """An SDK tracer provider whose spans land in memory, instrumented for one test."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self) -> list[ReadableSpan]:
        """The finished spans, in start order."""
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith(prefix)]


@pytest.fixture
def traced() -> Iterator[Traced]:
    tracing = Traced()
    instrument(tracing.provider)
    yield tracing
    uninstrument()
    tracing.provider.shutdown()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def sid(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def tool_agent(mode: str, server: FakeOpenAIServer, name: str = "calc", tools: Any = None) -> Any:
    llm_cls, agent_cls = (AsyncGPTAPI, AsyncFunctionCallingAgent) if mode == "async" else (GPTAPI, FunctionCallingAgent)
    llm = llm_cls("gpt-test", api_base=server.base_url, key=None, temperature=0.2, max_new_tokens=64)
    return agent_cls(llm, tools or [Doubler()], "Use tools.", name=name)


def test_agent_chat_and_tool_spans_carry_the_genai_attributes(mode: str, traced: Traced) -> None:
    with FakeOpenAIServer(handler=one_tool_round("Doubler", {"x": 21}, "It is {}.")) as server:
        reply = resolve(tool_agent(mode, server)("Double 21.", session_id="s1"))
        requests = list(server.requests)
    assert reply.content == "It is 42."
    agent, first, tool, second = traced.spans()
    assert [s.name for s in (agent, first, tool, second)] == [
        "invoke_agent calc",
        "chat gpt-test",
        "execute_tool Doubler",
        "chat gpt-test",
    ]
    assert (agent.kind, first.kind, tool.kind) == (SpanKind.INTERNAL, SpanKind.CLIENT, SpanKind.INTERNAL)
    assert parent(agent) is None
    assert parent(first) == parent(tool) == parent(second) == sid(agent)
    assert attrs(agent) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calc",
        "gen_ai.conversation.id": "s1",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
    }
    chat = attrs(first)
    assert (chat["gen_ai.operation.name"], chat["gen_ai.provider.name"]) == ("chat", "openai")
    assert (chat["gen_ai.request.model"], chat["gen_ai.response.model"]) == ("gpt-test", "gpt-test")
    assert (chat["gen_ai.request.temperature"], chat["gen_ai.request.max_tokens"]) == (0.2, 64)
    assert chat["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chat["gen_ai.response.id"].startswith("chatcmpl-")
    assert chat["gen_ai.usage.input_tokens"] > 0 and chat["gen_ai.usage.output_tokens"] > 0
    assert chat["gen_ai.conversation.id"] == "s1"
    assert attrs(second)["gen_ai.response.finish_reasons"] == ("stop",)
    asked = requests[1]["messages"][-2]["tool_calls"][0]["id"]
    assert attrs(tool) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "Doubler",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": asked,
        "gen_ai.conversation.id": "s1",
    }
    for span in traced.spans():
        assert span.status.status_code == StatusCode.UNSET
        assert not [key for key in attrs(span) if key.endswith((".messages", ".arguments", ".result"))]


def test_content_is_recorded_only_when_asked_and_secrets_never(mode: str) -> None:
    tracing = Traced()
    instrument(tracing.provider, record_content=True)
    try:
        with FakeOpenAIServer(handler=one_tool_round("Doubler", {"x": 21}, "It is {}.")) as server:
            question = f"Double 21. My database is https://bob:{SECRET}@db.example/x?api_key=sk-{SECRET}"
            resolve(tool_agent(mode, server)(question, session_id="s1"))
    finally:
        uninstrument()
    agent, first, tool, second = tracing.spans()
    for span in tracing.spans():
        assert SECRET not in json.dumps(attrs(span))
    sent = json.loads(attrs(first)["gen_ai.input.messages"])
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[1]["parts"][0]["content"].startswith("Double 21. My database is https://bob:***@db.example")
    answer = json.loads(attrs(first)["gen_ai.output.messages"])
    assert answer == [
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "call_0", "name": "Doubler", "arguments": '{"x": 21}'}],
            "finish_reason": "tool_calls",
        }
    ]
    follow_up = json.loads(attrs(second)["gen_ai.input.messages"])
    assert follow_up[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call_0", "response": "42"}],
    }
    assert json.loads(attrs(second)["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": "It is 42."}]
    assert json.loads(attrs(tool)["gen_ai.tool.call.arguments"]) == {"x": 21}
    assert json.loads(attrs(tool)["gen_ai.tool.call.result"]) == [{"type": "text", "content": "42"}]
    assert json.loads(attrs(agent)["gen_ai.input.messages"])[0]["role"] == "user"
    assert json.loads(attrs(agent)["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "It is 42."}]}
    ]


class AskHelper(BaseAction):
    """Asks a helper agent."""

    def __init__(self, helper: Agent) -> None:
        super().__init__()
        self.helper = helper

    @tool_api
    def run(self, question: str) -> str:
        """Ask the helper.

        Args:
            question: What to ask.
        """
        tag = current_span()
        assert tag is not None
        tag.set_attribute("app.asked", question)
        return self.helper(question, session_id="inner").content


def test_sub_agents_nest_in_a_pipeline_and_inside_a_tool(mode: str, traced: Traced) -> None:
    seq_cls, agent_cls = (AsyncSequential, AsyncAgent) if mode == "async" else (Sequential, Agent)
    pipeline = seq_cls(
        agent_cls(scripted_llm(["draft"], mode), name="writer"),
        agent_cls(scripted_llm(["final"], mode), name="editor"),
        name="team",
    )
    assert resolve(pipeline("go", session_id="p")).content == "final"
    team, writer, writer_chat, editor, editor_chat = traced.spans()
    assert [s.name for s in (team, writer, editor)] == [
        "invoke_agent team",
        "invoke_agent writer",
        "invoke_agent editor",
    ]
    assert parent(team) is None and parent(writer) == parent(editor) == sid(team)
    assert parent(writer_chat) == sid(writer) and parent(editor_chat) == sid(editor)
    assert attrs(writer_chat)["gen_ai.provider.name"] == "plait.testing"

    traced.exporter.clear()
    helper = Agent(FunctionLLM(lambda messages, params: "helped"), name="helper")  # a sync agent inside a tool
    with FakeOpenAIServer(handler=one_tool_round("AskHelper", {"question": "why?"}, "Said {}.")) as server:
        reply = resolve(tool_agent(mode, server, name="boss", tools=[AskHelper(helper)])("ask", session_id="o"))
    assert reply.content == "Said helped."
    by_name = {s.name: s for s in traced.spans()}
    boss, tool, inner = by_name["invoke_agent boss"], by_name["execute_tool AskHelper"], by_name["invoke_agent helper"]
    assert parent(tool) == sid(boss) and parent(inner) == sid(tool)
    assert parent(by_name["chat FunctionLLM"]) == sid(inner)
    assert attrs(inner)["gen_ai.conversation.id"] == "inner" and attrs(tool)["app.asked"] == "why?"
    assert len({s.context.trace_id for s in traced.spans() if s.context is not None}) == 1


def test_concurrent_sessions_keep_separate_trees(mode: str, traced: Traced) -> None:
    barrier = threading.Barrier(2, timeout=60)

    def answer(messages: Any, params: Any) -> str:
        barrier.wait()  # both calls are inside their model call at once
        return "ok"

    async def aanswer(messages: Any, params: Any) -> str:
        await asyncio.sleep(0.05)
        return "ok"

    if mode == "async":
        agent: Any = AsyncAgent(AsyncFunctionLLM(aanswer), name="bot")

        async def both() -> None:
            await asyncio.gather(agent("hi", session_id="a"), agent("hi", session_id="b"))

        asyncio.run(both())
    else:
        agent = Agent(FunctionLLM(answer), name="bot")
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda s: agent("hi", session_id=s), ["a", "b"]))
    agents, chats = traced.named("invoke_agent"), traced.named("chat")
    assert len(agents) == len(chats) == 2
    assert all(parent(a) is None for a in agents)
    owner = {sid(a): attrs(a)["gen_ai.conversation.id"] for a in agents}
    assert sorted(owner.values()) == ["a", "b"]
    for chat in chats:
        assert owner[parent(chat)] == attrs(chat)["gen_ai.conversation.id"]
    assert len({a.context.trace_id for a in agents if a.context is not None}) == 2


def test_failures_set_status_error(mode: str, traced: Traced) -> None:
    def broken(messages: Any, params: Any) -> str:
        raise LLMConnectionError("server down")

    agent = (
        AsyncAgent(AsyncFunctionLLM(broken), name="bot") if mode == "async" else Agent(FunctionLLM(broken), name="bot")
    )
    with pytest.raises(LLMConnectionError):
        resolve(agent("hi"))
    outer, chat = traced.spans()
    for span in (outer, chat):
        assert span.status.status_code == StatusCode.ERROR
        assert attrs(span)["error.type"] == "LLMConnectionError"
        assert span.status.description == "LLMConnectionError: server down"

    traced.exporter.clear()

    class Broken(BaseAction):
        """Always fails."""

        @tool_api
        def run(self, x: int) -> int:
            """Fail.

            Args:
                x: Ignored.
            """
            raise RuntimeError(f"cannot reach https://u:{SECRET}@tool.example")

    script = [ModelResponse(tool_calls=[ToolCall("c9", "Broken", '{"x": 1}')]), "It broke."]
    cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
    assert resolve(cls(scripted_llm(script, mode), [Broken()], name="fc")("go")).content == "It broke."
    tool = traced.named("execute_tool")[0]
    assert tool.status.status_code == StatusCode.ERROR and attrs(tool)["error.type"] == "API_ERROR"
    assert attrs(tool)["gen_ai.tool.call.id"] == "c9"
    assert tool.status.description is not None and SECRET not in tool.status.description
    assert traced.named("invoke_agent")[0].status.status_code == StatusCode.UNSET  # the model was told, the run went on


def test_uninstrument_stops_the_spans(mode: str) -> None:
    tracing = Traced()
    instrument(tracing.provider)
    assert is_instrumented() and GLOBAL_INTERCEPTORS
    uninstrument()
    uninstrument()  # twice is fine
    assert not is_instrumented() and not GLOBAL_INTERCEPTORS
    with FakeOpenAIServer(handler=one_tool_round("Doubler", {"x": 2}, "It is {}.")) as server:
        assert resolve(tool_agent(mode, server)("Double 2.")).content == "It is 4."
    assert tracing.exporter.get_finished_spans() == ()
    assert current_span() is None


def test_root_spans_sit_under_the_callers_span_and_instrument_replaces(traced: Traced) -> None:
    second = Traced()
    instrument(second.provider)  # again: the earlier instrumentation is replaced, not doubled
    assert len(GLOBAL_INTERCEPTORS) == 1
    agent = Agent(FunctionLLM(lambda messages, params: "ok"), name="bot")
    with second.provider.get_tracer("app").start_as_current_span("request") as request:
        agent("hi")
    assert traced.spans() == []
    outer, run, chat = second.spans()
    assert outer.name == "request" and parent(run) == request.get_span_context().span_id
    assert parent(chat) == sid(run)
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_a_stream_closed_early_ends_its_spans_without_error(traced: Traced) -> None:
    from plait.agents import StreamingAgent

    stream = StreamingAgent(scripted_llm(["one two three four"], "sync"), name="talker")("go")
    next(stream)
    stream.close()
    names = {s.name: s for s in traced.spans()}
    assert set(names) == {"invoke_agent talker", "chat ScriptedLLM"}
    assert all(s.status.status_code == StatusCode.UNSET for s in names.values())


def test_a_streaming_tool_agent_keeps_its_tree(mode: str, traced: Traced) -> None:
    from plait.agents.function_calling import AsyncStreamingFunctionCallingAgent, StreamingFunctionCallingAgent

    cls = AsyncStreamingFunctionCallingAgent if mode == "async" else StreamingFunctionCallingAgent
    llm_cls = AsyncGPTAPI if mode == "async" else GPTAPI
    with FakeOpenAIServer(handler=one_tool_round("Doubler", {"x": 5}, "It is {}.")) as server:
        agent = cls(llm_cls("gpt-test", api_base=server.base_url, key=None), [Doubler()], name="streamer")
        chunks = collect(agent("Double 5.", session_id="st"))
    assert chunks[-1].content == "It is 10." and len(chunks) > 1
    agent_span, first, tool, second = traced.spans()
    assert [s.name for s in (agent_span, first, tool, second)] == [
        "invoke_agent streamer",
        "chat gpt-test",
        "execute_tool Doubler",
        "chat gpt-test",
    ]
    assert parent(first) == parent(tool) == parent(second) == sid(agent_span)
    assert attrs(first)["gen_ai.usage.input_tokens"] > 0 and attrs(tool)["gen_ai.tool.call.id"] == "call_0"
    assert current_span() is None  # nothing stays open in the consumer's context


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)


def test_import_plait_does_not_import_opentelemetry() -> None:
    done = _run(
        "import sys, plait, plait.tracing, plait.agents, plait.interceptors\n"
        "from plait.agents import Agent\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_without_opentelemetry_instrument_names_the_extra() -> None:
    done = _run(
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from plait.tracing import instrument\n"
        "try:\n    instrument()\nexcept Exception as exc:\n    print(type(exc).__name__, exc)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("MissingDependencyError") and "plait[otel]" in done.stdout


def test_tool_spans_outside_agents_and_attribute_types(traced: Traced) -> None:
    result = Doubler()({"x": 4}, session_id=None)
    assert result.result == [{"type": "text", "content": "8"}]
    (tool,) = traced.spans()
    assert tool.name == "execute_tool Doubler" and parent(tool) is None
    assert "gen_ai.conversation.id" not in attrs(tool) and "gen_ai.tool.call.id" not in attrs(tool)
    for value in attrs(tool).values():
        assert isinstance(value, (str, int, float, bool, tuple)), value
    assert isinstance(GLOBAL_INTERCEPTORS, Mapping)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_recorded_content_keeps_reasoning_as_its_own_part(mode: str) -> None:
    """Reasoning is the conventions' ``reasoning`` part of a message, never its text (issue 37)."""
    from plait.testing import Reply

    script = [
        Reply("<think>The tool doubles.</think>", tool_calls=[("Doubler", {"x": 21})]),
        Reply("<think>It said 42.</think>It is 42."),
    ]
    tracing = Traced()
    instrument(tracing.provider, record_content=True)
    try:
        with FakeOpenAIServer(script) as server:
            resolve(tool_agent(mode, server)("Double 21.", session_id="s1"))
    finally:
        uninstrument()
    _, first, _, second = tracing.spans()
    assert json.loads(attrs(first)["gen_ai.output.messages"])[0]["parts"][0] == {
        "type": "reasoning",
        "content": "The tool doubles.",
    }
    assert json.loads(attrs(second)["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "reasoning", "content": "It said 42."},
        {"type": "text", "content": "It is 42."},
    ]
    turn = json.loads(attrs(second)["gen_ai.input.messages"])[-2]  # the tool-call turn, sent again
    assert turn["role"] == "assistant" and turn["parts"][0] == {"type": "reasoning", "content": "The tool doubles."}
