"""Agents in Ray actors, on a real local Ray runtime (one CPU), talking to a fake model server."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from plait.exceptions import MissingDependencyError, UserError
from plait.testing.fake_openai import FakeOpenAIServer, Reply

ray = pytest.importorskip("ray", reason="the Ray tests need the 'ray' extra (test extra)")

from plait.distributed.ray_serve import AgentRayActor, AsyncAgentRayActor  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_runtime() -> Iterator[None]:
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture
def model() -> Iterator[FakeOpenAIServer]:
    def echo(body: dict[str, Any]) -> Reply:
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        return Reply(f"echo {users[-1]} after {len(users) - 1} earlier")

    with FakeOpenAIServer(handler=echo) as server:
        yield server


def test_an_agent_in_an_actor(ray_runtime: None, model: FakeOpenAIServer) -> None:
    llm = {"type": "plait.llms.GPTAPI", "model_type": "m", "api_base": model.base_url, "key": "k"}
    agent = AgentRayActor({"type": "plait.agents.Agent", "llm": llm})
    try:
        assert agent("hello", session_id="a").content == "echo hello after 0 earlier"
        assert agent("again", session_id="a").content == "echo again after 1 earlier"
        assert agent("other", session_id="b").content == "echo other after 0 earlier"
        assert [m["content"] for m in agent.state_dict("a")["memory"]][::2] == ["hello", "again"]
        agent.reset("a")
        assert agent.state_dict("a")["memory"] == []
    finally:
        agent.kill()


def test_an_async_agent_in_an_actor(ray_runtime: None, model: FakeOpenAIServer) -> None:
    from plait.agents import AsyncAgent
    from plait.llms import AsyncGPTAPI

    llm = {"type": AsyncGPTAPI, "model_type": "m", "api_base": model.base_url, "key": "k"}
    agent = AsyncAgentRayActor({"type": AsyncAgent, "llm": llm})

    async def main() -> list[str]:
        replies = await asyncio.gather(*(agent(f"q{i}", session_id=i) for i in range(4)))
        return [r.content for r in replies]

    try:
        assert asyncio.run(main()) == [f"echo q{i} after 0 earlier" for i in range(4)]
        assert len(asyncio.run(agent.state_dict(2))["memory"]) == 2
    finally:
        agent.kill()


def test_streaming_agents_and_bad_configs_are_refused(ray_runtime: None) -> None:
    with pytest.raises(UserError, match="http_serve"):
        AgentRayActor({"type": "plait.agents.StreamingAgent"})
    with pytest.raises(UserError, match="'type'"):
        AgentRayActor({"llm": None})


def test_missing_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingDependencyError, match=r"plait\[ray\]"):
        AgentRayActor({"type": "plait.agents.Agent"})
