"""``plait eval --samples K``: K rewarded rollouts per case, resumable after kill -9, exported in every format.

Real ``plait`` subprocesses against the fake OpenAI-compatible server, on the example data set
(``examples/eval``) and the eval test agents.
"""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from plait.testing.fake_openai import FakeOpenAIServer, Reply
from plait.trajectories import Trajectory, read_trajectories
from plait.trajectories.export import schema

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "eval"
sys.path.insert(0, str(ROOT / "tests" / "eval"))

from eval_support import capital_cases, command, env, plait, read_jsonl, write_jsonl  # noqa: E402

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Canada": "Ottawa", "Norway": "Oslo"}
CASES = 10  # examples/eval/capitals.jsonl
RAY_S = 900  # a run that starts a local Ray runtime (see tests/eval/test_eval_ray.py)


def sampled_model(body: dict[str, Any]) -> Reply:
    """The example set's model; an odd seed names the wrong capital (so the samples' rewards differ)."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Reply(f"It is {last['content']}.")
    question = str(last["content"])
    if "calculator" in question:
        expression = question.split("What is ")[1].split("?")[0]
        return Reply(tool_calls=[("Calculator", {"expression": expression})])
    if int(body.get("seed") or 0) % 2:
        return Reply("Lyon")
    return Reply(next((city for country, city in CAPITALS.items() if country in question), "Sydney"))


def run_example(out: Path, server: FakeOpenAIServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command("eval", "capitals.jsonl", "--agent", "capitals_agent:make_agent", "--out", str(out), *args),
        cwd=EXAMPLES,
        env={**env(""), "PLAIT_API_BASE": server.base_url, "PLAIT_MODEL": "m"},
        capture_output=True,
        text=True,
        timeout=RAY_S,
        check=False,
    )


def check_four_per_case(out: Path, tmp_path: Path) -> list[Trajectory]:
    """The folder holds 4 rewarded trajectories per case, once each; returned as ``plait export`` writes them."""
    exported = plait("", "export", str(out), "-o", str(tmp_path / "t.jsonl"), "--format", "trajectories")
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout == f"{4 * CASES} cases written to {tmp_path / 't.jsonl'}\n"
    trajectories = list(read_trajectories(tmp_path / "t.jsonl"))
    assert len({t.id for t in trajectories}) == 4 * CASES
    per_case = collections.Counter(t.metadata["id"] for t in trajectories)
    assert set(per_case.values()) == {4} and len(per_case) == CASES
    for trajectory in trajectories:
        assert trajectory.source == "eval" and trajectory.reward in (0.0, 1.0)
        assert trajectory.reward == trajectory.metadata["score"]
        assert trajectory.metadata["sample"] in range(4) and trajectory.metadata["temperature"] == 1.0
        assert trajectory.id == f"str:{trajectory.metadata['id']}#{trajectory.metadata['sample']}"
        jsonschema.validate(json.loads(trajectory.to_json()), schema("trajectories"))
    return trajectories


def test_samples_4_on_the_example_set_each_a_rewarded_trajectory(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    with FakeOpenAIServer(handler=sampled_model) as server:
        run = run_example(out, server, "--samples", "4")
        assert run.returncode == 0, run.stderr
        requests = list(server.requests)
    first_turns = [b for b in requests if b["messages"][-1]["role"] == "user"]
    assert len(first_turns) == 4 * CASES
    by_question: dict[str, set[int]] = collections.defaultdict(set)
    for body in requests:
        assert body["temperature"] == 1.0
        by_question[str(next(m["content"] for m in body["messages"] if m["role"] == "user"))].add(body["seed"])
    assert all(len(seeds) == 4 for seeds in by_question.values())  # each sample its own seed
    trajectories = check_four_per_case(out, tmp_path)
    capitals = [t for t in trajectories if t.metadata["case"]["topic"] == "geography"]
    assert {t.reward for t in capitals} == {0.0, 1.0}  # the odd seeds answered wrongly
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["n"], summary["samples"], summary["ran"]) == (4 * CASES, 4, 4 * CASES)
    with FakeOpenAIServer(handler=sampled_model) as server:  # a rerun: nothing left to do
        assert run_example(out, server, "--samples", "4").returncode == 0
        assert server.requests == []
    for fmt in ("openai", "sharegpt", "xtuner"):
        target = tmp_path / f"{fmt}.jsonl"
        done = plait("", "export", str(out), "-o", str(target), "--format", fmt, "--min-reward", "1")
        assert done.returncode == 0, done.stderr
        lines = read_jsonl(target)
        passed = sum(1 for t in trajectories if t.reward == 1.0)
        assert len(lines) == passed and done.stdout.startswith(f"{passed} cases written")
        assert f"{4 * CASES - passed} left out: no reward, or below 1" in done.stdout
        for line in lines:
            jsonschema.validate(line, schema(fmt))
    verl = plait("", "export", str(out), "-o", str(tmp_path / "verl.jsonl"), "--format", "verl")
    assert verl.stdout.startswith("0 cases written") and f"{4 * CASES} left out: not token-exact" in verl.stdout


def test_samples_resume_after_sigkill_without_duplicates(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", capital_cases(5))
    out = tmp_path / "out"
    results = out / "results.jsonl"
    args = ["eval", str(data), "--agent", "eval_agents:make_agent", "--out", str(out), "--samples", "4"]

    async def slow(body: dict[str, Any]) -> Reply:
        return Reply("Paris", delay=0.1)

    with FakeOpenAIServer(handler=slow) as server:
        process = subprocess.Popen(
            command(*args, "--concurrency", "2"),
            env=env(server.base_url),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 120
            while (not results.exists() or results.read_bytes().count(b"\n") < 5) and time.monotonic() < deadline:
                time.sleep(0.01)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        killed = [json.loads(line) for line in results.read_bytes().splitlines()]
        assert 5 <= len(killed) < 20, "the run finished before it was killed"
        server.requests.clear()
        rerun = plait(server.base_url, *args)
        assert rerun.returncode == 0, rerun.stderr
        assert len(server.requests) == 20 - len(killed)  # only the samples not yet recorded
    lines = read_jsonl(results)
    keys = [(line["id"], line["sample"]) for line in lines]
    assert len(keys) == len(set(keys)) == 20  # no duplicate, none missing
    assert {line["seed"] for line in lines if line["id"] == lines[0]["id"]}.__len__() == 4


@pytest.mark.slow
@pytest.mark.timeout(2 * RAY_S)  # a local Ray runtime's start alone can pass the suite's 300 s on a busy machine
def test_samples_on_a_local_ray_runtime(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the Ray tests need the 'ray' extra (test extra)")
    out = tmp_path / "runs"
    with FakeOpenAIServer(handler=sampled_model) as server:
        run = run_example(out, server, "--samples", "4", "--ray", "--actors", "2")
        assert run.returncode == 0, run.stderr
    check_four_per_case(out, tmp_path)
