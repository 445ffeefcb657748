"""KV-cache reuse on the embedded model: does turn 2 of a tool loop evaluate only the new tokens?

A `FunctionCallingAgent` with the Calculator on `LlamaCppModel` (SmolLM2-135M, greedy), a
system prompt of about 1,000 tokens, and a question that makes the model call the tool; the
tool loop then asks again with the call and its result appended. For each model call
llama.cpp reports how many prompt tokens it took from its KV cache (``timings.cache_n``),
how many it evaluated (``prompt_n``) and the time that took (``prompt_ms``).

* *one session*: turn 2's prompt time against turn 1's (goal: <= 0.3x);
* *alternating sessions*: two sessions on an engine of two slots (``n_parallel=2``), their
  tool loops alternating (A0, B0, then A1, B1 with new questions): does each session's turn 2
  still find its own prefix after the other session ran?

    PYTHONPATH=src .venv/bin/python bench/kv_reuse.py
"""

from __future__ import annotations

from typing import Any, TypeVar

from plait.actions.calculator import Calculator
from plait.agents.function_calling import FunctionCallingAgent
from plait.effects import Effect, Flow, ModelCall
from plait.interceptors import Interceptor, intercept
from plait.llms import LlamaCppModel
from plait.llms.response import ModelResponse

R = TypeVar("R")

RULES = [
    "Answer in one short sentence.",
    "Use the calculator for every arithmetic question, and never compute in your head.",
    "Quote the calculator's result exactly as it was returned.",
    "If a question has no arithmetic, answer it directly without any tool.",
    "Be polite, be brief, and do not repeat the question back to the user.",
]


def system_prompt(tokens: int = 1000) -> str:
    """A system prompt of about `tokens` tokens (numbered house rules, repeated)."""
    lines = ["You are the assistant of a small accounting office. House rules follow."]
    n = 0
    while sum(len(line) for line in lines) < tokens * 4:
        lines.append(f"Rule {n + 1}: {RULES[n % len(RULES)]}")
        n += 1
    return "\n".join(lines)


class Timings(Interceptor):
    """Keeps llama.cpp's prompt timings of every model call, with its session."""

    effects = (ModelCall,)

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def around(self, effect: Effect[R]) -> Flow[R]:
        result: R = yield effect
        if isinstance(effect, ModelCall) and isinstance(result, ModelResponse) and isinstance(result.raw, dict):
            timings = result.raw.get("timings") or {}
            self.calls.append(
                {
                    "session": effect.session_id,
                    "cache_n": int(timings.get("cache_n", 0)),
                    "prompt_n": int(timings.get("prompt_n", 0)),
                    "prompt_ms": float(timings.get("prompt_ms", 0.0)),
                }
            )
        return result


def row(label: str, first: dict[str, Any], second: dict[str, Any]) -> None:
    """One table row: turn 1 and turn 2 of a session, and the ratio of their prompt times."""
    ratio = second["prompt_ms"] / max(first["prompt_ms"], 1e-9)
    print(
        f"| {label} | {first['prompt_n']} evaluated, {first['cache_n']} cached, {first['prompt_ms']:.0f} ms "
        f"| {second['prompt_n']} evaluated, {second['cache_n']} cached, {second['prompt_ms']:.0f} ms | {ratio:.2f}x |",
        flush=True,
    )


def one_session(llm: LlamaCppModel, prompt: str) -> None:
    """Turn 1 and turn 2 of one tool loop."""
    agent = FunctionCallingAgent(llm, [Calculator()], prompt, tool_choice="required")
    timings = Timings()
    with intercept(agent, timings):
        agent("What is 37 * 91?", session_id="one")
    first, second = timings.calls[:2]
    row("one session", first, second)


def interleaved(llm: LlamaCppModel, prompt: str) -> None:
    """Two sessions whose tool loops alternate on a two-slot engine."""
    agents = {s: FunctionCallingAgent(llm, [Calculator()], prompt, tool_choice="required") for s in ("A", "B")}
    timings = Timings()
    questions = {"A": "What is 37 * 91?", "B": "What is 1234 + 5678?"}
    # A0, B0, A1, B1: the second round shows whether each session's prefix survived the other's loop
    for round_ in range(2):
        for session, agent in agents.items():
            with intercept(agent, timings):
                agent(questions[session], session_id=f"{session}{round_}")
    by_session: dict[str, list[dict[str, Any]]] = {}
    for call in timings.calls:
        by_session.setdefault(str(call["session"]), []).append(call)
    for session in ("A1", "B1"):
        first, second = by_session[session][:2]
        row(f"session {session[0]}, after the other session ran", first, second)


def main() -> None:
    """Both measurements on one loaded model."""
    prompt = system_prompt()
    print("| case | turn 1 prompt | turn 2 prompt | turn 2 / turn 1 time |")
    print("|---|---|---|---|")
    one_session(LlamaCppModel(temperature=0, max_new_tokens=48), prompt)
    interleaved(LlamaCppModel(temperature=0, max_new_tokens=48, n_parallel=2), prompt)


if __name__ == "__main__":
    main()
