"""Rewards: the scorer's score, a user function, an environment agent in the loop; failures are the case's error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from plait.agents import Agent, AsyncAgent
from plait.eval import evaluate
from plait.exceptions import UserError
from plait.testing import AsyncFunctionLLM, FunctionLLM
from plait.trajectories import Trajectory
from plait.trajectories.export import load_trajectories
from plait.trajectories.rewards import EnvironmentReward, load_reward

CASES = [
    {"id": "fr", "input": "Capital of France?", "expected": "Paris"},
    {"id": 2, "input": "Capital of Peru?", "expected": "Cusco"},
]
SEEN: list[dict[str, Any]] = []


def _answer(messages: list[dict[str, Any]], params: Any) -> str:
    SEEN.append(dict(params))
    return "Paris" if "France" in str(messages[-1]["content"]) else "Lima"


def length_reward(trajectory: Trajectory) -> float:
    """A user reward: minus the answer's length (importable as ``test_rewards:length_reward``)."""
    return -float(len(str(trajectory.messages[-1]["content"])))


def read(path: Path) -> dict[str, dict[str, Any]]:
    return {str(r["id"]): r for r in map(json.loads, (path / "results.jsonl").read_text().splitlines())}


def test_without_a_reward_function_the_reward_is_the_score(tmp_path: Path) -> None:
    evaluate(lambda: Agent(FunctionLLM(_answer)), CASES, tmp_path)
    rewards = {t.metadata["id"]: t.reward for t in load_trajectories(tmp_path)}
    assert rewards == {"fr": 1.0, 2: 0.0}
    assert all("reward" not in r for r in read(tmp_path).values())


def test_a_user_function_rewards_each_sample(tmp_path: Path) -> None:
    SEEN.clear()
    summary = evaluate(lambda: Agent(FunctionLLM(_answer)), CASES, tmp_path, samples=3, reward=length_reward)
    assert summary["n"] == 6
    records = list(map(json.loads, (tmp_path / "results.jsonl").read_text().splitlines()))
    assert sorted((str(r["id"]), r["sample"], r["reward"]) for r in records) == [
        *(("2", k, -4.0) for k in range(3)),
        *(("fr", k, -5.0) for k in range(3)),
    ]
    assert {p["temperature"] for p in SEEN} == {1.0} and len({p["seed"] for p in SEEN}) == 6  # gen reached the model
    assert {t.reward for t in load_trajectories(tmp_path)} == {-4.0, -5.0}


def test_an_environment_agent_in_the_loop_gives_the_reward(tmp_path: Path) -> None:
    asked: list[str] = []

    def judge(messages: list[dict[str, Any]], params: Any) -> str:
        asked.append(str(messages[-1]["content"]))
        return "Score: 0.75 (correct city)" if "Paris" in asked[-1] else "0.1"

    env = AsyncAgent(AsyncFunctionLLM(judge))
    evaluate(lambda: Agent(FunctionLLM(_answer)), CASES, tmp_path, reward=EnvironmentReward(env))
    assert {k: r["reward"] for k, r in read(tmp_path).items()} == {"fr": 0.75, "2": 0.1}
    assert '"role": "assistant", "content": "Paris"' in asked[0] and 'Expected answer: "Paris"' in asked[0]
    assert env.memory.sessions() == []  # each judgement in its own session, forgotten
    sync_env = Agent(FunctionLLM(lambda messages, params: "1"))
    evaluate(lambda: Agent(FunctionLLM(_answer)), CASES, tmp_path / "sync", reward=EnvironmentReward(sync_env))
    assert {r["reward"] for r in read(tmp_path / "sync").values()} == {1.0}


def test_a_failing_reward_is_the_cases_error_and_the_run_goes_on(tmp_path: Path) -> None:
    def broken(trajectory: Trajectory) -> float:
        raise ValueError("no")

    silent = EnvironmentReward(Agent(FunctionLLM(lambda messages, params: "I cannot say.")))
    evaluate(lambda: Agent(FunctionLLM(_answer)), CASES[:1], tmp_path / "a", reward=broken)
    evaluate(lambda: Agent(FunctionLLM(_answer)), CASES[:1], tmp_path / "b", reward=silent)
    evaluate(lambda: Agent(FunctionLLM(_answer)), CASES[:1], tmp_path / "c", reward=lambda t: float("nan"))
    assert read(tmp_path / "a")["fr"]["error"] == "reward: ValueError: no"
    assert read(tmp_path / "b")["fr"]["error"].startswith("reward: UserError: the environment agent's reply has no")
    assert "a reward function returns a finite number" in read(tmp_path / "c")["fr"]["error"]
    with pytest.raises(UserError, match="not a function"):
        load_reward("json:__doc__")
    with pytest.raises(UserError, match="samples must be an int >= 1"):
        evaluate(lambda: Agent(FunctionLLM(_answer)), CASES, tmp_path / "d", samples=0)
