"""One client cannot starve another: connection caps per client address, a reserved way in for the health check,
request-head deadlines. Real servers, real sockets on 127.0.0.x (one address per client)."""

from __future__ import annotations

import asyncio
import json
import resource
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from plait.agents import AsyncAgent
from plait.distributed import AgentAPIServer, AsyncHTTPAgentClient
from plait.distributed.http_serve.app import ServerLimits
from plait.distributed.http_serve.connections import RESERVE_PER_CLIENT, client_of
from plait.exceptions import UserError
from plait.llms import AsyncGPTAPI
from plait.testing.fake_openai import FakeOpenAIServer, Reply

HOARDER = "127.0.0.2"  # Linux routes all of 127/8 to loopback: each address is another client
OTHER = "127.0.0.1"


@pytest.fixture
def serve(model: FakeOpenAIServer) -> Iterator[Callable[..., AgentAPIServer]]:
    servers: list[AgentAPIServer] = []

    def start(**options: Any) -> AgentAPIServer:
        llm = AsyncGPTAPI(model_type="m", api_base=model.base_url, key="k", retry=0)
        server = AgentAPIServer(AsyncAgent(llm), port=0, **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def connect(server: AgentAPIServer, source: str) -> socket.socket:
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect((server.host, server.port))
    sock.settimeout(10)
    return sock


def hold(server: AgentAPIServer, source: str) -> socket.socket:
    """A kept-alive connection from `source`, answered once (so the server surely holds it), then idle."""
    sock = connect(server, source)
    sock.sendall(b"GET /health_check HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):  # the JSON body ends the answer
        chunk = sock.recv(65536)
        assert chunk, f"closed by the server: {answer!r}"
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer
    return sock


def ask(server: AgentAPIServer, source: str, method: str, path: str, body: object = None) -> tuple[int, dict[str, Any]]:
    """One request from `source` on a fresh connection: (status, JSON body); the server closes it after."""
    data = b"" if body is None else json.dumps(body).encode()
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(data)}\r\n"
    with connect(server, source) as sock:
        sock.sendall(head.encode() + b"Content-Type: application/json\r\n\r\n" + data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


def until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait for a mechanism to act (generous: the machine may be busy)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def chat(server: AgentAPIServer, source: str, text: str) -> tuple[int, dict[str, Any]]:
    return ask(server, source, "POST", "/chat_completion", {"message": text, "session_id": f"{source}-chat"})


@pytest.fixture
def many_files() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096 <= hard or (hard == resource.RLIM_INFINITY and soft < 4096):
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, hard))
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 2000, "600 client and server sockets need the fds"


def test_600_dripping_connections_of_one_client_neither_fail_the_health_check_nor_starve_another(
    serve: Callable[..., AgentAPIServer], many_files: None
) -> None:
    server = serve()  # the default limits: 512 connections, 64 per client address
    hoard = []
    for _ in range(600):  # partial headers, dripped: a slowloris client
        sock = connect(server, HOARDER)
        sock.sendall(b"POST /chat_completion HTTP/1.1\r\nHost: x\r\n")
        hoard.append(sock)
    for sock in hoard:
        try:
            sock.sendall(b"X-Drip: 1\r\n")
        except OSError:  # refused already: answered and closed by the server
            pass
    status, health = ask(server, OTHER, "GET", "/health_check")
    assert (status, health["status"]) == (200, "ok")
    status, reply = chat(server, OTHER, "hi")
    assert (status, reply["content"]) == (200, "echo hi after 0 earlier")
    # the mechanism: the hoarder holds its share (and its reserved slots), the rest is refused at once
    share = ServerLimits().max_connections_per_client + RESERVE_PER_CLIENT
    until(lambda: server.gate.admitted + server.gate.refused == 600 + 2, "every connection to be admitted or refused")
    assert server.gate.held_by(HOARDER) <= share and server.gate.refused >= 500
    for sock in hoard:
        sock.close()


def test_one_address_beyond_its_share_is_refused_while_another_is_served(serve: Callable[..., AgentAPIServer]) -> None:
    for reserved in (0, 8):
        server = serve(
            limits=ServerLimits(max_connections_per_client=4, reserved_connections=reserved, idle_timeout=120)
        )
        held = [hold(server, HOARDER) for _ in range(4)]
        status, body = chat(server, HOARDER, "hi")
        if reserved:  # over its share, a reserved slot answers the health check, and nothing else
            assert (status, body["error"]["type"]) == (503, "ServiceUnavailable")
            assert ask(server, HOARDER, "GET", "/health_check")[0] == 200
        else:
            assert (status, body["error"]["type"]) == (429, "TooManyRequests")
            assert ask(server, HOARDER, "GET", "/health_check")[0] == 429
            assert server.gate.refused == 2
        # another address is served as if nothing happened
        status, reply = chat(server, OTHER, "hi")
        assert (status, reply["content"]) == (200, "echo hi after 0 earlier")
        for sock in held:
            sock.close()
        until(lambda gate=server.gate: gate.held_by(HOARDER) == 0, "the closed connections to be counted out")
        assert chat(server, HOARDER, "back")[0] == 200


def test_the_health_check_has_a_reserved_way_in_when_every_connection_is_taken(
    serve: Callable[..., AgentAPIServer],
) -> None:
    server = serve(limits=ServerLimits(max_connections=4, idle_timeout=120))
    held = [hold(server, f"127.0.0.{n}") for n in range(2, 6)]  # four clients, one connection each
    assert ask(server, OTHER, "GET", "/health_check")[0] == 200
    status, body = chat(server, OTHER, "hi")
    assert (status, body["error"]["type"]) == (503, "ServiceUnavailable")
    held.pop().close()
    until(lambda: server.gate.open == 3, "a connection to be freed")
    assert chat(server, OTHER, "hi")[0] == 200
    for sock in held:
        sock.close()


def test_a_dripping_request_head_is_cut_by_the_header_deadline_and_an_idle_one_is_not(
    serve: Callable[..., AgentAPIServer],
) -> None:
    server = serve(limits=ServerLimits(header_timeout=0.5, idle_timeout=120))
    idle = connect(server, OTHER)
    dripping = connect(server, HOARDER)
    dripping.sendall(b"GET /health_check HTTP/1.1\r\n")
    dripping.settimeout(0.2)
    answer = b""
    deadline = time.monotonic() + 60  # the idle timeout (120 s) must not be what cuts it
    while time.monotonic() < deadline:
        try:
            dripping.sendall(b"X")  # one byte at a time: never a complete head
        except OSError:
            pass
        try:
            answer = dripping.recv(1024)
            break
        except TimeoutError:
            continue
    assert answer.startswith(b"HTTP/1.1 408")
    assert server.gate.heads_cut == 1 and server.gate.idle_closed == 0
    idle.setblocking(False)
    with pytest.raises(BlockingIOError):  # still open: the idle connection has its own, longer deadline
        idle.recv(1)
    idle.settimeout(10)
    idle.sendall(b"GET /health_check HTTP/1.1\r\nHost: x\r\n\r\n")
    assert idle.recv(1024).startswith(b"HTTP/1.1 200")
    idle.close()
    dripping.close()


def test_plaits_own_client_queues_calls_beyond_one_addresses_share_instead_of_being_refused() -> None:
    calls = 80  # more at once than one client address may hold (64)
    with FakeOpenAIServer(handler=lambda body: Reply("slow", delay=1.0)) as model:
        llm = AsyncGPTAPI(model_type="m", api_base=model.base_url, key="k", retry=0)
        with AgentAPIServer(AsyncAgent(llm), port=0) as server:

            async def run() -> list[str]:
                client = AsyncHTTPAgentClient(server.host, server.port, timeout=120)
                try:
                    replies = await asyncio.gather(*(client("hi", session_id=n) for n in range(calls)))
                finally:
                    await client.close()
                return [str(reply.content) for reply in replies]

            assert asyncio.run(run()) == ["slow"] * calls
            assert server.gate.refused == 0 and server.gate.admitted <= ServerLimits().max_connections_per_client


def test_clients_are_counted_by_address_and_ipv6_by_its_64_network() -> None:
    assert client_of(("127.0.0.2", 5000)) == "127.0.0.2"
    assert client_of(("::ffff:10.0.0.7", 5000, 0, 0)) == "10.0.0.7"
    assert client_of(("2001:db8::1", 1, 0, 0)) == client_of(("2001:db8::ffff", 2, 0, 0)) == "2001:db8::/64"
    assert client_of(("2001:db8:0:1::1", 1, 0, 0)) != client_of(("2001:db8::1", 1, 0, 0))
    assert client_of("") == ""  # a Unix socket: one client


@pytest.mark.parametrize(
    "limits",
    [
        {"max_connections_per_client": 0},
        {"header_timeout": 0},
        {"reserved_connections": -1},
        {"session_ttl": -5},
        {"max_sessions_per_tenant": 0},
    ],
)
def test_limits_out_of_range_fail_at_construction(limits: dict[str, Any]) -> None:
    with pytest.raises(UserError):
        ServerLimits(**limits)
