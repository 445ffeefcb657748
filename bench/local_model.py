"""Tokens/s of the embedded model through plait vs calling the same xllamacpp engine directly.

Every case sends the same request to the same loaded engine (plait's own), interleaved so
that load changes hit all cases alike; the median of `--rounds` is reported.

Usage: ``python bench/local_model.py [--rounds 5] [--tokens 128]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from plait.llms.llama_cpp import AsyncLlamaCppModel, LlamaCppModel

MESSAGES = [{"role": "user", "content": "Write a long story about a dragon who learns to cook."}]


def cases(tokens: int) -> dict[str, Callable[[], int]]:
    params: dict[str, Any] = {"max_new_tokens": tokens, "temperature": 0, "top_p": 0.8, "top_k": 40}
    model, amodel = LlamaCppModel(**params), AsyncLlamaCppModel(**params)
    server = model._server()  # the engine plait itself uses
    request = {"messages": MESSAGES, "max_tokens": tokens, "temperature": 0, "top_p": 0.8, "top_k": 40}
    loop = asyncio.new_event_loop()

    def direct() -> int:
        return int(server.handle_chat_completions(dict(request))["usage"]["completion_tokens"])

    def direct_stream() -> int:
        count = [0]

        def on_chunk(chunk: dict[str, Any]) -> bool:
            if chunk.get("choices") and chunk["choices"][0].get("delta", {}).get("content"):
                count[0] += 1
            return False

        server.handle_chat_completions(dict(request, stream=True), on_chunk)
        return count[0]

    def counted(llm: Any, run: Callable[[], Any]) -> Callable[[], int]:
        def case() -> int:
            before = llm.usage.completion_tokens
            run()
            return int(llm.usage.completion_tokens - before)

        return case

    async def astream() -> None:
        async for _ in amodel.stream_chat(MESSAGES):
            pass

    return {
        "direct chat": direct,
        "plait chat": counted(model, lambda: model.chat(MESSAGES)),
        "plait async chat": counted(amodel, lambda: loop.run_until_complete(amodel.chat(MESSAGES))),
        "direct stream": direct_stream,
        "plait stream_chat": counted(model, lambda: list(model.stream_chat(MESSAGES))),
        "plait async stream_chat": counted(amodel, lambda: loop.run_until_complete(astream())),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    table = cases(args.tokens)
    for case in table.values():  # warm-up
        case()
    rates: dict[str, list[float]] = {name: [] for name in table}
    for _ in range(args.rounds):
        for name, case in table.items():
            start = time.perf_counter()
            produced = case()
            rates[name].append(produced / (time.perf_counter() - start))
    median = {name: statistics.median(values) for name, values in rates.items()}
    lines = ["| path | tokens/s (median) | vs direct |", "|---|---|---|"]
    for name, value in median.items():
        base = median["direct stream" if "stream" in name else "direct chat"]
        lines.append(f"| {name} | {value:.1f} | {value / base:.2f}x |")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
