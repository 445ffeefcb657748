"""Agents over HTTP: AgentAPIServer, the sync/async clients, and servers started in a subprocess."""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from _support import collect, resolve
from plait.agents import Agent, AsyncAgent, AsyncStreamingAgent, StreamingAgent
from plait.distributed import (
    AgentAPIServer,
    AsyncHTTPAgentClient,
    AsyncHTTPAgentServer,
    HTTPAgentClient,
    HTTPAgentServer,
)
from plait.exceptions import RemoteAgentError
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.schema import AgentMessage, AgentStatusCode
from plait.testing.fake_openai import FakeOpenAIServer, HTTPFault, Reply


def echo(body: dict[str, Any]) -> Reply:
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return Reply(f"echo {users[-1]} after {len(users) - 1} earlier")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(handler=echo, chunk_delay=0.01) as server:
        yield server


@pytest.fixture
def serve() -> Iterator[Callable[[Any], AgentAPIServer]]:
    servers: list[AgentAPIServer] = []

    def start(agent: Any) -> AgentAPIServer:
        server = AgentAPIServer(agent, port=0).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def client_for(mode: str, server: AgentAPIServer) -> Any:
    return (AsyncHTTPAgentClient if mode == "async" else HTTPAgentClient)(server.host, server.port, timeout=30)


def served_llm(model: FakeOpenAIServer, asynchronous: bool) -> Any:
    return (AsyncGPTAPI if asynchronous else GPTAPI)(model_type="m", api_base=model.base_url, key="k", retry=0)


@pytest.mark.parametrize("agent_kind", ["sync", "async"])
def test_chat_and_memory_per_session(mode: str, agent_kind: str, model: FakeOpenAIServer, serve: Any) -> None:
    agent = (AsyncAgent if agent_kind == "async" else Agent)(served_llm(model, agent_kind == "async"))
    client = client_for(mode, serve(agent))
    assert client.is_alive
    first = resolve(client("hello", session_id="alice"))
    assert isinstance(first, AgentMessage) and first.content == "echo hello after 0 earlier"
    assert resolve(client(AgentMessage(sender="user", content="again"), session_id="alice")).content.endswith(
        "after 1 earlier"
    )
    assert resolve(client("hi", session_id=7)).content == "echo hi after 0 earlier"
    state = resolve(client.state_dict("alice"))
    assert [m["content"] for m in state["memory"]] == [
        "hello",
        "echo hello after 0 earlier",
        "again",
        "echo again after 1 earlier",
    ]
    assert resolve(client.state_dict(7))["memory"][0]["content"] == "hi"  # int ids survive the URL
    resolve(client.close())


def test_errors_come_back_as_remote_agent_errors(mode: str, serve: Any) -> None:
    with FakeOpenAIServer([HTTPFault(500, "engine down")]) as broken:
        client = client_for(mode, serve(AsyncAgent(served_llm(broken, True))))
        with pytest.raises(RemoteAgentError) as info:
            resolve(client("hello"))
    assert info.value.status == 502 and info.value.error["type"] == "LLMAPIError"
    request = urllib.request.Request(client.url + "/chat_completion", data=b'{"session_id": 1}', method="POST")
    with pytest.raises(urllib.error.HTTPError) as bad:
        urllib.request.urlopen(request, timeout=10)
    assert bad.value.code == 400 and "needs 'message'" in json.loads(bad.value.read())["error"]["message"]
    bad.value.close()
    resolve(client.close())


def test_unreachable_server(mode: str) -> None:
    client = (AsyncHTTPAgentClient if mode == "async" else HTTPAgentClient)(port=free_port(), timeout=5)
    assert not client.is_alive
    with pytest.raises(RemoteAgentError, match="could not reach the agent"):
        resolve(client("hello"))
    resolve(client.close())


@pytest.mark.parametrize("agent_kind", ["sync", "async"])
def test_streaming_agents_stream_over_sse(mode: str, agent_kind: str, model: FakeOpenAIServer, serve: Any) -> None:
    agent_cls = AsyncStreamingAgent if agent_kind == "async" else StreamingAgent
    client = client_for(mode, serve(agent_cls(served_llm(model, agent_kind == "async"))))
    chunks = collect(client.stream("stream me", session_id="s"))
    assert [c.stream_state for c in chunks].count(AgentStatusCode.END) == 1 and chunks[-1].stream_state == 0
    assert chunks[-1].content == "echo stream me after 0 earlier"
    assert len(chunks) > 3 and all(chunks[-1].content.startswith(c.content) for c in chunks)
    resolve(client.close())


def test_slow_conversations_do_not_wait_for_each_other(serve: Any) -> None:
    arrived = 0

    async def meet(body: dict[str, Any]) -> Reply:
        """The model answers only once all four conversations are waiting on it (never, one after another)."""
        nonlocal arrived
        arrived += 1
        for _ in range(6000):
            if arrived >= 4:
                return echo(body)
            await asyncio.sleep(0.01)
        return Reply("alone: the conversations waited for each other")

    with FakeOpenAIServer(handler=meet) as slow:
        client = HTTPAgentClient(*(lambda s: (s.host, s.port))(serve(Agent(served_llm(slow, False)))), timeout=120)
        results: list[str] = []
        threads = [
            threading.Thread(target=lambda i=i: results.append(client(f"q{i}", session_id=i).content)) for i in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(results) == [f"echo q{i} after 0 earlier" for i in range(4)]  # all four met: side by side
        client.close()


def test_a_busy_session_answers_409(serve: Any) -> None:
    """A second request on a session that is still answering is refused with 409, not interleaved (issue 15, item 6)."""
    import json
    import urllib.error
    import urllib.request

    with FakeOpenAIServer(handler=echo, latency=0.5) as slow:
        server = serve(Agent(served_llm(slow, False)))
        url = f"http://{server.host}:{server.port}/chat_completion"

        def post(message: str) -> tuple[int, dict[str, Any]]:
            data = json.dumps({"message": message, "session_id": 7}).encode()
            request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return response.status, json.loads(response.read())
            except urllib.error.HTTPError as error:
                return error.code, json.loads(error.read())

        first: list[tuple[int, dict[str, Any]]] = []
        thread = threading.Thread(target=lambda: first.append(post("first")))
        thread.start()
        time.sleep(0.2)
        status, body = post("second")
        thread.join()
        assert status == 409 and body["error"]["type"] == "SessionBusyError"
        assert first[0][0] == 200 and first[0][1]["content"] == "echo first after 0 earlier"


def test_server_in_a_subprocess(model: FakeOpenAIServer) -> None:
    llm = {"type": AsyncGPTAPI, "model_type": "m", "api_base": model.base_url}  # a class travels as its path
    config = {"type": "plait.agents.AsyncAgent", "llm": llm}
    with HTTPAgentServer("0", config, port=free_port(), timeout=30) as agent:
        assert agent.is_alive
        assert agent("ping", session_id="x").content == "echo ping after 0 earlier"
        assert len(agent.state_dict("x")["memory"]) == 2
        process = agent.process
    assert process is not None and process.poll() is not None


def test_async_server_in_a_subprocess(model: FakeOpenAIServer) -> None:
    config = {"type": "plait.agents.AsyncAgent", "llm": {"type": "plait.llms.AsyncGPTAPI", "api_base": model.base_url}}

    async def main() -> str:
        async with AsyncHTTPAgentServer(1, config, port=free_port(), timeout=30) as agent:
            replies = await asyncio.gather(*(agent(f"q{i}", session_id=i) for i in range(5)))
            return " | ".join(r.content for r in replies)

    assert asyncio.run(main()).count("after 0 earlier") == 5


def test_a_server_that_cannot_start_says_why() -> None:
    start = time.monotonic()
    with pytest.raises(RemoteAgentError, match="exited with status") as info:
        HTTPAgentServer("0", {"type": "no.such.Agent"}, port=free_port(), start_timeout=60)
    assert "no.such" in str(info.value) and time.monotonic() - start < 30


# -- the OpenAI-compatible route -------------------------------------------------------------


def openai_client(mode: str, server: AgentAPIServer) -> Any:
    cls = AsyncGPTAPI if mode == "async" else GPTAPI
    return cls(model_type="served", api_base=server.url + "/v1", key="unused", retry=0)


def test_openai_clients_talk_to_the_agent(mode: str, model: FakeOpenAIServer, serve: Any) -> None:
    agent = AsyncAgent(served_llm(model, True))
    client = openai_client(mode, serve(agent))
    assert resolve(client.chat([{"role": "user", "content": "hi"}])) == "echo hi after 0 earlier"
    # self-contained requests: the earlier turns are the request's own, and nothing stays behind
    history = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": "second"},
    ]
    assert resolve(client.chat(history)) == "echo second after 1 earlier"
    assert agent.memory.sessions() == []
    # the `user` field is metadata, not a session (an X-Session-Id header is: test_openai_route.py)
    assert resolve(client.chat([{"role": "user", "content": "one"}], user="u1")) == "echo one after 0 earlier"
    assert resolve(client.chat([{"role": "user", "content": "two"}], user="u1")) == "echo two after 0 earlier"
    assert agent.memory.sessions() == []
    if isinstance(client, GPTAPI):  # the async client's sessions close with their event loops
        client.close()


def test_openai_streaming_and_errors(mode: str, model: FakeOpenAIServer, serve: Any) -> None:
    server = serve(StreamingAgent(served_llm(model, False)))
    client = openai_client(mode, server)
    items = collect(client.stream_chat([{"role": "user", "content": "stream it"}]))
    texts = [text for _, text, _ in items]
    assert texts[-1] == "echo stream it after 0 earlier" and len(texts) > 3
    assert all(texts[-1].startswith(t) for t in texts)
    request = urllib.request.Request(server.url + "/v1/chat/completions", data=b'{"messages": []}', method="POST")
    with pytest.raises(urllib.error.HTTPError) as bad:
        urllib.request.urlopen(request, timeout=10)
    assert bad.value.code == 400 and json.loads(bad.value.read())["error"]["type"] == "invalid_request_error"
    bad.value.close()
    with urllib.request.urlopen(server.url + "/v1/models", timeout=10) as listing:
        assert json.loads(listing.read())["data"][0]["id"] == "plait-agent"  # the operator's name
    if isinstance(client, GPTAPI):  # the async client's sessions close with their event loops
        client.close()


def test_openai_route_streams_a_tool_using_agent(serve: Any) -> None:
    from plait.actions import get_tool
    from plait.agents.function_calling import StreamingFunctionCallingAgent

    def handler(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return Reply(f"The product is {last['content']}.")
        return Reply("Let me compute.", tool_calls=[("Calculator", {"expression": "6 * 7"})])

    with FakeOpenAIServer(handler=handler, chunk_delay=0.01) as fake:
        agent = StreamingFunctionCallingAgent(served_llm(fake, False), [get_tool("Calculator")], "Use tools.")
        client = GPTAPI(model_type="served", api_base=serve(agent).url + "/v1", key="unused", retry=0)
        texts = [text for _, text, _ in client.stream_chat([{"role": "user", "content": "6 times 7?"}])]
        assert texts[-1] == "Let me compute.\n\nThe product is 42."  # both replies; nothing taken back
        assert client.chat([{"role": "user", "content": "6 times 7?"}]) == "The product is 42."
        client.close()


def test_async_client_state_dict_is_synchronous_as_in_lagent() -> None:
    assert not inspect.iscoroutinefunction(AsyncHTTPAgentClient.state_dict)
    assert inspect.iscoroutinefunction(AsyncHTTPAgentClient.astate_dict)
    assert inspect.iscoroutinefunction(AsyncHTTPAgentClient.__call__)


def test_the_server_runs_async_agents_on_its_loop() -> None:
    from plait.distributed.http_serve._calls import agent_chunks
    from plait.testing import AsyncFunctionLLM

    threads: list[str] = []

    async def reply(messages: Any, params: Any) -> str:
        threads.append(threading.current_thread().name)
        return "pong"

    async def run() -> list[Any]:
        return [chunk async for chunk in agent_chunks(AsyncAgent(AsyncFunctionLLM(reply)), ["ping"], {})]

    chunks = asyncio.run(run())
    assert chunks[-1].content == "pong" and threads == [threading.main_thread().name]
