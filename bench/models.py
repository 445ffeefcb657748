"""Catalogue models × tool protocols on 40 tool-calling tasks, plus load time, memory and speed.

Every installed catalogue model (`plait models`) runs bench/model_tasks.py's 40 tasks under
each tool protocol of the embedded engine (``json``: plait's schema-constrained protocol;
``template``: the model's own chat template and ``<tool_call>`` syntax, grammar-constrained),
at temperature 0 with ``tool_choice='auto'`` (the model decides whether to call), after the
system prompt of plait's apps (`plait.cli.DEFAULT_SYSTEM`). Each
(model, protocol) runs in a fresh process. Speed: load time, peak RSS, prompt and generation
tokens/s (llama.cpp's own timings) at 1 and 2 threads, one fresh process each.

    PYTHONPATH=src .venv/bin/python bench/models.py            # all installed models, both protocols
    PYTHONPATH=src .venv/bin/python bench/models.py --models qwen2.5-coder-0.5b --protocols template
    PYTHONPATH=src .venv/bin/python bench/models.py --table    # the Markdown tables of the last results
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_tasks import TASKS, TOOLS, Task, run_tool, same_call

from plait.agents.tool_loop import REUSED

RESULTS = Path(__file__).resolve().parent / "results" / "models.json"
PROTOCOLS = ("json", "template")
KINDS = ("simple", "several", "parallel", "irrelevant", "end_to_end")
MAX_TURNS = 4
SPEED_PROMPT = " ".join(f"Item {n}: the {n}th line of a long shopping list, with notes." for n in range(1, 30))


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _arguments(call: Any) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def system() -> list[dict[str, Any]]:
    """The system message of plait's apps (``plait run/chat/serve/web``), which every task starts with."""
    from plait.cli import DEFAULT_SYSTEM

    return [{"role": "system", "content": DEFAULT_SYSTEM}]


def first_turn(llm: Any, task: Task) -> dict[str, Any]:
    """Score a task on the model's first reply."""
    tools = [TOOLS[name] for name in task.tools]
    response = llm.complete([*system(), {"role": "user", "content": task.question}], tools=tools, tool_choice="auto")
    made = [(call.name, _arguments(call)) for call in response.tool_calls]
    if task.kind == "irrelevant":
        right = not made
    else:
        right = len(made) == len(task.calls) and all(
            any(same_call(name, args, want) for name, args in made) for want in task.calls
        )
    return {"right": right, "calls": made, "text": response.content[:200]}


def end_to_end(llm: Any, task: Task, routed: bool = True) -> dict[str, Any]:
    """Run the task's tool loop as `FunctionCallingAgent` does; right when the answer holds every expected fact.

    Each reply's calls run and their results go back; a call made before is not run again
    (its earlier result goes back with a note, plait's ``repeat_calls='reuse'``), and after a
    turn of only such calls, or at the last turn, the answer is asked for (``tool_choice='none'``).
    `routed` (the apps' ``tool_choice='routed'``): plait's `ToolRouter` picks the first
    call's tool choice, and asks for the tools again where a part of the question has no call
    yet (`ToolRouter.again`, once per round of new calls); else every turn is ``'auto'``.
    """
    from plait.agents.routing import ToolRouter

    tools = [TOOLS[name] for name in task.tools]
    router = ToolRouter()
    messages: list[dict[str, Any]] = [*system(), {"role": "user", "content": task.question}]
    made: list[Any] = []
    results: dict[str, str] = {}
    answer = ""
    choice = router(task.question, task.tools, tools) if routed else "auto"
    again_after = -1
    for turn in range(MAX_TURNS):
        if turn == MAX_TURNS - 1:
            choice = "none"
        response = llm.complete(messages, tools=tools, tool_choice=choice)
        if not response.tool_calls:
            answer = response.content
            break
        calls = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in response.tool_calls
        ]
        keys = [json.dumps([call.name, _arguments(call)], sort_keys=True) for call in response.tool_calls]
        if all(key in results for key in keys):  # only calls made before: the answer is asked for on what ran
            choice = "none"
            continue
        messages.append({"role": "assistant", "content": response.content or "", "tool_calls": calls})
        for call, key in zip(response.tool_calls, keys, strict=True):
            if key in results:
                result = f"{results[key]}\n{REUSED}"
            else:
                made.append((call.name, _arguments(call)))
                result = results[key] = run_tool(call.name, _arguments(call))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        choice = "auto"
        if routed and again_after < len(made) and router.again(task.question, [args for _, args in made], tools):
            choice, again_after = "required", len(made)
    flat = answer.replace(",", "").lower()
    return {"right": all(fact.lower() in flat for fact in task.answer), "calls": made, "text": answer[:300]}


def selected(tasks: str | None) -> list[Task]:
    """The tasks `tasks` names: comma-separated kinds or parts of questions (case-insensitive); all when None."""
    if not tasks:
        return TASKS
    wanted = [part.strip().lower() for part in tasks.split(",") if part.strip()]
    chosen = [task for task in TASKS if any(w == task.kind or w in task.question.lower() for w in wanted)]
    if not chosen:
        raise SystemExit(f"no task matches --tasks {tasks!r} (kinds: {', '.join(KINDS)})")
    return chosen


def run_one(model: str, protocol: str, threads: int, tasks: str | None = None, routed: bool = True) -> dict[str, Any]:
    """The tasks (all 40, or those `tasks` names: `selected`) on one model under one protocol (in this process)."""
    from plait.exceptions import UserError
    from plait.llms import LlamaCppModel

    llm = LlamaCppModel(
        model=model, tool_protocol=protocol, temperature=0, max_new_tokens=256, n_threads=threads, n_ctx=4096
    )
    began = time.perf_counter()
    llm.load()
    loaded = time.perf_counter() - began
    rows = []
    try:
        for task in selected(tasks):
            start = time.perf_counter()
            try:
                row = end_to_end(llm, task, routed) if task.kind == "end_to_end" else first_turn(llm, task)
            except UserError as exc:  # the protocol does not fit the model (no tool syntax in its template)
                return {"model": model, "protocol": protocol, "unsupported": str(exc)}
            except Exception as exc:
                row = {"right": False, "calls": [], "text": f"{type(exc).__name__}: {exc}"[:300]}
            row.update(kind=task.kind, question=task.question, seconds=round(time.perf_counter() - start, 2))
            rows.append(row)
            print(
                f"  {row['kind']:<11} {'ok ' if row['right'] else 'BAD'} {row['seconds']:>6}s {task.question}",
                file=sys.stderr,
            )
    finally:
        llm.close()
    return {
        "model": model,
        "protocol": protocol,
        "threads": threads,
        "end_to_end_tool_choice": "routed" if routed else "auto",
        "load_s": round(loaded, 2),
        "seconds": round(sum(row["seconds"] for row in rows), 1),
        "tokens": llm.usage.total_tokens,
        "tasks": rows,
    }


def speed_one(model: str, threads: int) -> dict[str, Any]:
    """Load time, peak RSS and llama.cpp's prompt / generation tokens per second (in this process)."""
    from plait.llms import LlamaCppModel

    llm = LlamaCppModel(model=model, temperature=0, n_threads=threads, n_ctx=2048)
    began = time.perf_counter()
    llm.load()
    loaded = time.perf_counter() - began
    prompt, generated = [], []
    for _ in range(2):
        response = llm.complete(
            [{"role": "user", "content": SPEED_PROMPT}], max_new_tokens=64, ignore_eos=True, cache_prompt=False
        )
        timings = (response.raw or {}).get("timings") or {}
        prompt.append(float(timings.get("prompt_per_second") or 0))
        generated.append(float(timings.get("predicted_per_second") or 0))
    llm.close()
    return {
        "model": model,
        "threads": threads,
        "load_s": round(loaded, 2),
        "rss_mb": round(peak_rss_mb()),
        "prompt_tps": round(max(prompt), 1),
        "gen_tps": round(max(generated), 1),
    }


def _child(args: list[str]) -> dict[str, Any]:
    env = dict(os.environ, PLAIT_TEST_RUN="manual")
    done = subprocess.run([sys.executable, __file__, *args], env=env, stdout=subprocess.PIPE, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def score(run: dict[str, Any]) -> dict[str, str]:
    if "unsupported" in run:
        return dict.fromkeys(KINDS, "n/a")
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in run["tasks"]:
        counts[row["kind"]][0] += int(row["right"])
        counts[row["kind"]][1] += 1
    return {kind: f"{counts[kind][0]}/{counts[kind][1]}" for kind in KINDS}


def table(results: dict[str, Any]) -> str:
    lines = [
        "| model | protocol | simple | several tools | parallel | irrelevant (no call) | end to end | all "
        "| time | tokens |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in results["runs"]:
        s = score(run)
        if "unsupported" in run:
            lines.append(f"| {run['model']} | {run['protocol']} | n/a: the template has no tool syntax |||||||")
            continue
        total = sum(int(row["right"]) for row in run["tasks"])
        cells = " | ".join(s[kind] for kind in KINDS)
        lines.append(
            f"| {run['model']} | {run['protocol']} | {cells} | {total}/{len(run['tasks'])} | {run['seconds']} s "
            f"| {run['tokens']:,} |"
        )
    lines += [
        "",
        "| model | threads | load | peak RSS | prompt tok/s | generation tok/s |",
        "|---|---|---|---|---|---|",
    ]
    for speed in results["speed"]:
        lines.append(
            f"| {speed['model']} | {speed['threads']} | {speed['load_s']} s | {speed['rss_mb']} MB | "
            f"{speed['prompt_tps']} | {speed['gen_tps']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated catalogue names (default: every installed one)")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--threads", type=int, default=2, help="threads for the task runs (default: 2)")
    parser.add_argument("--tasks", help="only these tasks: comma-separated kinds (end_to_end...) or parts of questions")
    parser.add_argument(
        "--unrouted", action="store_true", help="end to end under 'auto' on every turn, not the apps' 'routed'"
    )
    parser.add_argument("--no-speed", action="store_true", help="skip the speed runs")
    parser.add_argument("--table", action="store_true", help="print the tables of the saved results and stop")
    parser.add_argument("--speed-only", action="store_true", help="measure speed only, into the saved results")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"the results file (default: {RESULTS.name})")
    parser.add_argument("--one", nargs=2, metavar=("MODEL", "PROTOCOL"), help=argparse.SUPPRESS)
    parser.add_argument("--speed-one", nargs=2, metavar=("MODEL", "THREADS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one[0], args.one[1], args.threads, args.tasks, not args.unrouted)))
        return
    if args.speed_one:
        print(json.dumps(speed_one(args.speed_one[0], int(args.speed_one[1]))))
        return
    if args.table:
        print(table(json.loads(RESULTS.read_text())))
        return
    if args.speed_only:
        saved = json.loads(RESULTS.read_text())
        names = args.models.split(",") if args.models else sorted({run["model"] for run in saved["runs"]})
        saved["speed"] = [_child(["--speed-one", name, str(threads)]) for name in names for threads in (1, 2)]
        RESULTS.write_text(json.dumps(saved, indent=1))
        print(table(saved))
        return
    from plait.llms.catalogue import installed_models

    models = args.models.split(",") if args.models else [model.name for model in installed_models()]
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "cpu_count": os.cpu_count(), "runs": [], "speed": []}
    for model in models:
        for protocol in args.protocols.split(","):
            print(f"{model} / {protocol}", file=sys.stderr)
            task_args = (["--tasks", args.tasks] if args.tasks else []) + (["--unrouted"] if args.unrouted else [])
            results["runs"].append(_child(["--one", model, protocol, "--threads", str(args.threads), *task_args]))
        if not args.no_speed:
            for threads in (1, 2):
                results["speed"].append(_child(["--speed-one", model, str(threads)]))
        args.out.parent.mkdir(exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
