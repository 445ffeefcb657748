"""A served agent faces untrusted clients: schema-checked bodies, tokens, tenants, JSON errors, connection limits."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _support import resolve
from plait.agents import Agent, AsyncAgent
from plait.distributed import AgentAPIServer, AsyncHTTPAgentClient, HTTPAgentClient, HTTPAgentServer
from plait.distributed.http_serve.access import is_loopback, read_tokens
from plait.distributed.http_serve.app import ServerLimits
from plait.exceptions import RemoteAgentError, UserError
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.testing.fake_openai import FakeOpenAIServer

SECRET_KEY = "sk-upstream-1234567890"


@pytest.fixture
def serve() -> Iterator[Callable[..., AgentAPIServer]]:
    servers: list[AgentAPIServer] = []

    def start(agent: Any, **options: Any) -> AgentAPIServer:
        server = AgentAPIServer(agent, port=0, **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def llm_for(model: FakeOpenAIServer, asynchronous: bool = True) -> Any:
    return (AsyncGPTAPI if asynchronous else GPTAPI)(model_type="m", api_base=model.base_url, key=SECRET_KEY, retry=0)


def http(
    server: AgentAPIServer,
    path: str,
    body: object = None,
    token: str | None = None,
    raw: bytes | None = None,
    session: str | None = None,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """(status, JSON body, headers) of one request; every answer must be JSON."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **({"X-Session-Id": session} if session else {})}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(server.url + path, data=data, headers=headers, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        with error:
            text = error.read()
            assert error.headers["Content-Type"].startswith("application/json"), text[:200]
            return error.code, json.loads(text), dict(error.headers)


# -- request bodies: a schema, never forwarded ------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        {"extra_body": {"model": "other", "messages": []}},
        {"timeout": 0.001},
        {"model": "gpt-4-expensive"},
        {"max_tokens": 10},
        {"tools": [{"type": "function", "function": {"name": "x"}}]},
    ],
)
def test_unknown_fields_are_refused_and_never_reach_the_model(
    model: FakeOpenAIServer, serve: Any, extra: dict[str, Any]
) -> None:
    server = serve(AsyncAgent(llm_for(model)))
    status, body, _ = http(server, "/chat_completion", {"message": "hi", "session_id": 1, **extra})
    assert status == 400 and body["error"]["type"] == "UserError"
    assert next(iter(extra)) in body["error"]["message"] and "message" in body["error"]["message"]
    assert model.requests == []


def test_allowed_generation_fields_reach_the_model_within_caps(model: FakeOpenAIServer, serve: Any) -> None:
    server = serve(AsyncAgent(llm_for(model)), limits=ServerLimits(max_new_tokens=100))
    ok = {"message": "hi", "session_id": "u", "temperature": 0.3, "max_new_tokens": 50, "stop_words": ["END"]}
    status, reply, _ = http(server, "/chat_completion", ok)
    assert status == 200 and reply["content"] == "echo hi after 0 earlier"
    sent = model.requests[-1]
    assert (sent["model"], sent["temperature"], sent["max_tokens"], sent["stop"]) == ("m", 0.3, 50, ["END"])
    assert [m["role"] for m in sent["messages"]] == ["user"]
    for bad in (
        {"max_new_tokens": 101},
        {"temperature": 9},
        {"temperature": "hot"},
        {"top_p": float("nan")},
        {"stop_words": ["x"] * 50},
        {"max_new_tokens": True},
    ):
        status, body, _ = http(server, "/chat_completion", {"message": "hi", **bad})
        assert status == 400 and body["error"]["type"] == "UserError", bad
    assert len(model.requests) == 1


@pytest.mark.parametrize(
    "raw",
    [
        b'{"message": "hi", "session_id": [1, 2]}',
        b'{"message": 5}',
        b'{"message": [{"content": {"x": 1}, "sender": []}]}',
        b'{"message": "hi", "stream": "yes"}',
        b'{"message": "hi", "session_id": ' + b"9" * 5000 + b"}",
        b'{"message": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b"[1, 2]",
        b"not json",
        b'{"message": "\\ud800"}',
    ],
)
def test_malformed_bodies_are_json_400s(model: FakeOpenAIServer, serve: Any, raw: bytes) -> None:
    server = serve(AsyncAgent(llm_for(model)))
    status, body, _ = http(server, "/chat_completion", raw=raw)
    if raw == b'{"message": "\\ud800"}':  # a lone surrogate is cleaned, not an error
        assert status == 200 and model.requests[-1]["messages"][-1]["content"] == "\ufffd"
        return
    assert status == 400 and set(body["error"]) == {"type", "message"}
    assert http(server, "/health_check")[0] == 200


def test_openai_route_checks_its_body_and_passes_only_generation_fields(model: FakeOpenAIServer, serve: Any) -> None:
    server = serve(AsyncAgent(llm_for(model)), limits=ServerLimits(max_new_tokens=64))
    base = {"messages": [{"role": "user", "content": "hi"}]}
    status, body, _ = http(server, "/v1/chat/completions", {**base, "user": ["a", "list"]})
    assert status == 400 and body["error"]["type"] == "invalid_request_error"  # was a plain-text 500
    status, body, _ = http(server, "/v1/chat/completions", {**base, "max_tokens": 65})
    assert status == 400
    status, body, _ = http(server, "/v1/chat/completions", {"messages": ["just a string"]})
    assert status == 400
    for field, value in {"extra_body": {"model": "x"}, "timeout": 1, "n": 3}.items():  # were silently dropped
        status, body, _ = http(server, "/v1/chat/completions", {**base, field: value})
        assert status == 400 and body["error"]["param"] == field
    extra = {"max_tokens": 32, "stop": "END", "n": 1, "model": "any"}
    status, body, _ = http(server, "/v1/chat/completions", {**base, **extra})
    assert status == 200 and body["choices"][0]["message"]["content"] == "echo hi after 0 earlier"
    sent = model.requests[-1]
    assert (sent["model"], sent["max_tokens"], sent["stop"]) == ("m", 32, ["END"]) and "n" not in sent


def test_aiohttp_errors_are_json_too(model: FakeOpenAIServer, serve: Any) -> None:
    server = serve(AsyncAgent(llm_for(model)), limits=ServerLimits(max_body_bytes=1 << 20))
    assert http(server, "/nowhere")[0] == 404
    status, _, headers = http(server, "/chat_completion")  # GET on a POST route
    assert status == 405 and "POST" in headers["Allow"]
    big = b'{"message": "' + b"x" * (50 << 20) + b'"}'
    try:
        status, body, _ = http(server, "/chat_completion", raw=big)
        assert status == 413 and body["error"]["type"] == "RequestEntityTooLarge"
    except (ConnectionError, urllib.error.URLError):  # the server may close before reading 50 MB: also a refusal
        pass
    assert http(server, "/health_check")[0] == 200 and model.requests == []


# -- tokens and tenants ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_token_guards_every_route(mode: str, model: FakeOpenAIServer, serve: Any) -> None:
    server = serve(AsyncAgent(llm_for(model)), token="t0ken-abc")
    for path, body in [
        ("/health_check", None),
        ("/memory/1", None),
        ("/chat_completion", {"message": "hi"}),
        ("/v1/models", None),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}),
    ]:
        for token in (None, "wrong", "t0ken-ab"):
            status, error, headers = http(server, path, body, token=token)
            assert (
                status == 401 and error["error"]["type"] == "Unauthorized" and headers["WWW-Authenticate"] == "Bearer"
            )
    assert model.requests == []
    assert http(server, "/health_check", token="t0ken-abc")[0] == 200
    client = (AsyncHTTPAgentClient if mode == "async" else HTTPAgentClient)(
        server.host, server.port, 30, token="t0ken-abc"
    )
    assert "t0ken" not in repr(client)
    assert resolve(client("hi", session_id=7)).content == "echo hi after 0 earlier"
    assert len(client.state_dict(7)["memory"]) == 2
    anonymous = (AsyncHTTPAgentClient if mode == "async" else HTTPAgentClient)(server.host, server.port, 30)
    with pytest.raises(RemoteAgentError) as info:
        resolve(anonymous("hi"))
    assert info.value.status == 401
    resolve(client.close())
    resolve(anonymous.close())


def test_tenants_have_separate_sessions(model: FakeOpenAIServer, serve: Any) -> None:
    server = serve(AsyncAgent(llm_for(model)), token={"alice": "alice-token", "bob": "bob-token"})
    for text in ("one", "two"):
        assert http(server, "/chat_completion", {"message": text, "session_id": 1}, "alice-token")[0] == 200
    status, reply, _ = http(server, "/chat_completion", {"message": "mine", "session_id": 1}, "bob-token")
    assert status == 200 and reply["content"] == "echo mine after 0 earlier"  # bob's session 1 is not alice's
    alice = http(server, "/memory/1", token="alice-token")[1]
    bob = http(server, "/memory/1", token="bob-token")[1]
    assert [m["content"] for m in alice["memory"]][::2] == ["one", "two"] and len(bob["memory"]) == 2
    v1 = {"messages": [{"role": "user", "content": "hey"}]}
    assert http(server, "/v1/chat/completions", v1, "bob-token", session="1")[1]["choices"][0]["message"][
        "content"
    ].startswith("echo hey after 1")
    assert len(http(server, "/memory/1", token="alice-token")[1]["memory"]) == 4


def test_serving_beyond_loopback_needs_a_token() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("") and not is_loopback("example.org")
    with pytest.raises(UserError, match="PLAIT_SERVER_TOKEN"):
        AgentAPIServer(
            AsyncAgent(GPTAPI(model_type="m", api_base="http://127.0.0.1:9/v1", key="k")), "0.0.0.0", 0
        ).start()


def test_token_files_must_be_private(tmp_path: Path) -> None:
    file = tmp_path / "tokens"
    file.write_text("alice:a-token\nbob: b-token\n")
    file.chmod(0o644)
    with pytest.raises(UserError, match="chmod 600"):
        read_tokens(file)
    file.chmod(0o600)
    assert read_tokens(file) == {"alice": "a-token", "bob": "b-token"}
    file.write_text("# one token\nsolo-token\n")
    assert read_tokens(file) == "solo-token"


# -- connections ----------------------------------------------------------------------------------------


def test_half_open_connections_neither_pile_up_nor_block_the_health_check(model: FakeOpenAIServer, serve: Any) -> None:
    server = serve(AsyncAgent(llm_for(model)), limits=ServerLimits(max_connections=64, idle_timeout=0.5))
    hoard = []
    for _ in range(1000):  # connect, send nothing (or half a request line)
        sock = socket.create_connection((server.host, server.port))
        sock.sendall(b"GET /health_ch")
        hoard.append(sock)
    started = time.monotonic()
    status, body, _ = http(server, "/health_check")  # answered at once, as JSON: healthy, or over the cap
    assert (status, body.get("status")) == (200, "ok") or (status, body["error"]["type"]) == (503, "ServiceUnavailable")
    assert time.monotonic() - started < 30  # not held up by the hoard (a bound for a hang only)
    time.sleep(1.5)  # the idle timeout closes the hoarded connections the server accepted
    answers = set()
    for sock in hoard:
        sock.settimeout(30)
        answer = sock.recv(1024)  # b'' (closed by the server) or its 503; a timeout here fails the test
        answers.add(answer[:12] if answer else b"")
        sock.close()
    assert answers <= {b"", b"HTTP/1.1 503"} and b"" in answers
    assert http(server, "/health_check")[0] == 200


# -- secrets stay off command lines ---------------------------------------------------------------------


def test_a_subprocess_server_gets_its_config_and_token_off_the_command_line(model: FakeOpenAIServer) -> None:
    config = {
        "type": "plait.agents.AsyncAgent",
        "llm": {
            "type": "plait.llms.AsyncGPTAPI",
            "model_type": "m",
            "api_base": model.base_url,
            "key": SECRET_KEY,
            "retry": 0,
        },
    }
    with HTTPAgentServer("0", config, port=_free_port(), timeout=30, token="served-token-42") as agent:
        assert agent.process is not None
        cmdline = Path(f"/proc/{agent.process.pid}/cmdline").read_bytes()
        assert SECRET_KEY.encode() not in cmdline and b"served-token-42" not in cmdline
        assert agent("hello", session_id="s").content == "echo hello after 0 earlier"
        anonymous = HTTPAgentClient(agent.host, agent.port, 30, token="")
        with pytest.raises(RemoteAgentError):
            anonymous("hello")


def test_the_cli_refuses_a_key_on_its_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    from plait.cli import main

    assert main(["run", "--api-base", "http://127.0.0.1:9/v1", "--api-key", "sk-visible", "q"]) == 2
    assert "--api-key-env" in capsys.readouterr().err
    env = dict(os.environ, MY_KEY="sk-from-env")
    probe = (
        "import sys, plait.cli as c, plait._cli_agent as s; "
        "a = c._parser().parse_args(sys.argv[1:]); print(s._api_key(a))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, "run", "--api-key-env", "MY_KEY", "q"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "sk-from-env"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_sync_agents_get_the_same_checks(model: FakeOpenAIServer, serve: Any) -> None:
    server = serve(Agent(llm_for(model, asynchronous=False)))
    assert http(server, "/chat_completion", {"message": "hi", "timeout": 1})[0] == 400
    assert http(server, "/chat_completion", {"message": "hi", "top_k": 5})[0] == 200
