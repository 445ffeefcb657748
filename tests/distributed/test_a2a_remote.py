"""Issue 38: `RemoteA2AAgent` calls an agent served by the official ``a2a-sdk`` (its Starlette server on 127.0.0.1).

The remote is a small SDK `AgentExecutor`: it answers each message with what it got and how
many messages its context has seen, asks for input when told ``need input``, and fails when
told ``fail``. Each behaviour runs in sync and async from one body (the `mode` fixture).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
from starlette.applications import Starlette

from _support import resolve
from plait.actions.mcp._agent_tool import AgentTool
from plait.agents import AsyncFunctionCallingAgent, AsyncSequential, Sequential
from plait.agents.agent import Agent, AsyncAgent
from plait.agents.remote_a2a import AsyncRemoteA2AAgent, RemoteA2AAgent
from plait.exceptions import RemoteAgentError
from plait.llms.response import ModelResponse, ToolCall
from plait.replay import record, replay
from plait.testing import AsyncScriptedLLM, ScriptedLLM


class Executor(AgentExecutor):
    """Echoes with a count per context; ``need input`` pauses the task for a follow-up."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []  # (context, task, text)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            assert context.message is not None
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        self.seen.append((task.context_id, task.id, text))
        if text == "need input":
            await updater.requires_input(updater.new_agent_message([Part(text="Which city?")]))
            return
        if text == "fail":
            await updater.failed(updater.new_agent_message([Part(text="no can do")]))
            return
        turns = sum(1 for c, _, _ in self.seen if c == task.context_id)
        await updater.add_artifact([Part(text=f"remote got {text!r} (turn {turns})")], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


class SDKServer:
    """The a2a-sdk's JSON-RPC server (Starlette on uvicorn) in a thread; `headers` records Authorization."""

    def __init__(self) -> None:
        self.executor = Executor()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        interface = AgentInterface(url=self.url + "/", protocol_binding="JSONRPC", protocol_version="1.0")
        card = AgentCard(
            name="Echo",
            description="Echoes with a count.",
            version="1.0",
            supported_interfaces=[interface],
            capabilities=AgentCapabilities(streaming=True),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
        )
        handler = DefaultRequestHandler(self.executor, InMemoryTaskStore(), card)
        app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
        self.headers: list[str | None] = []

        async def recorder(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                self.headers.append(dict(scope["headers"]).get(b"authorization", b"").decode() or None)
            await app(scope, receive, send)

        self.server = uvicorn.Server(uvicorn.Config(recorder, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> SDKServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the SDK server did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


@pytest.fixture
def remote() -> Iterator[SDKServer]:
    with SDKServer() as server:
        yield server


def make(mode: str, server: SDKServer, **kwargs: Any) -> Any:
    return (AsyncRemoteA2AAgent if mode == "async" else RemoteA2AAgent)(server.url, **kwargs)


def test_a_session_is_one_context_and_reset_starts_another(mode: str, remote: SDKServer) -> None:
    agent = make(mode, remote, token="t0ken")
    first = resolve(agent("hello", session_id="s"))
    second = resolve(agent("again", session_id="s"))
    assert first.content == "remote got 'hello' (turn 1)"
    assert second.content == "remote got 'again' (turn 2)"  # the remote kept the conversation, got only new text
    assert remote.executor.seen[0][0] == remote.executor.seen[1][0]
    state = agent.state_dict("s")
    assert state["extra_state"] == {"context_id": remote.executor.seen[0][0]}
    assert [m["content"] for m in state["memory"]] == ["hello", first.content, "again", second.content]
    other = resolve(agent("hi", session_id="t"))
    assert other.content == "remote got 'hi' (turn 1)"  # another session, another context
    agent.reset("s")
    assert resolve(agent("back", session_id="s")).content == "remote got 'back' (turn 1)"
    assert set(remote.headers) == {"Bearer t0ken"}  # the card and every call carried the token
    assert "t0ken" not in repr(agent) and "t0ken" not in str(agent.state_dict("s"))


def test_state_dict_carries_the_context_to_another_agent(mode: str, remote: SDKServer) -> None:
    agent = make(mode, remote)
    resolve(agent("hello", session_id=1))
    twin = make(mode, remote)
    twin.load_state_dict(agent.state_dict(1), session_id=1)
    assert resolve(twin("more", session_id=1)).content == "remote got 'more' (turn 2)"


def test_input_required_is_the_reply_and_the_next_message_answers_that_task(mode: str, remote: SDKServer) -> None:
    agent = make(mode, remote)
    asked = resolve(agent("need input", session_id="s"))
    assert asked.content == "Which city?"
    assert "task_id" in agent.state_dict("s")["extra_state"]
    done = resolve(agent("Rome", session_id="s"))
    assert done.content == "remote got 'Rome' (turn 2)"
    (_, paused_task, _), (_, answered_task, _) = remote.executor.seen
    assert paused_task == answered_task  # the answer went to the waiting task


def test_a_failed_task_raises_remote_agent_error(mode: str, remote: SDKServer) -> None:
    agent = make(mode, remote)
    with pytest.raises(RemoteAgentError, match="TASK_STATE_FAILED: no can do"):
        resolve(agent("fail", session_id="s"))


def test_an_unreachable_remote_raises_remote_agent_error(mode: str) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()  # nothing listens there
    agent = (AsyncRemoteA2AAgent if mode == "async" else RemoteA2AAgent)(url)
    with pytest.raises(RemoteAgentError, match="failed"):
        resolve(agent("hello"))


def test_in_a_sequential_with_hooks(mode: str, remote: SDKServer) -> None:
    calls: list[str] = []

    class Spy:
        def before_agent(self, agent: Any, messages: Any, session_id: Any) -> None:
            calls.append("before")

        def after_agent(self, agent: Any, message: Any, session_id: Any) -> None:
            calls.append(message.content)

    if mode == "async":
        first: Any = AsyncAgent(AsyncScriptedLLM(["planned: ask Rome"]))
    else:
        first = Agent(ScriptedLLM(["planned: ask Rome"]))
    agent = make(mode, remote, hooks=[Spy()])
    pipeline = (AsyncSequential if mode == "async" else Sequential)(first, agent)
    reply = resolve(pipeline("plan a trip", session_id="p"))
    assert reply.content == "remote got 'planned: ask Rome' (turn 1)"
    assert calls == ["before", reply.content]


def test_a_recorded_run_replays_without_the_remote(mode: str, tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    with SDKServer() as server:
        agent = make(mode, server)
        with record(agent, log):
            live = resolve(agent("hello", session_id="s")).content
    again = make(mode, server)  # the server is gone
    with replay(again, log):
        assert resolve(again("hello", session_id="s")).content == live


def test_as_a_tool_of_another_agent(remote: SDKServer) -> None:
    tool = AgentTool(AsyncRemoteA2AAgent(remote.url, name="Echo", description="Echoes."))
    script = [ModelResponse(tool_calls=[ToolCall("c1", "Echo", '{"message": "ping"}')]), "the remote said it"]
    llm = AsyncScriptedLLM(script)
    agent = AsyncFunctionCallingAgent(llm, [tool])
    reply = asyncio.run(agent("use the remote", session_id="s"))
    assert reply.content == "the remote said it"
    tool_messages = [m for m in llm.calls[-1].messages if m["role"] == "tool"]
    assert tool_messages[0]["content"] == "remote got 'ping' (turn 1)"
