"""Typed answers on the embedded model: grammar-constrained decoding against instructions alone.

Ten prompts to the default embedded model (SmolLM2-135M, temperature 0) through an `Agent`
with ``output_type=Book`` (three fields: title, author, year) and ``output_retries=0``, so a
reply that does not validate counts as a failure instead of being retried:

* *grammar*: `LlamaCppModel` decodes under the schema's grammar (``response_format`` ->
  llama.cpp ``json_schema``), the default;
* *instructions*: the same model told the schema in words (what a backend without a schema
  parameter gets), the reply validated afterwards.

    PYTHONPATH=src .venv/bin/python bench/typed_outputs.py

``--retries``: the case of issue 36 (a ``Sentiment`` with ``keywords: list[str]``; four
reviews where the 135M model writes one word over and over until the repetition guard stops
it), ``output_retries=2``, 256 new tokens: attempts, valid answers and seconds when a retry
asks again with the same parameters (*before*) and with `LlamaCppModel.retry_params`
(*after*: resampled, lists bounded after a cut reply).

    PYTHONPATH=src .venv/bin/python bench/typed_outputs.py --retries
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from pydantic import BaseModel

from plait.agents import Agent
from plait.exceptions import OutputValidationError
from plait.llms import LlamaCppModel

PROMPTS = [
    "Tell me about 1984 by George Orwell.",
    "Describe the novel Dune.",
    "What is Hamlet?",
    "Give me a classic science fiction book.",
    "Which book is Pride and Prejudice?",
    "A famous Russian novel, please.",
    "Recommend a book about the sea.",
    "What did Tolkien write?",
    "Tell me about The Great Gatsby.",
    "Name a children's book.",
]


class Book(BaseModel):
    """A book, as the model describes it."""

    title: str
    author: str
    year: int


def run(llm: LlamaCppModel, label: str) -> None:
    """Ask every prompt once in its own session; print validity and time per answer."""
    agent = Agent(llm, "You describe books.", output_type=Book, output_retries=0)
    seconds: list[float] = []
    valid = 0
    for session, prompt in enumerate(PROMPTS):
        start = time.perf_counter()
        try:
            reply = agent(prompt, session_id=session)
            valid += isinstance(reply.formatted, Book)
            shown = repr(reply.formatted)
        except OutputValidationError as exc:
            shown = f"invalid: {exc.errors[:2]}"
        seconds.append(time.perf_counter() - start)
        print(f"  {seconds[-1]:5.2f} s  {prompt[:40]:40}  {shown[:90]}")
    print(
        f"| {label} | {valid} / {len(PROMPTS)} | {statistics.median(seconds):.2f} | {max(seconds):.2f} |",
        flush=True,
    )


class Sentiment(BaseModel):
    """A review's sentiment (the type of issue 36)."""

    label: str
    score: float
    keywords: list[str]


REVIEWS = [
    "Analyse the sentiment of: 'What a delightful, delightful day at the beach.'",
    "Sentiment of this review: The hotel was delightful. Delightful staff, delightful rooms.",
    "Classify: 'This book is absolutely delightful.'",
    "Review: 'Delightful! Simply delightful, I would go again.' Sentiment?",
]


def retries(llm: Any, label: str) -> None:
    """Every review once, with two retries; print attempts, validity and seconds."""
    agent = Agent(llm, "You analyse sentiment.", output_type=Sentiment, output_retries=2)
    attempts: list[int] = []
    calls = [0]
    complete = llm.complete

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return complete(*args, **kwargs)

    llm.complete = counted
    valid, start = 0, time.perf_counter()
    for session, review in enumerate(REVIEWS):
        calls[0] = 0
        try:
            shown = repr(agent(review, session_id=session).formatted)
            valid += 1
        except OutputValidationError as exc:
            shown = f"invalid: {str(exc)[:100]}"
        attempts.append(calls[0])
        print(f"  {calls[0]} attempts  {review[:40]:40}  {shown[:100]}", flush=True)
    del llm.complete
    seconds = time.perf_counter() - start
    print(f"| {label} | {valid} / {len(REVIEWS)} | {sum(attempts)} | {seconds:.1f} |", flush=True)


def main() -> None:
    """Both variants on one loaded model."""
    if "--retries" in sys.argv:
        llm = LlamaCppModel(temperature=0, max_new_tokens=256)
        print("| retry | valid | attempts | seconds |")
        print("|---|---|---|---|")
        llm.retry_params = None  # before: the same parameters again (output_flow finds no retry_params)
        retries(llm, "the same request again (before)")
        del llm.retry_params
        retries(llm, "retry_params: resampled, lists bounded (after)")
        return
    llm = LlamaCppModel(temperature=0, max_new_tokens=128)
    print("| variant | valid without retry | median s per answer | max s |")
    print("|---|---|---|---|")
    run(llm, "grammar (response_format -> json_schema)")
    llm.native_response_format = False  # the schema in words only, as for a backend that takes none
    run(llm, "instructions only")


if __name__ == "__main__":
    main()
