"""A long chat on the embedded model under each context policy: per-turn latency, request size, cache hits.

Every turn is a ~600-token user message carrying one fact (``the code word of turn N is
WORD``). The agent is a plain `Agent` on `LlamaCppModel` (SmolLM2-135M, ``n_ctx`` 4,096,
greedy, `--max-new-tokens` per reply). Per policy it reports:

* turns answered and turns that failed (``none``: no policy, the whole history sent);
* the largest request, in prompt tokens as llama.cpp counted them, against the context;
* per-turn latency (median, 90th percentile, last five turns) in seconds;
* the prompt cache: the share of prompt tokens llama.cpp took from its KV cache
  (``timings.cache_n``) instead of evaluating again;
* ``summarise`` only: how many times older turns were folded, and the share of the folded
  turns' code words the final summary still holds (how much a 135M model's summary keeps).

``trim-sliding`` is ``trim`` without headroom (the cut moves every turn, as a trim that drops
the minimum does): it shows what a stable cut is worth to the cache. ``NAME:H`` runs a policy
with headroom ``H`` (default 0.25).

Usage: ``python bench/context_policies.py [--turns 20] [--policies trim,summarise,...] [--max-new-tokens 32]``
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Hashable
from typing import Any, TypeVar

from plait.agents import Agent
from plait.context import ContextPolicy
from plait.effects import Effect, Flow, ModelCall
from plait.interceptors import Interceptor, intercept
from plait.llms import LlamaCppModel
from plait.llms.response import ModelResponse

R = TypeVar("R")

CITIES = ["Rome", "Lyon", "Kyoto", "Lima", "Oslo", "Cairo", "Quito", "Perth", "Hanoi", "Dakar"]
THINGS = ["bridge", "market", "library", "harbour", "garden", "museum", "station", "tower", "temple", "square"]
WORDS = ["amber", "basil", "cobalt", "dune", "ember", "fjord", "garnet", "hazel", "indigo", "juniper"]


def turn_text(n: int, rng: random.Random, tokens: int = 600) -> tuple[str, str]:
    """A user turn of about `tokens` tokens and the code word it carries."""
    word = f"{rng.choice(WORDS)}{n}"
    sentences = [f"Remember this: the code word of turn {n} is {word}."]
    while sum(len(s) for s in sentences) < tokens * 4:
        city, thing, other = rng.choice(CITIES), rng.choice(THINGS), rng.choice(CITIES)
        sentences.append(
            f"In {city} the old {thing} was rebuilt after the flood, and travellers from {other} "
            f"came to see it in the spring of year {rng.randint(1200, 1999)}."
        )
    sentences.append(f"Question {n}: which city did I mention first?")
    return " ".join(sentences), word


class Timings(Interceptor):
    """Sends the agent's ``chat`` as ``complete`` and keeps llama.cpp's usage and timings of each reply."""

    effects = (ModelCall,)

    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []

    def around(self, effect: Effect[R]) -> Flow[R]:
        if not isinstance(effect, ModelCall) or effect.method != "chat":
            passed: R = yield effect
            return passed
        response: ModelResponse = yield effect.replace(method="complete")
        raw = response.raw if isinstance(response.raw, dict) else {}
        timings = raw.get("timings") or {}
        usage = response.usage
        self.replies.append(
            {
                "prompt_tokens": usage.prompt_tokens if usage else 0,
                "cache_n": int(timings.get("cache_n", 0)),
                "prompt_n": int(timings.get("prompt_n", 0)),
            }
        )
        return response.content  # type: ignore[return-value]  # what chat answers: the text


def run(policy_name: str, turns: int, max_new_tokens: int, llm: LlamaCppModel, session: Hashable) -> dict[str, Any]:
    name, _, headroom = policy_name.partition(":")
    if name == "none":
        policy: ContextPolicy | None = None
    elif name == "trim-sliding":
        policy = ContextPolicy("trim", headroom=0.0)
    else:
        policy = ContextPolicy(name, headroom=float(headroom or 0.25))  # type: ignore[arg-type]
    agent = Agent(llm, context_policy=policy)
    timings = Timings()
    rng = random.Random(7)
    words: list[str] = []
    latencies: list[float] = []
    failed = 0
    with intercept(agent, timings):
        for n in range(turns):
            text, word = turn_text(n, rng)
            words.append(word)
            start = time.perf_counter()
            try:
                agent(text, session_id=session)
            except Exception as exc:  # counted: "none" fails once the history outgrows the model
                failed += 1
                if failed == 1:
                    print(f"  {policy_name}: turn {n} failed: {str(exc)[:120]}", flush=True)
            latencies.append(time.perf_counter() - start)
    replies = timings.replies
    cached = sum(r["cache_n"] for r in replies)
    evaluated = sum(r["prompt_n"] for r in replies)
    result: dict[str, Any] = {
        "policy": policy_name,
        "turns": turns,
        "answered": turns - failed,
        "failed": failed,
        "max_prompt_tokens": max((r["prompt_tokens"] for r in replies), default=0),
        "context_window": llm.context_window,
        "latency_median_s": round(statistics.median(latencies), 2),
        "latency_p90_s": round(sorted(latencies)[int(0.9 * (len(latencies) - 1))], 2),
        "latency_last5_s": round(statistics.mean(latencies[-5:]), 2),
        "total_s": round(sum(latencies), 1),
        "cache_hit": round(cached / max(1, cached + evaluated), 3),
    }
    if policy is not None and policy.policy == "summarise":
        memory = agent.memory.get(session)
        summary = memory.summary if memory is not None else None
        covered = summary.covers // 2 if summary else 0  # two messages a turn
        kept = sum(word in (summary.text if summary else "") for word in words[:covered])
        result |= {"folds": policy.summarised.get(session, 0), "summary_recall": f"{kept}/{covered}"}
        result["summary"] = (summary.text if summary else "")[:300]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--policies", default="none,trim,trim-sliding,summarise")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    args = parser.parse_args()
    llm = LlamaCppModel(temperature=0, max_new_tokens=args.max_new_tokens, n_ctx=4096)
    for i, name in enumerate(args.policies.split(",")):
        print(json.dumps(run(name, args.turns, args.max_new_tokens, llm, f"s{i}")), flush=True)
    llm.close()


if __name__ == "__main__":
    main()
