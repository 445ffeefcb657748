"""`plait.eval` in process: the Python API (sync and async agents), cases, scorers, the results file, export."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from eval_support import CAPITALS, SRC, capital_cases, read_jsonl

from plait.agents import Agent, AsyncAgent
from plait.eval import Case, aevaluate, contains, evaluate, exact, load_cases, native_messages, regex, to_openai
from plait.eval.progress import Progress
from plait.eval.results import ResultsFile
from plait.eval.scorers import score
from plait.exceptions import UserError
from plait.testing import AsyncFunctionLLM, FunctionLLM
from plait.trajectories.from_eval import from_eval


def _capital(messages: list[dict[str, Any]], params: Any) -> str:
    text = str(messages[-1]["content"])
    return next((capital for country, capital in CAPITALS.items() if country in text), "unknown")


def make(mode: str) -> Agent | AsyncAgent:
    if mode == "sync":
        return Agent(FunctionLLM(_capital), "Answer with the name only.")
    return AsyncAgent(AsyncFunctionLLM(_capital), "Answer with the name only.")


def test_one_agent_serves_every_case_and_keeps_no_session(mode: str, tmp_path: Path) -> None:
    agent = make(mode)
    cases = [
        Case("fr", "Capital of France?", "paris"),
        {"id": 7, "input": "Capital of Peru?", "expected": ["Lima", "x"]},
    ]
    summary = evaluate(lambda: agent, cases, tmp_path, concurrency=2)
    assert (summary["n"], summary["passed"], summary["pass_rate"], summary["errors"]) == (2, 2, 1.0, 0)
    assert summary["agent"]["protocol"] == "chat" and summary["agent"]["system"] == "Answer with the name only."
    assert agent.memory.sessions() == []  # each case's session was taken out of memory
    calls = agent.llm.calls
    assert sorted(len(call.messages) for call in calls) == [2, 2]  # a system prompt and one question each
    records = {r["id"]: r for r in read_jsonl(tmp_path / "results.jsonl")}
    assert records[7]["output"] == "Lima" and records[7]["usage"] is None  # the scripted model reports no usage
    assert [m["content"] for m in records["fr"]["trajectory"]] == ["Capital of France?", "Paris"]


def test_numeric_scores_limit_and_aevaluate(tmp_path: Path) -> None:
    def half_credit(output: str, expected: object) -> float:
        return 1.0 if output == expected else 0.4

    cases = capital_cases(6)
    cases[1]["expected"] = "Tokyo!"
    summary = asyncio.run(aevaluate(lambda: make("async"), cases, tmp_path, scorer=half_credit, limit=3))
    assert (summary["n"], summary["passed"]) == (3, 2)
    scores = {r["id"]: r["score"] for r in read_jsonl(tmp_path / "results.jsonl")}
    assert scores == {"c00": 1.0, "c01": 0.4, "c02": 1.0}


def test_a_scorer_that_raises_or_answers_nonsense_is_the_case_error(tmp_path: Path) -> None:
    def picky(output: str, expected: object) -> Any:
        if output == "Paris":
            raise ValueError("no French")
        return "yes"

    summary = evaluate(lambda: make("sync"), capital_cases(2), tmp_path, scorer=picky)
    assert summary["errors"] == 2
    errors = sorted(r["error"] for r in read_jsonl(tmp_path / "results.jsonl"))
    assert errors == [
        "scorer: UserError: a scorer returns a bool or a number in [0, 1], not 'yes'",
        "scorer: ValueError: no French",
    ]


def test_builtin_scorers() -> None:
    assert contains("The capital is PARIS.", "paris") and not contains("Lyon", "Paris")
    assert contains("Tokyo", ["Kyoto", "tokyo"]) and contains("42", 42)
    assert exact("  Paris\n", "Paris") and not exact("Paris.", "Paris")
    assert regex("answer: 1024", r"\b10\d\d\b") and not regex("Paris", "^Lyon$")
    with pytest.raises(UserError, match="not a valid regular expression"):
        regex("x", "(")
    assert score(exact, "a", "a") == (True, 1.0)
    assert score(lambda o, e: 0.5, "a", "b") == (True, 0.5)
    with pytest.raises(UserError, match="a bool or a number"):
        score(lambda o, e: float("nan"), "a", "b")


def test_cases_from_files_and_objects(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('\n{"id": "a", "input": "q", "expected": ["x"], "level": 2}\n\n{"id": 1, "input": "r"}\n')
    assert load_cases(data) == [Case("a", "q", ["x"], {"level": 2}), Case(1, "r", None)]
    assert load_cases(str(data))[0].to_dict() == {"level": 2, "id": "a", "input": "q", "expected": ["x"]}
    (tmp_path / "bin.jsonl").write_bytes(b'{"id": 1, "input": "\xff"}\n')
    with pytest.raises(UserError, match="is not UTF-8"):
        load_cases(tmp_path / "bin.jsonl")
    with pytest.raises(UserError, match="cannot read the data set"):
        load_cases(tmp_path / "missing.jsonl")
    with pytest.raises(UserError, match="line 1: 'id' must be"):
        load_cases([{"id": True, "input": "q"}])
    with pytest.raises(UserError, match="line 1: invalid JSON"):
        load_cases(["[" * 100_000])


def test_a_torn_last_line_is_cut_away_and_its_case_runs_again(tmp_path: Path) -> None:
    evaluate(lambda: make("sync"), capital_cases(3), tmp_path)
    path = tmp_path / "results.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"id": "c09", "input": "What is the ca')  # a write cut short
    with ResultsFile(tmp_path) as results:
        assert len(results.records) == 3
    assert path.read_bytes() == whole
    path.write_bytes(whole + b'{"id": "c01", "inp')
    summary = evaluate(lambda: make("sync"), capital_cases(5), tmp_path)
    assert (summary["n"], summary["ran"]) == (5, 2)
    assert sorted(r["id"] for r in read_jsonl(path)) == ["c00", "c01", "c02", "c03", "c04"]
    path.write_bytes(whole + b"not json\n")
    with pytest.raises(UserError, match=r"results\.jsonl line 4 is not a result"):
        evaluate(lambda: make("sync"), capital_cases(5), tmp_path)


def test_export_survives_hostile_trajectories() -> None:
    trajectory: list[Any] = [
        "not a message",
        {"sender": "user"},  # no content
        {"content": "What is 2 + 2?", "sender": "user"},
        {"content": "x", "sender": "A", "formatted": {"action": {"name": "Calculator", "parameters": "2 + 2"}}},
        {"content": {"result": None, "errmsg": "bad", "state": -1002, "args": None}, "sender": "ActionExecutor"},
        {"content": {"weird": [1, 2]}, "sender": "A", "formatted": {"action": {"name": 3}}},
        {"content": "4", "sender": "A", "stream_state": "nonsense"},
    ]
    messages = native_messages(trajectory, "A", {})
    assert [m.sender for m in messages] == ["user", "A", "ActionExecutor", "A"]
    record = {"id": "h", "trajectory": trajectory, "score": 0.0, "error": None}
    converted = from_eval(record, {"name": "A", "tools": []})
    assert converted is not None
    line = to_openai(converted)
    assert [(o.message, o.status, o.detail) for o in converted.outcomes] == [(2, "tool_error", "bad")]
    assert [m["role"] for m in line["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert json.loads(line["messages"][1]["tool_calls"][0]["function"]["arguments"]) == {"input": "2 + 2"}
    assert line["messages"][2] == {"role": "tool", "tool_call_id": "call_1", "content": "bad"}
    assert "tools" not in line


def test_progress_lines_and_live_bar() -> None:
    plain = io.StringIO()
    progress = Progress(3, 1, 1, plain)
    progress.update({"id": "b", "passed": False, "seconds": 0.25, "output": "Kenia", "expected": "Nairobi"})
    progress.update({"id": "c", "error": "boom", "seconds": 1})
    summary = {
        "n": 3,
        "passed": 1,
        "pass_rate": 1 / 3,
        "errors": 1,
        "ran": 2,
        "wall_seconds": 1.5,
        "mean_case_seconds": 0.4,
    }
    progress.finish({**summary, "usage": None})
    assert plain.getvalue().splitlines()[:2] == [
        "[2/3] b: FAIL (0.25 s)  pass rate 50%  got 'Kenia', expected 'Nairobi'",
        "[3/3] c: ERROR (1.00 s)  pass rate 33%  'boom'",
    ]
    assert "pass rate         33.3%" in plain.getvalue()
    live = io.StringIO()
    bar = Progress(2, stream=live, live=True)
    bar.update({"id": 1, "passed": True})
    bar.finish(summary)
    assert "evaluation summary" in live.getvalue() and "33.3%" in live.getvalue()


def test_import_plait_does_not_import_the_eval_package() -> None:
    code = "import sys, plait; plait.Agent; print('plait.eval' in sys.modules, 'plait.eval.runner' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["False", "False"]
    code = (
        "import sys, plait.eval; print('plait.eval.runner' in sys.modules); "
        "plait.eval.evaluate; print('plait.eval.runner' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["False", "True"]


def test_a_case_imports_nothing_so_its_time_limit_is_the_agents_alone(mode: str) -> None:
    """plait's own imports happen when the runner is built, before any case's time limit starts.

    The first cases once imported the agent-call helpers (and aiohttp with them: 0.3 s idle, over
    1 s on a busy machine) inside their time limits, blocking the event loop: at a load of 10 on
    2 cores every case of a run with ``--timeout 1`` timed out.
    """
    code = f"""
import asyncio, sys
from plait.eval.case_runner import CaseRunner
from test_eval_api import make
runner = CaseRunner(lambda: make({mode!r}))
before = set(sys.modules)
answer = asyncio.run(runner.run("fr", "Capital of France?", 60))
print(answer["output"], sorted(set(sys.modules) - before))
"""
    here = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, str(here), str(here.parent)])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split(" ", 1) == ["Paris", "[]\n"], out


def test_streaming_agents_are_evaluated_on_their_final_message(mode: str, tmp_path: Path) -> None:
    from plait.agents import AsyncStreamingAgent, StreamingAgent

    agent = (
        StreamingAgent(FunctionLLM(_capital), "x")
        if mode == "sync"
        else AsyncStreamingAgent(AsyncFunctionLLM(_capital), "x")
    )
    summary = evaluate(lambda: agent, capital_cases(4), tmp_path, concurrency=4)
    assert (summary["n"], summary["passed"]) == (4, 4)
    assert agent.memory.sessions() == []
