"""Issue 38: a served plait agent speaks A2A 1.0 to the official ``a2a-sdk`` client (JSON-RPC, on 127.0.0.1).

The SDK's own client resolves the Agent Card, sends (blocking and streamed), answers an
``input-required`` approval on the same task, cancels a working task, and reads tasks back;
the agent's model is a scripted OpenAI-compatible server (or a scripted async model).
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict
from pydantic import BaseModel

from plait.actions import BaseAction, tool_api
from plait.agents import AsyncAgent, AsyncFunctionCallingAgent, AsyncStreamingAgent
from plait.distributed import AgentAPIServer
from plait.llms import AsyncGPTAPI
from plait.testing import AsyncFunctionLLM
from plait.testing.fake_openai import FakeOpenAIServer, Reply


class Transfer(BaseAction):
    """Move money."""

    def __init__(self) -> None:
        super().__init__(requires_approval=True)
        self.paid: list[str] = []

    @tool_api
    def run(self, to: str, amount: int) -> str:
        """Send money.

        Args:
            to (str): who gets it
            amount (int): how much
        """
        self.paid.append(to)
        return f"sent {amount} to {to}"


def banker(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return Reply("done: " + messages[-1]["content"])
    users = [m["content"] for m in messages if m["role"] == "user"]
    if "pay" in users[-1]:
        return Reply("", tool_calls=[("Transfer", {"to": "bob", "amount": 5})])
    return Reply(f"echo {users[-1]} after {len(users) - 1} earlier")


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(handler=banker) as server:
        yield server


def llm(model: FakeOpenAIServer) -> AsyncGPTAPI:
    return AsyncGPTAPI(model_type="m", api_base=model.base_url, key="k", retry=0)


def ask(text: str, task_id: str = "", context_id: str = "") -> SendMessageRequest:
    message = Message(message_id=f"m-{text[:8]}", role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        message.task_id = task_id
    if context_id:
        message.context_id = context_id
    return SendMessageRequest(message=message)


async def events(client: Any, request: SendMessageRequest) -> list[StreamResponse]:
    return [event async for event in client.send_message(request)]


async def _all(stream: Any) -> list[Any]:
    return [item async for item in stream]


def answer(task: Any) -> str:
    return "".join(part.text for artifact in task.artifacts for part in artifact.parts if part.text)


def run(coro_fn: Any, server: AgentAPIServer, **config: Any) -> Any:
    async def main() -> Any:
        client = await create_client(server.url, ClientConfig(**config))
        try:
            return await coro_fn(client)
        finally:
            await client.close()

    return asyncio.run(main())


def test_the_sdk_client_reads_the_card_and_gets_answers_in_one_context(model: FakeOpenAIServer) -> None:
    agent = AsyncFunctionCallingAgent(llm(model), [Transfer()], name="Banker", description="Moves money.")
    with AgentAPIServer(agent, port=0, a2a=True) as server:
        card = fetch(server.url + "/.well-known/agent-card.json")
        assert card["name"] == "Banker" and card["description"] == "Moves money."
        assert card["supportedInterfaces"] == [
            {"url": server.url + "/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ]
        assert [skill["id"] for skill in card["skills"]] == ["Transfer"]

        async def talk(client: Any) -> Any:
            (first,) = await events(client, ask("hi"))
            context = first.task.context_id
            (second,) = await events(client, ask("again", context_id=context))
            got = await client.get_task(GetTaskRequest(id=second.task.id))
            return first.task, second.task, got

        first, second, got = run(talk, server, streaming=False)
    assert first.status.state == TaskState.TASK_STATE_COMPLETED and answer(first) == "echo hi after 0 earlier"
    assert answer(second) == "echo again after 1 earlier"  # the context is the agent's session
    assert got.status.state == TaskState.TASK_STATE_COMPLETED and answer(got) == answer(second)
    assert [Role.Name(m.role) for m in got.history] == ["ROLE_USER", "ROLE_AGENT"]


def test_a_streamed_answer_arrives_as_artifact_updates(model: FakeOpenAIServer) -> None:
    agent = AsyncStreamingAgent(llm(model))
    model.chunk_delay = 0.01
    with AgentAPIServer(agent, port=0, a2a=True) as server:
        got = run(lambda client: events(client, ask("tell me a story")), server, streaming=True)
    kinds = [event.WhichOneof("payload") for event in got]
    assert kinds[0] == "task" and kinds[-1] == "status_update"
    assert got[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    updates = [e.artifact_update for e in got if e.HasField("artifact_update")]
    assert len(updates) > 2 and updates[-1].last_chunk
    streamed = "".join(u.artifact.parts[0].text for u in updates[:-1])
    assert streamed == updates[-1].artifact.parts[0].text == "echo tell me a story after 0 earlier"


@pytest.mark.parametrize("streaming", [False, True])
def test_an_approval_pause_is_input_required_and_the_next_message_resumes_it(
    model: FakeOpenAIServer, streaming: bool
) -> None:
    transfer = Transfer()
    with AgentAPIServer(AsyncFunctionCallingAgent(llm(model), [transfer]), port=0, a2a=True) as server:

        async def pay(client: Any) -> tuple[Any, Any]:
            paused = (await events(client, ask("pay bob")))[-1]
            task_id = paused.task.id if paused.HasField("task") else paused.status_update.task_id
            waiting = await client.get_task(GetTaskRequest(id=task_id))
            assert transfer.paid == []  # nothing ran before the approval
            resumed = await events(client, ask("approve", task_id=task_id, context_id=waiting.context_id))
            assert resumed  # blocking: the finished task; streamed: its updates
            return waiting, await client.get_task(GetTaskRequest(id=task_id))

        waiting, done = run(pay, server, streaming=streaming)
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    pending = MessageToDict(waiting.status.message)["parts"][1]["data"]["pendingCalls"]
    assert [(p["name"], p["arguments"]) for p in pending] == [("Transfer", {"to": "bob", "amount": 5})]
    assert done.status.state == TaskState.TASK_STATE_COMPLETED and answer(done) == "done: sent 5 to bob"
    assert transfer.paid == ["bob"]


def test_a_rejection_by_data_part_refuses_the_call(model: FakeOpenAIServer) -> None:
    transfer = Transfer()
    with AgentAPIServer(AsyncFunctionCallingAgent(llm(model), [transfer]), port=0, a2a=True) as server:

        async def refuse(client: Any) -> Any:
            (paused,) = await events(client, ask("pay bob"))
            pending = MessageToDict(paused.task.status.message)["parts"][1]["data"]["pendingCalls"]
            reply = ask("x", task_id=paused.task.id)
            reply.message.parts[0].Clear()
            reply.message.parts[0].data.struct_value.update({"decisions": {pending[0]["id"]: "not today"}})
            (done,) = await events(client, reply)
            return done.task

        done = run(refuse, server, streaming=False)
    assert transfer.paid == [] and "not today" in answer(done)


def test_cancel_stops_a_working_task_and_its_model_call() -> None:
    started, stopped = threading.Event(), threading.Event()

    async def slow(messages: Any, params: Any) -> str:
        started.set()
        try:
            await asyncio.sleep(3600)
        finally:
            stopped.set()
        return "never"

    agent = AsyncAgent(AsyncFunctionLLM(slow))
    with AgentAPIServer(agent, port=0, a2a=True) as server:

        async def cancel(client: Any) -> tuple[Any, Any, Any]:
            (submitted,) = await events(client, ask("think hard"))  # polling: the send returns at once
            await asyncio.to_thread(started.wait, 30)
            follower = await create_client(server.url, ClientConfig(streaming=True))
            following = asyncio.ensure_future(_all(follower.subscribe(SubscribeToTaskRequest(id=submitted.task.id))))
            assert server.a2a is not None
            while not server.a2a.tasks.get("", submitted.task.id).listeners:  # subscribed
                assert not following.done(), following.result()
                await asyncio.sleep(0.01)
            canceled = await client.cancel_task(CancelTaskRequest(id=submitted.task.id))
            followed.extend(await following)
            await follower.close()
            with pytest.raises(TaskNotCancelableError) as again:  # -32002, as the SDK maps it
                await client.cancel_task(CancelTaskRequest(id=submitted.task.id))
            return submitted.task, canceled, again.value

        followed: list[StreamResponse] = []
        submitted, canceled, again = run(cancel, server, streaming=False, polling=True)
        assert len(agent.memory.get_memory(submitted.context_id)) == 0  # the turn rolled back
    assert submitted.status.state == TaskState.TASK_STATE_WORKING
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED and stopped.is_set()
    assert "cannot be canceled" in str(again)
    states = [e.task.status.state if e.HasField("task") else e.status_update.status.state for e in followed]
    assert states == [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_CANCELED]  # SubscribeToTask saw the cancel


def test_tokens_and_tenants_hold_for_a2a(model: FakeOpenAIServer) -> None:
    tokens = {"alice": "a-secret", "bob": "b-secret"}
    with AgentAPIServer(AsyncAgent(llm(model)), port=0, token=tokens, a2a=True) as server:

        async def as_(who: str, fn: Any) -> Any:
            headers = {"Authorization": f"Bearer {tokens[who]}"}
            async with httpx.AsyncClient(headers=headers) as http:
                client = await create_client(server.url, ClientConfig(streaming=False, httpx_client=http))
                return await fn(client)

        async def scenario() -> tuple[Any, Any]:
            (mine,) = await as_("alice", lambda c: events(c, ask("hi")))
            with pytest.raises(TaskNotFoundError) as theirs:
                await as_("bob", lambda c: c.get_task(GetTaskRequest(id=mine.task.id)))
            return mine.task, theirs.value

        mine, theirs = asyncio.run(scenario())
        with pytest.raises(urllib.error.HTTPError) as anonymous:
            fetch(server.url + "/.well-known/agent-card.json")
        anonymous.value.close()
    assert mine.status.state == TaskState.TASK_STATE_COMPLETED
    assert "not found" in str(theirs)  # another tenant's task does not exist for bob
    assert anonymous.value.code == 401


def post(server: AgentAPIServer, body: object, headers: dict[str, str] | None = None) -> Any:
    request = urllib.request.Request(
        server.url + "/a2a",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    return fetch(request)


def fetch(request: str | urllib.request.Request) -> Any:
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_protocol_errors_are_json_rpc_errors(model: FakeOpenAIServer) -> None:
    with AgentAPIServer(AsyncAgent(llm(model)), port=0, a2a=True) as server:
        unknown = post(server, {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}})
        no_task = post(server, {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "nope"}})
        bad = post(server, {"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message": {"parts": []}}})
        version = post(
            server, {"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": {"id": "x"}}, {"A2A-Version": "0.3"}
        )
        push = post(server, {"jsonrpc": "2.0", "id": 5, "method": "CreateTaskPushNotificationConfig", "params": {}})
        file = {"messageId": "f", "role": "ROLE_USER", "parts": [{"url": "http://x/a.png"}]}
        files = post(server, {"jsonrpc": "2.0", "id": 6, "method": "SendMessage", "params": {"message": file}})
        hello = {"messageId": "h", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        done = post(server, {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": hello}})
        after = {**hello, "messageId": "h2", "taskId": done["result"]["task"]["id"]}
        late = post(server, {"jsonrpc": "2.0", "id": 8, "method": "SendMessage", "params": {"message": after}})
        request = urllib.request.Request(server.url + "/a2a", data=b"{not json", headers={})
        parse = fetch(request)
    assert unknown["error"]["code"] == -32601 and unknown["id"] == 1
    assert no_task["error"]["code"] == -32001
    assert bad["error"]["code"] == -32602
    assert version["error"]["code"] == -32009
    assert push["error"]["code"] == -32003
    assert parse["error"]["code"] == -32700
    assert files["error"]["code"] == -32005  # content type not supported: the agent takes text and data
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert late["error"]["code"] == -32004  # a completed task takes no message (CORE-SEND-002)


class Weather(BaseModel):
    city: str
    degrees: int


def test_a_typed_answer_is_a_data_part_and_the_card_says_json() -> None:
    agent = AsyncAgent(AsyncFunctionLLM(lambda m, p: '{"city": "Rome", "degrees": 24}'), output_type=Weather)
    with AgentAPIServer(agent, port=0, a2a=True) as server:
        card = fetch(server.url + "/.well-known/agent-card.json")
        (done,) = run(lambda client: events(client, ask("weather?")), server, streaming=False)
    assert "application/json" in card["defaultOutputModes"]
    assert '"degrees"' in next(s for s in card["skills"] if s["id"] == "answer")["description"]
    parts = MessageToDict(done.task)["artifacts"][0]["parts"]
    assert parts[1]["data"] == {"city": "Rome", "degrees": 24}
