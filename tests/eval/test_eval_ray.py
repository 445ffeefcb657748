"""``plait eval --ray``: the cases answered by a pool of Ray actors on a local runtime give the local run's results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from eval_support import capital_cases, capital_reply, plait, read_jsonl, tool_reply, write_jsonl

from plait.testing.fake_openai import FakeOpenAIServer

pytest.importorskip("ray", reason="the Ray tests need the 'ray' extra (test extra)")

RAY_S = 900  # a run that starts a local Ray runtime: seconds when idle, over 120 s at 4 busy threads per core

pytestmark = pytest.mark.slow


def _by_id(path: Path) -> dict[Any, tuple[Any, ...]]:
    return {r["id"]: (r["passed"], r["output"], r["error"], r["trajectory"]) for r in read_jsonl(path)}


def test_ray_gives_the_local_results_and_resumes(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", capital_cases(20))
    local, remote = tmp_path / "local", tmp_path / "ray"
    agent = ["--agent", "eval_agents:make_agent", "--concurrency", "4"]
    with FakeOpenAIServer(handler=capital_reply) as server:
        assert plait(server.base_url, "eval", str(data), *agent, "--out", str(local)).returncode == 0
        server.requests.clear()
        first = plait(
            server.base_url, "eval", str(data), *agent, "--out", str(remote), "--ray", "--limit", "8", timeout=RAY_S
        )
        assert first.returncode == 0, first.stderr
        assert len(server.requests) == 8
        second = plait(
            server.base_url, "eval", str(data), *agent, "--out", str(remote), "--ray", "--actors", "2", timeout=RAY_S
        )
        assert second.returncode == 0, second.stderr
        assert len(server.requests) == 20  # the rerun asked only the 12 missing cases
    assert _by_id(remote / "results.jsonl") == _by_id(local / "results.jsonl")
    summaries = [json.loads((folder / "summary.json").read_text()) for folder in (local, remote)]
    assert [(s["n"], s["passed"], s["pass_rate"]) for s in summaries] == [(20, 16, 0.8)] * 2
    assert summaries[1]["ran"] == 12 and summaries[1]["agent"] == summaries[0]["agent"]


def test_ray_records_tool_trajectories_for_export(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", [{"id": "mul", "input": "What is 6 * 7?", "expected": "42"}])
    with FakeOpenAIServer(handler=tool_reply) as server:
        run = plait(
            server.base_url,
            "eval",
            str(data),
            "--agent",
            "eval_agents:make_react_agent",
            "--out",
            str(tmp_path / "o"),
            "--ray",
            timeout=RAY_S,
        )
        assert run.returncode == 0, run.stderr
    assert plait("", "export", str(tmp_path / "o"), "-o", str(tmp_path / "t.jsonl")).returncode == 0
    (line,) = read_jsonl(tmp_path / "t.jsonl")
    assert [m["role"] for m in line["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert line["messages"][2]["content"] == "42"
