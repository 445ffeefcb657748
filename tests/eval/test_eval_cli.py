"""``plait eval`` / ``plait export`` end to end: real subprocesses against a fake OpenAI-compatible server."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from eval_support import (
    WRONG,
    Held,
    InFlight,
    arithmetic_cases,
    capital_cases,
    capital_reply,
    command,
    env,
    plait,
    read_jsonl,
    tool_reply,
    write_jsonl,
)

from plait.testing.fake_openai import FakeOpenAIServer, HTTPFault, Reply
from plait.trajectories.export import schema

SCHEMA = schema("openai")


def expected_pass(case: dict[str, Any]) -> bool:
    return not any(country in case["input"] for country in WRONG)


@pytest.mark.parametrize("factory", ["make_agent", "make_async_agent"])
def test_twenty_cases_at_concurrency_8(tmp_path: Path, factory: str) -> None:
    cases = capital_cases(20)
    data = write_jsonl(tmp_path / "data.jsonl", cases)
    flight = InFlight(0.1)
    with FakeOpenAIServer(handler=flight) as server:
        run = plait(
            server.base_url,
            "eval",
            str(data),
            "--agent",
            f"eval_agents:{factory}",
            "--out",
            str(tmp_path / "out"),
            "--concurrency",
            "8",
        )
        assert run.returncode == 0, run.stderr
        requests = list(server.requests)
    assert len(requests) == 20
    for body in requests:  # each case alone in its session: the system prompt and its one question
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert sorted(str(body["messages"][1]["content"]) for body in requests) == sorted(c["input"] for c in cases)
    assert 4 <= flight.most <= 8  # cases overlapped, never more than --concurrency
    results = {r["id"]: r for r in read_jsonl(tmp_path / "out" / "results.jsonl")}
    assert set(results) == {c["id"] for c in cases}
    for case in cases:
        record = results[case["id"]]
        assert record["passed"] is expected_pass(case), record
        assert record["score"] == (1.0 if expected_pass(case) else 0.0)
        assert record["input"] == case["input"] and record["expected"] == case["expected"]
        assert record["metadata"] == {"round": case["round"]}
        assert record["error"] is None and record["seconds"] > 0
        assert record["usage"]["calls"] == 1 and record["usage"]["total_tokens"] > 0
        assert [m["sender"] for m in record["trajectory"]] == ["user", factory_name(factory)]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["n"], summary["passed"], summary["errors"], summary["ran"]) == (20, 16, 0, 20)
    assert summary["pass_rate"] == 0.8
    assert summary["usage"]["calls"] == 20
    assert run.stdout.count(" pass rate ") == 20  # not a terminal: one plain line per case
    assert "pass rate         80.0%" in run.stdout  # the summary table


def factory_name(factory: str) -> str:
    return "Agent" if factory == "make_agent" else "AsyncAgent"


def test_sigkill_leaves_complete_lines_and_a_rerun_does_only_the_rest(tmp_path: Path) -> None:
    cases = capital_cases(20)
    data = write_jsonl(tmp_path / "data.jsonl", cases)
    out = tmp_path / "out"
    results = out / "results.jsonl"
    args = ["eval", str(data), "--agent", "eval_agents:make_agent", "--out", str(out), "--concurrency", "2"]
    with FakeOpenAIServer(handler=InFlight(0.15)) as server:
        process = subprocess.Popen(
            command(*args), env=env(server.base_url), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            deadline = time.monotonic() + 60
            while (not results.exists() or results.read_bytes().count(b"\n") < 4) and time.monotonic() < deadline:
                time.sleep(0.01)
            process.send_signal(signal.SIGKILL)
        finally:
            process.kill()
            process.communicate(timeout=30)
        first_requests = len(server.requests)
    raw = results.read_bytes()
    assert raw.endswith(b"\n")  # no torn line
    kept = read_jsonl(results)
    assert 4 <= len(kept) < 20, len(kept)
    assert len({r["id"] for r in kept}) == len(kept)
    assert first_requests >= len(kept)
    with FakeOpenAIServer(handler=capital_reply) as server:
        rerun = plait(server.base_url, *args)
        assert rerun.returncode == 0, rerun.stderr
        # the killed run could not release the folder's lock: the rerun takes it over, and says so
        assert "took over the lock" in rerun.stderr and f"pid {process.pid} on" in rerun.stderr, rerun.stderr
        asked = {str(body["messages"][-1]["content"]) for body in server.requests}
        assert len(server.requests) == 20 - len(kept)  # only the missing cases
    assert asked == {c["input"] for c in cases} - {r["input"] for r in kept}
    final = read_jsonl(results)
    assert sorted(r["id"] for r in final) == sorted(c["id"] for c in cases)
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["n"], summary["passed"], summary["ran"]) == (20, 16, 20 - len(kept))
    with FakeOpenAIServer(handler=capital_reply) as server:  # all done: a third run asks nothing
        assert plait(server.base_url, *args).returncode == 0
        assert server.requests == []


def test_a_second_run_on_the_same_folder_exits_2_naming_the_first(tmp_path: Path) -> None:
    cases = capital_cases(6)
    data = write_jsonl(tmp_path / "data.jsonl", cases)
    out = tmp_path / "out"
    args = ["eval", str(data), "--agent", "eval_agents:make_agent", "--out", str(out), "--concurrency", "2"]
    held = Held(most=2)  # the first run's two cases in flight wait until the second run is over
    with FakeOpenAIServer(handler=held) as server:
        first = subprocess.Popen(
            command(*args), env=env(server.base_url), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            while held.seen == 0:  # the first run holds the folder and is answering cases
                assert first.poll() is None, first.communicate()[1]
                time.sleep(0.05)
            second = plait(server.base_url, *args, timeout=300)
        finally:
            held.released = True
            _, first_err = first.communicate(timeout=300)
        requests = len(server.requests)
    assert first.returncode == 0, first_err
    assert second.returncode == 2, second.stderr
    assert second.stdout == "" and second.stderr.count("\n") == 1, second.stderr  # one line
    assert second.stderr.startswith(f"plait: error: {out} is in use by another plait eval (")
    assert f"pid {first.pid} on {socket.gethostname()}, started 20" in second.stderr, second.stderr
    assert requests == 6  # every case asked once, by the first run
    lines = read_jsonl(out / "results.jsonl")
    assert sorted(r["id"] for r in lines) == [c["id"] for c in cases]  # one line per case
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["n"], summary["ran"]) == (6, 6)
    assert (out / "eval.lock").read_bytes() == b""  # released: the next run starts without a note


def test_failures_are_results_and_the_run_goes_on(tmp_path: Path) -> None:
    cases = [
        {"id": 1, "input": "What is the capital of France?", "expected": "Paris"},
        {"id": 2, "input": "What is the capital of Atlantis?", "expected": "Poseidonis"},
        {"id": 3, "input": "What is the capital of Peru, slowly?", "expected": "Lima"},
        {"id": 4, "input": "What is the capital of Japan?", "expected": "^Tok"},
        {"id": 5, "input": "What is the capital of Canada?", "expected": "^Ottawa$"},
    ]
    data = write_jsonl(tmp_path / "data.jsonl", cases)

    def handler(body: dict[str, Any]) -> Any:
        text = str(body["messages"][-1]["content"])
        if "Atlantis" in text:
            return HTTPFault(400, {"error": {"message": "no such country", "type": "invalid_request_error"}})
        if "slowly" in text:
            return Reply("Lima", delay=60)  # far beyond the case's time limit
        return capital_reply(body)

    with FakeOpenAIServer(handler=handler) as server:
        run = plait(
            server.base_url,
            "eval",
            str(data),
            "--agent",
            "eval_agents:make_async_agent",
            "--out",
            str(tmp_path / "o"),
            "--timeout",
            "2",  # the other cases take ~0.04 s at a load of 11 on 2 cores (plait's imports are done before)
            "--scorer",
            "regex",
        )
    assert run.returncode == 0, run.stderr
    results = {r["id"]: r for r in read_jsonl(tmp_path / "o" / "results.jsonl")}
    assert results[1]["passed"] is True and results[1]["error"] is None
    assert results[2]["passed"] is False and "no such country" in results[2]["error"]
    assert results[3]["error"] == "TimeoutError: no answer within 2 s" and results[3]["output"] is None
    assert results[4]["passed"] is True
    assert results[5]["passed"] is False and results[5]["output"] == "Toronto"
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (summary["n"], summary["passed"], summary["errors"]) == (5, 2, 2)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (['{"id": 1, "input": "a", "expected": "b"}', "{not json"], "data.jsonl line 2: invalid JSON"),
        (['{"id": 1, "input": "a"}', '{"id": 1, "input": "b"}'], "line 2: id 1 is already used on line 1"),
        (['["a list"]'], "line 1: a case is a JSON object"),
        (['{"input": "no id"}'], "line 1: 'id' must be"),
        (['{"id": 3, "input": ""}'], "line 1: 'input' must be a non-empty string"),
    ],
)
def test_a_broken_data_set_stops_before_any_case(tmp_path: Path, rows: list[str], message: str) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(rows) + "\n")
    with FakeOpenAIServer(handler=capital_reply) as server:
        run = plait(
            server.base_url, "eval", str(data), "--agent", "eval_agents:make_agent", "--out", str(tmp_path / "o")
        )
        assert server.requests == []
    assert run.returncode == 2
    assert message in run.stderr and run.stderr.startswith("plait: error: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agent", "no_such_module:make"], "could not import 'no_such_module'"),
        (["--agent", "eval_agents:nothing"], "'eval_agents' has no 'nothing'"),
        (["--agent", "eval_agents"], "must be MODULE:NAME"),
        (["--agent", "eval_agents:make_agent", "--scorer", "fuzzy"], "unknown scorer 'fuzzy'"),
        (["--agent", "eval_agents:make_agent", "--concurrency", "0"], "concurrency must be an int >= 1"),
    ],
)
def test_settings_that_cannot_work(tmp_path: Path, args: list[str], message: str) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", capital_cases(2))
    run = plait("http://127.0.0.1:9/v1", "eval", str(data), "--out", str(tmp_path / "o"), *args)
    assert run.returncode == 2
    assert message in run.stderr


@pytest.mark.parametrize(
    "factory", ["make_tool_agent", "make_async_tool_agent", "make_react_agent", "make_internlm_agent"]
)
def test_tool_trajectories_export_to_openai_fine_tuning_format(tmp_path: Path, factory: str) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", arithmetic_cases())
    out = tmp_path / "out"
    with FakeOpenAIServer(handler=tool_reply) as server:
        run = plait(server.base_url, "eval", str(data), "--agent", f"eval_agents:{factory}", "--out", str(out))
        assert run.returncode == 0, run.stderr
        assert len(server.requests) == 6  # a tool call and an answer per case
    assert all(r["passed"] for r in read_jsonl(out / "results.jsonl"))
    exported = plait("", "export", str(out), "-o", str(tmp_path / "train.jsonl"))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout == f"3 cases written to {tmp_path / 'train.jsonl'}\n"
    lines = read_jsonl(tmp_path / "train.jsonl")
    answers = {
        "What is 6 * 7?": ("6 * 7", "42"),
        "What is 19 + 23?": ("19 + 23", "42"),
        "What is 2 ** 10?": ("2 ** 10", "1024"),
    }
    for line in lines:
        jsonschema.validate(line, SCHEMA)
        messages = line["messages"]
        assert [m["role"] for m in messages if m["role"] != "system"] == ["user", "assistant", "tool", "assistant"]
        user, call, result, answer = messages[-4:]
        expression, value = answers[user["content"]]
        (tool_call,) = call["tool_calls"]
        assert tool_call["function"]["name"] == "Calculator"
        assert json.loads(tool_call["function"]["arguments"]) == {"expression": expression}
        assert result == {"role": "tool", "tool_call_id": tool_call["id"], "content": value}
        assert value in answer["content"] and "tool_calls" not in answer
        assert [t["function"]["name"] for t in line["tools"]] == ["Calculator"]
        assert line["tools"][0]["function"]["parameters"]["required"] == ["expression"]
        system = [m for m in messages if m["role"] == "system"]
        if factory in ("make_react_agent", "make_internlm_agent"):  # the protocol's instructions are not carried over
            assert system == []
            assert call.get("content") in ("I should compute.", "Let me compute.")
        else:
            assert len(system) == 1 and "alc" in system[0]["content"]


def test_a_case_recorded_twice_is_exported_and_counted_once(tmp_path: Path) -> None:
    """A results file with each case twice (as two runs at once left it before runs locked the folder)."""
    data = write_jsonl(tmp_path / "data.jsonl", arithmetic_cases())
    out = tmp_path / "out"
    args = ["eval", str(data), "--agent", "eval_agents:make_tool_agent", "--out", str(out)]
    with FakeOpenAIServer(handler=tool_reply) as server:
        assert plait(server.base_url, *args).returncode == 0
    results = out / "results.jsonl"
    first = read_jsonl(results)
    again = [{**r, "output": f"again: {r['output']}"} for r in reversed(first)]  # the newer lines: these count
    write_jsonl(results, first + again)
    exported = plait("", "export", str(out), "-o", str(tmp_path / "train.jsonl"))
    assert exported.stdout == f"3 cases written to {tmp_path / 'train.jsonl'}\n", exported.stderr
    assert len(read_jsonl(tmp_path / "train.jsonl")) == 3
    sharegpt = plait("", "export", str(out), "-o", str(tmp_path / "sg.jsonl"), "--format", "sharegpt")
    assert sharegpt.stdout.startswith("3 cases"), sharegpt.stderr
    asked = [line["conversations"][0]["value"] for line in read_jsonl(tmp_path / "sg.jsonl")]
    assert asked == [r["input"] for r in first]  # each case once, in the order of its first line
    from plait.eval.results import read_results

    records, _, _ = read_results(str(results))
    assert [r["output"] for r in records] == [f"again: {r['output']}" for r in first]  # the last line of each
    with FakeOpenAIServer(handler=tool_reply) as server:  # a rerun: nothing to ask, each case counted once
        assert plait(server.base_url, *args).returncode == 0
        assert server.requests == []
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["n"], summary["passed"]) == (3, 3)


def test_export_only_passed_and_sharegpt(tmp_path: Path) -> None:
    rows = [*arithmetic_cases(), {"id": "bad", "input": "What is 1 + 1?", "expected": "3"}]
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    out = tmp_path / "out"
    with FakeOpenAIServer(handler=tool_reply) as server:
        assert (
            plait(
                server.base_url, "eval", str(data), "--agent", "eval_agents:make_tool_agent", "--out", str(out)
            ).returncode
            == 0
        )
    assert plait("", "export", str(out), "-o", str(tmp_path / "all.jsonl")).stdout.startswith("4 cases")
    run = plait("", "export", str(out), "-o", str(tmp_path / "sg.jsonl"), "--only-passed", "--format", "sharegpt")
    assert run.stdout.startswith("3 cases"), run.stderr
    lines = read_jsonl(tmp_path / "sg.jsonl")
    first = next(line for line in lines if line["conversations"][0]["value"] == "What is 6 * 7?")
    assert all("1 + 1" not in line["conversations"][0]["value"] for line in lines)  # the failed case is left out
    assert [turn["from"] for turn in first["conversations"]] == ["human", "function_call", "observation", "gpt"]
    assert json.loads(first["conversations"][1]["value"]) == {
        "name": "Calculator",
        "arguments": {"expression": "6 * 7"},
    }
    assert first["conversations"][2]["value"] == "42"
    assert first["system"] == "Use the calculator."
    assert [tool["name"] for tool in json.loads(first["tools"])] == ["Calculator"]
    missing = plait("", "export", str(tmp_path / "nowhere"), "-o", str(tmp_path / "x.jsonl"))
    assert missing.returncode == 2 and "no evaluation in" in missing.stderr


def test_the_example_data_set_and_agent(tmp_path: Path) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples" / "eval"
    capitals = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Canada": "Ottawa", "Norway": "Oslo"}

    def model(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return Reply(f"It is {last['content']}.")
        question = str(last["content"])
        if "calculator" in question:
            expression = question.split("What is ")[1].split("?")[0]
            return Reply(tool_calls=[("Calculator", {"expression": expression})])
        return Reply(next((city for country, city in capitals.items() if country in question), "Sydney"))

    out = tmp_path / "runs"
    with FakeOpenAIServer(handler=model) as server:
        run = subprocess.run(
            command("eval", "capitals.jsonl", "--agent", "capitals_agent:make_agent", "--out", str(out)),
            cwd=examples,  # the factory's module is found in the current folder
            env={**env(""), "PLAIT_API_BASE": server.base_url, "PLAIT_MODEL": "m"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert run.returncode == 0, run.stderr
    results = {r["id"]: r for r in read_jsonl(out / "results.jsonl")}
    assert {key for key, r in results.items() if not r["passed"]} == {"au", "br"}
    assert results["div"]["output"] == "It is 128."
    assert results["mul"]["metadata"] == {"topic": "arithmetic"}
    exported = plait("", "export", str(out), "-o", str(tmp_path / "train.jsonl"), "--only-passed")
    assert exported.stdout.startswith("8 cases"), exported.stderr
    for line in read_jsonl(tmp_path / "train.jsonl"):
        jsonschema.validate(line, SCHEMA)
