"""One command: plait against the raw aiohttp loop and the peer frameworks, in one table (issue 20).

Every stack makes the same *run* (two chat completions and one Calculator call, 37 * 91)
against the same fake OpenAI-compatible server (`FakeOpenAIServer`, in its own process; one
at 0 ms latency, one at 50 ms). Each stack runs in its own interpreter: a driver script in
``bench/stacks/`` (JSON on stdout, see ``bench/stacks/_driver.py``), plait's from this venv
and each peer's from ``bench/.venvs/<peer>`` when that exists (``bench/make_peer_venvs.sh``).

Stacks: the raw aiohttp loop of ``agent_overhead.py`` (the floor), plait composition A
(``AsyncFunctionCallingAgent`` + ``AsyncGPTAPI`` + ``Calculator``, native tool calls), plait
composition B (Lagent users' ``AsyncAgent`` + ``AsyncGPTAPI`` + ``AsyncActionExecutor``, a
text tool call in InternLM2's plugin format parsed by ``ToolParser`` with
``InternLMToolAggregator``), Lagent 0.5 running the same B code, smolagents, LangChain,
pydantic-ai and the OpenAI Agents SDK.

Columns: wall time per run, sequential at 0 ms (and its ratio to raw); client CPU per run
over those runs (``time.process_time``); runs/s at 16/64/256 concurrent sessions at 50 ms
(and the ratio to raw); the import of the stack's modules in a fresh interpreter (median of
3). Rounds go stack after stack; each cell is the median over rounds.

Usage: ``PYTHONPATH=src .venv/bin/python bench/compare.py [--quick] [--rounds 3] [--stacks raw,plait-a]
[--wait-load 1.5]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(BENCH), str(BENCH / "stacks")]  # agent_overhead; the drivers' constants (also in the server)

from _driver import EXPRESSION  # noqa: E402
from agent_overhead import Server  # noqa: E402
from internlm_text import plugin_call_text  # noqa: E402

LEVELS = (16, 64, 256)


@dataclass
class StackSpec:
    """One row: a driver run by an interpreter."""

    key: str
    label: str
    driver: str
    python: Path
    options: dict[str, Any] = field(default_factory=dict)
    results: dict[str, list[float]] = field(default_factory=dict)


def _peer_python(peer: str) -> Path:
    return BENCH / ".venvs" / peer / "bin" / "python"


def stacks() -> list[StackSpec]:
    main = Path(sys.executable)
    return [
        StackSpec("raw", "raw aiohttp loop (the floor)", "raw.py", main),
        StackSpec("raw-lean", "the same loop on plait's HTTP/1.1 client", "raw_lean.py", main),
        StackSpec("plait-a", "plait A: AsyncFunctionCallingAgent, native calls", "plait_native.py", main),
        StackSpec("plait-b", "plait B: AsyncAgent + executor, InternLM text calls", "internlm_text.py", main),
        StackSpec(
            "lagent", "Lagent 0.5 (the same B code)", "internlm_text.py", _peer_python("lagent"), {"package": "lagent"}
        ),
        StackSpec("smolagents", "smolagents ToolCallingAgent", "smolagents_tool.py", _peer_python("smolagents")),
        StackSpec("langchain", "LangChain create_agent", "langchain_agent.py", _peer_python("langchain")),
        StackSpec("pydantic-ai", "pydantic-ai Agent", "pydantic_ai_agent.py", _peer_python("pydantic-ai")),
        StackSpec("openai-agents", "OpenAI Agents SDK", "openai_agents_sdk.py", _peer_python("openai-agents")),
    ]


# -- the fake server ----------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _handler(body: dict[str, Any]) -> Any:
    """First turn: call the calculator (natively when tools are offered, else in plugin text); then answer."""
    from plait.testing.fake_openai import Reply

    messages = body["messages"]
    tools = [tool["function"]["name"] for tool in body.get("tools") or []]
    if not any(message.get("role") == "assistant" for message in messages):
        if not tools:
            return Reply(plugin_call_text())
        name = next(name for name in tools if name != "final_answer")
        return Reply(tool_calls=[(name, {"expression": EXPRESSION})])
    answer = f"The answer is {_text(messages[-1].get('content'))}."
    if "final_answer" in tools:  # smolagents ends a run through this tool
        return Reply(tool_calls=[("final_answer", {"answer": answer})])
    return Reply(answer)


# -- running the drivers ------------------------------------------------------------------------


def _environment(spec: StackSpec) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.endswith("_PROXY") and key != "PYTHONPATH"}
    env.update(NO_PROXY="127.0.0.1", OPENAI_AGENTS_DISABLE_TRACING="1", LANGSMITH_TRACING="false")
    # A driver's CPU per run moves with where its memory lands: the size of the environment alone
    # moved plait B between 488 and 619 us/run (A 438-472, raw 372-410). Each launch gets padding of
    # a random size, so the rounds sample layouts and the median over them is not one layout's luck.
    env["BENCH_LAYOUT_PADDING"] = "x" * random.randrange(0, 8192)
    if spec.python == Path(sys.executable):  # plait's stacks run from this checkout
        env["PYTHONPATH"] = str(ROOT / "src")
    return env


def drive(spec: StackSpec, command: dict[str, Any], timeout: float = 900) -> list[dict[str, Any]]:
    """Run the stack's driver with `command`; its JSON records (raises with its reason when it fails)."""
    if spec.options:
        command = {**command, "options": spec.options}
    done = subprocess.run(
        [str(spec.python), str(BENCH / "stacks" / spec.driver), json.dumps(command)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_environment(spec),
        cwd=ROOT,
    )
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    errors = [record["message"] for record in records if record["kind"] == "error"]
    if done.returncode or errors:
        reason = errors[0] if errors else done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{spec.key}: {reason if errors else reason[0]}")
    return records


def measure(spec: StackSpec, fast: str, slow: str, runs: int, per_session: int) -> None:
    command = {
        "sequential": {"url": fast, "runs": runs},
        "concurrent": {"url": slow, "levels": list(LEVELS), "per_session": per_session},
    }
    for record in drive(spec, command):
        if record["kind"] == "sequential":
            spec.results.setdefault("us", []).append(record["wall_s"] / record["runs"] * 1e6)
            spec.results.setdefault("cpu_us", []).append(record["cpu_s"] / record["runs"] * 1e6)
        elif record["kind"] == "concurrent":
            rate = record["runs"] / record["wall_s"]
            spec.results.setdefault(f"rps{record['concurrency']}", []).append(rate)


def import_seconds(spec: StackSpec, repeats: int = 3) -> None:
    for _ in range(repeats):
        (record,) = drive(spec, {"import_only": True}, timeout=120)
        spec.results.setdefault("import_s", []).append(record["seconds"])


# -- the table ----------------------------------------------------------------------------------


def _median(spec: StackSpec, key: str) -> float:
    return statistics.median(spec.results[key])


def table(rows: list[StackSpec]) -> str:
    raw = rows[0]
    level_heads = " | ".join(f"runs/s {level} (50 ms)" for level in LEVELS)
    lines = [
        f"| stack | us/run (0 ms, sequential) | client CPU us/run | {level_heads} | import s |",
        "|---|---|---|" + "---|" * len(LEVELS) + "---|",
    ]
    for spec in rows:
        us, cpu = _median(spec, "us"), _median(spec, "cpu_us")
        cells = [f"{us:.0f} ({us / _median(raw, 'us'):.2f}x)", f"{cpu:.0f} ({cpu / _median(raw, 'cpu_us'):.2f}x)"]
        for level in LEVELS:
            rate = _median(spec, f"rps{level}")
            cells.append(f"{rate:.0f} ({rate / _median(raw, f'rps{level}'):.2f}x)")
        cells.append(f"{_median(spec, 'import_s'):.2f}")
        lines.append(f"| {spec.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _loads(values: tuple[float, float, float]) -> str:
    return "/".join(f"{value:.2f}" for value in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 round, 100 sequential runs, 1 run per session")
    parser.add_argument("--rounds", type=int, default=3, help="each cell is the median over rounds")
    parser.add_argument("--runs", type=int, default=400, help="sequential runs per round")
    parser.add_argument("--per-session", type=int, default=8, help="runs per concurrent session")
    parser.add_argument("--stacks", default="", help="comma-separated keys (default: all with a venv)")
    parser.add_argument("--wait-load", type=float, default=0.0, help="wait (20 min at most) for a lower load")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.runs, args.per_session = 1, 100, 1
    chosen = set(args.stacks.split(",")) - {""}
    rows: list[StackSpec] = []
    left_out: list[StackSpec] = []
    for spec in stacks():
        if chosen and spec.key not in chosen and spec.key != "raw":
            continue
        (rows if spec.python.exists() else left_out).append(spec)
    for spec in left_out:
        print(
            f"left out {spec.key}: no {spec.python.relative_to(ROOT)} (bash bench/make_peer_venvs.sh)", file=sys.stderr
        )
    deadline = time.time() + 1200
    while os.getloadavg()[0] >= args.wait_load > 0 and time.time() < deadline:  # other work shares the cores
        time.sleep(10)
    started, load_before = time.time(), os.getloadavg()
    fast, slow = Server(latency=0.0, handler=_handler), Server(latency=0.05, handler=_handler)
    try:
        for round_index in range(args.rounds):
            for spec in list(rows):
                try:
                    measure(spec, fast.base_url, slow.base_url, args.runs, args.per_session)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    print(f"left out {spec.key}: {exc}", file=sys.stderr)
                    rows.remove(spec)
                    if spec.key == "raw":
                        raise SystemExit("the raw loop failed: no ratios without it") from None
            print(f"round {round_index + 1}/{args.rounds} done ({time.time() - started:.0f} s)", file=sys.stderr)
    finally:
        fast.close()
        slow.close()
    for spec in rows:
        import_seconds(spec)
    print(
        f"{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(started))}, load average (1/5/15 min) before "
        f"{_loads(load_before)}, after {_loads(os.getloadavg())}; {args.rounds} round(s), "
        f"{args.runs} sequential runs, {args.per_session} run(s) per session, {time.time() - started:.0f} s"
    )
    print(table(rows))


if __name__ == "__main__":
    main()
