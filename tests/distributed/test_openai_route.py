"""The served agent's OpenAI-compatible route is faithful (issue 16): real finish reasons and usage, the
client's system messages, sessions only by header, a request log, and sessions that can be deleted."""

from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from plait.actions import Calculator
from plait.agents import AsyncAgent, AsyncStreamingAgent, FunctionCallingAgent
from plait.distributed import AgentAPIServer
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.memory import SessionStore
from plait.testing.fake_openai import FakeOpenAIServer, Reply, _prompt_tokens


def echo(body: dict[str, Any]) -> Reply:
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    if "essay" in users[-1]:
        return Reply("Rome was founded", finish_reason="length", usage={"prompt_tokens": 40, "completion_tokens": 3})
    return Reply(f"echo {users[-1]} after {len(users) - 1} earlier", usage={"prompt_tokens": 7, "completion_tokens": 5})


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(handler=echo) as server:
        yield server


@pytest.fixture
def served(model: FakeOpenAIServer) -> Iterator[AgentAPIServer]:
    llm = AsyncGPTAPI(model_type="m", api_base=model.base_url, key="k", retry=0)
    server = AgentAPIServer(AsyncAgent(llm, template="You are the served agent."), port=0).start()
    yield server
    server.stop()


def post(server: AgentAPIServer, body: dict[str, Any], session: str | None = None) -> Any:
    headers = {"Content-Type": "application/json", **({"X-Session-Id": session} if session else {})}
    request = urllib.request.Request(
        server.url + "/v1/chat/completions", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read().decode()
    if body.get("stream"):
        return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]
    return json.loads(raw)


def text(reply: dict[str, Any]) -> str:
    return str(reply["choices"][0]["message"]["content"])


def ask(text: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], **extra}


def test_finish_reason_and_usage_are_the_model_calls_own(served: AgentAPIServer) -> None:
    reply = post(served, ask("hi"))
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"] == {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}  # was always 0
    cut = post(served, ask("write an essay"))
    assert cut["choices"][0]["finish_reason"] == "length"  # was 'stop'
    assert cut["usage"]["completion_tokens"] == 3


def test_usage_is_summed_over_a_tool_using_agents_calls() -> None:
    script = [Reply("", tool_calls=[("Calculator.run", {"expression": "6*7"})]), Reply("42")]
    with FakeOpenAIServer(script) as model:
        agent = FunctionCallingAgent(GPTAPI(model_type="m", api_base=model.base_url, key="k", retry=0), [Calculator()])
        server = AgentAPIServer(agent, port=0).start()
        try:
            reply = post(server, ask("what is 6*7?"))
        finally:
            server.stop()
    assert reply["choices"][0]["message"]["content"] == "42"
    calls = reply["choices"][0]["message"]["plait_tool_calls"]  # the extension field
    assert calls == [{"tool": "Calculator", "arguments": '{"expression": "6*7"}', "result": "42", "ok": True}]
    assert len(model.requests) == 2
    expected = sum(_prompt_tokens(body) for body in model.requests)  # the fake counts words
    assert reply["usage"]["prompt_tokens"] == expected > 0  # both model calls summed


def test_the_clients_system_message_reaches_the_model(served: AgentAPIServer, model: FakeOpenAIServer) -> None:
    system = {"role": "system", "content": "Answer only in French."}
    post(served, {"messages": [system, {"role": "user", "content": "hello"}]})
    sent = model.requests[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "You are the served agent."}  # the agent's own prompt first
    assert any("Answer only in French." in str(m["content"]) for m in sent[1:])
    post(served, {"messages": [system, {"role": "user", "content": "again"}]}, session="s-sys")
    assert any("Answer only in French." in str(m["content"]) for m in model.requests[-1]["messages"][1:])


def test_the_user_field_is_metadata_and_a_session_header_joins_turns(
    served: AgentAPIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="plait.serve")
    assert post(served, ask("one", user="ann"))["choices"][0]["message"]["content"] == "echo one after 0 earlier"
    assert post(served, ask("two", user="ann"))["choices"][0]["message"]["content"] == "echo two after 0 earlier"
    assert (
        post(served, ask("three"), session="conv-1")["choices"][0]["message"]["content"] == "echo three after 0 earlier"
    )
    assert (
        post(served, ask("four"), session="conv-1")["choices"][0]["message"]["content"] == "echo four after 1 earlier"
    )
    lines = [r.getMessage() for r in caplog.records if r.name == "plait.serve"]
    assert any("session=(none) user=ann -> 200" in line for line in lines)
    assert any("session=conv-1 user=- -> 200" in line for line in lines)


def test_a_stream_ends_with_its_finish_reason_and_usage(model: FakeOpenAIServer) -> None:
    llm = AsyncGPTAPI(model_type="m", api_base=model.base_url, key="k", retry=0)
    server = AgentAPIServer(AsyncStreamingAgent(llm), port=0).start()
    try:
        chunks = post(server, ask("write an essay", stream=True, stream_options={"include_usage": True}))
        plain = post(server, ask("hi", stream=True))
    finally:
        server.stop()
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "Rome was founded"
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 3
    assert all(c["choices"] for c in plain) and plain[-1]["choices"][0]["finish_reason"] == "stop"


def test_a_session_can_be_deleted(model: FakeOpenAIServer, tmp_path: Any) -> None:
    llm = AsyncGPTAPI(model_type="m", api_base=model.base_url, key="k", retry=0)
    store = SessionStore(tmp_path / "s.db")
    server = AgentAPIServer(store.attach(AsyncAgent(llm)), port=0).start()
    try:
        post(server, ask("remember me"), session="gone")
        assert len(json.loads(urllib.request.urlopen(server.url + "/memory/gone").read())["memory"]) == 2
        delete = urllib.request.Request(server.url + "/memory/gone", method="DELETE")
        with urllib.request.urlopen(delete, timeout=10) as response:
            assert json.loads(response.read()) == {"deleted": "gone"}
        assert json.loads(urllib.request.urlopen(server.url + "/memory/gone").read())["memory"] == []
        store.flush()
        assert store.read("memory", "gone") is None  # gone from the file too
    finally:
        server.stop()
        store.close()


def test_a_streamed_answer_shows_the_tool_calls_as_they_happen() -> None:
    from plait.agents import StreamingFunctionCallingAgent

    script = [Reply("", tool_calls=[("Calculator.run", {"expression": "6*7"})]), Reply("It is 42.")]
    with FakeOpenAIServer(script) as model:
        llm = GPTAPI(model_type="m", api_base=model.base_url, key="k", retry=0)
        server = AgentAPIServer(StreamingFunctionCallingAgent(llm, [Calculator()]), port=0).start()
        try:
            chunks = post(server, ask("what is 6*7?", stream=True))
        finally:
            server.stop()
    events = [c for c in chunks if "plait_tool_calls" in c]
    assert len(events) == 1 and events[0]["plait_tool_calls"][0]["result"] == "42"
    assert events[0]["choices"][0]["delta"] == {}  # no text in a tool event
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text.endswith("It is 42.")
    last_text = max(i for i, c in enumerate(chunks) if c["choices"] and c["choices"][0]["delta"].get("content"))
    assert chunks.index(events[0]) < last_text  # the tool event came before the answer's text


def test_the_official_openai_client_sees_a_faithful_endpoint(served: AgentAPIServer, model: FakeOpenAIServer) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)
    cut = client.chat.completions.create(model="agent", messages=[{"role": "user", "content": "write an essay"}])
    assert cut.choices[0].finish_reason == "length" and cut.usage is not None and cut.usage.completion_tokens == 3
    french = [{"role": "system", "content": "Answer only in French."}, {"role": "user", "content": "hello"}]
    client.chat.completions.create(model="agent", messages=french)
    assert any("Answer only in French." in str(m["content"]) for m in model.requests[-1]["messages"])
    one = client.chat.completions.create(model="agent", messages=[{"role": "user", "content": "a"}], user="ann")
    two = client.chat.completions.create(model="agent", messages=[{"role": "user", "content": "b"}], user="ann")
    assert (one.choices[0].message.content, two.choices[0].message.content) == (
        "echo a after 0 earlier",
        "echo b after 0 earlier",  # one end user's two conversations stay apart
    )
    session = {"X-Session-Id": "joined"}
    for text in ("c", "d"):
        last = client.chat.completions.create(
            model="agent", messages=[{"role": "user", "content": text}], extra_headers=session
        )
    assert last.choices[0].message.content == "echo d after 1 earlier"  # the header joins them
    stream = client.chat.completions.create(
        model="agent",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "echo hi after 0 earlier"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 12
    client.close()
