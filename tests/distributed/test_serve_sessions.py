"""A served agent's sessions leave memory: after `session_ttl` unused, or beyond a tenant's cap (never another
tenant's); with a SessionStore attached they come back on their next request."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from plait.agents import Agent, AsyncAgent
from plait.distributed import AgentAPIServer
from plait.distributed.http_serve.app import ServerLimits
from plait.distributed.http_serve.sessions import SessionTable
from plait.llms import AsyncGPTAPI
from plait.memory import SessionStore
from plait.testing import ScriptedLLM
from plait.testing.fake_openai import FakeOpenAIServer

TOKENS = {"alice": "alice-token", "bob": "bob-token"}


@pytest.fixture
def serve(model: FakeOpenAIServer, tmp_path: Path) -> Iterator[Callable[..., AgentAPIServer]]:
    servers: list[AgentAPIServer] = []
    stores: list[SessionStore] = []

    def start(store: bool = False, **options: Any) -> AgentAPIServer:
        agent = AsyncAgent(AsyncGPTAPI(model_type="m", api_base=model.base_url, key="k", retry=0))
        if store:
            stores.append(SessionStore(tmp_path / f"sessions-{len(stores)}.db"))
            stores[-1].attach(agent)
        server = AgentAPIServer(agent, port=0, **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
    for session_store in stores:
        session_store.close()


def post(server: AgentAPIServer, path: str, body: object, token: str | None = None, **headers: str) -> dict[str, Any]:
    request = urllib.request.Request(
        server.url + path,
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            **headers,
            **({"Authorization": f"Bearer {token}"} if token else {}),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer
    except urllib.error.HTTPError as error:
        with error:
            raise AssertionError(f"{error.code}: {error.read()!r}") from None


def chat(server: AgentAPIServer, session: str, text: str, token: str | None = None) -> str:
    return str(post(server, "/chat_completion", {"message": text, "session_id": session}, token)["content"])


def until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait for a mechanism to act (generous: the machine may be busy)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def memory_map(server: AgentAPIServer) -> dict[Any, Any]:
    held: dict[Any, Any] = server.agent.memory.memory_map
    return held


@pytest.mark.parametrize("store", [False, True], ids=["no-store", "store"])
def test_idle_sessions_leave_memory_and_come_back_from_a_store(
    store: bool, serve: Callable[..., AgentAPIServer]
) -> None:
    server = serve(store, limits=ServerLimits(session_ttl=0.2))
    assert chat(server, "s", "one") == "echo one after 0 earlier"
    v1 = {"messages": [{"role": "user", "content": "hey"}]}
    assert post(server, "/v1/chat/completions", v1, **{"X-Session-Id": "v"})["choices"][0]["message"]["content"] == (
        "echo hey after 0 earlier"
    )
    until(lambda: server.sessions.evicted == 2, "both idle sessions to be dropped")
    assert len(server.sessions) == 0 and "s" not in memory_map(server) and "v" not in memory_map(server)
    # back on the next request: read from the store, or (without one) forgotten
    assert chat(server, "s", "two") == f"echo two after {1 if store else 0} earlier"
    state = json.loads(urllib.request.urlopen(server.url + "/memory/v", timeout=30).read())
    assert len(state["memory"]) == (2 if store else 0)


def test_a_tenant_over_its_session_cap_drops_its_own_least_recent_session_only(
    serve: Callable[..., AgentAPIServer],
) -> None:
    server = serve(True, token=TOKENS, limits=ServerLimits(session_ttl=None, max_sessions_per_tenant=2))
    assert chat(server, "b1", "mine", "bob-token") == "echo mine after 0 earlier"
    for session in ("a1", "a2", "a3"):
        chat(server, session, "hi", "alice-token")
    assert server.sessions.evicted == 1
    assert server.sessions.held("alice") == ["alice/a2", "alice/a3"] and server.sessions.held("bob") == ["bob/b1"]
    assert "alice/a1" not in memory_map(server) and "bob/b1" in memory_map(server)
    assert chat(server, "b1", "again", "bob-token") == "echo again after 1 earlier"
    assert chat(server, "a1", "back", "alice-token") == "echo back after 1 earlier"  # read back from the store
    assert server.sessions.held("alice") == ["alice/a3", "alice/a1"] and server.sessions.evicted == 2
    assert server.sessions.held("bob") == ["bob/b1"]


def test_a_session_in_use_is_never_dropped_and_a_tenants_cap_never_touches_another_tenant() -> None:
    now = [0.0]
    dropped: list[object] = []
    running = {"stuck"}  # a call outside the server's requests holds it: the agent refuses to drop it

    def evict(session: object) -> bool:
        if session in running:
            return False
        dropped.append(session)
        return True

    table = SessionTable(evict, ttl=10, max_per_tenant=2, clock=lambda: now[0])
    with table.use("alice", "alice/long"):
        now[0] = 100.0
        assert table.sweep() == 0 and dropped == []  # idle for 100 s, but in use
        table.touch("alice", "alice/a")
        table.touch("alice", "alice/b")  # over the cap: the only idle one left is the oldest... of alice's own
        table.touch("bob", "bob/x")
        assert dropped == ["alice/a"] and table.held("bob") == ["bob/x"]
    assert table.held("alice") == ["alice/b", "alice/long"]
    table.touch("bob", "stuck")
    now[0] = 200.0
    assert table.sweep() == 3 and dropped == ["alice/a", "alice/b", "alice/long", "bob/x"]
    assert table.held("bob") == ["stuck"] and len(table) == 1  # kept for a later sweep
    running.clear()
    now[0] = 300.0
    assert table.sweep() == 1 and len(table) == 0 and table.evicted == 5


def test_evict_keeps_a_stored_session_and_reset_deletes_it(tmp_path: Path) -> None:
    agent = Agent(ScriptedLLM(["first", "second", "third"]))
    with SessionStore(tmp_path / "s.db") as store:
        store.attach(agent)
        agent("hi", session_id="k")
        assert agent.evict("k") is True and "k" not in agent.memory.memory_map
        assert [m.content for m in agent.memory.get_memory("k")] == ["hi", "first"]  # read back
        agent.reset("k")
        agent.evict("k")
        assert agent.memory.get_memory("k") == []
