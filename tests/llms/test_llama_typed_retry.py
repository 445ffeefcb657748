"""Issue 36 item 4 on the embedded engine: a cut-short typed answer says why, and its retry is not the same reply.

The fast tests script the engine (`FakeServer`); the `slow` one runs the real SmolLM2-135M on
the case of the issue (a ``list[str]`` field that repeats one word until the generation is
stopped), sync and async from one body.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field
from test_llama_cpp import _with_fake_engine, make, needs_model

from _support import resolve
from plait.agents import Agent, AsyncAgent
from plait.exceptions import OutputValidationError
from plait.llms._llama_request import RETRY_MAX_ITEMS, bounded_response_format
from plait.outputs import OutputType


class Sentiment(BaseModel):
    label: str
    score: float
    keywords: list[str]


CUT = '{"label": "positive", "score": 0.9, "keywords": ["delightful", "delightful", "deli'
LOOP = '{"label": "positive", "score": 0.9, "keywords": [' + '"delightful", ' * 30
VALID = '{"label": "positive", "score": 0.9, "keywords": ["delightful"]}'


def _agent(mode: str, model: Any, retries: int) -> Any:
    return (AsyncAgent if mode == "async" else Agent)(model, output_type=Sentiment, output_retries=retries)


def test_a_retry_after_a_cut_reply_samples_afresh_under_bounded_lists(mode: str, tmp_path: Path) -> None:
    model, server = _with_fake_engine(mode, tmp_path)  # max_new_tokens=8, temperature=0
    server.replies = [(CUT, "length"), (VALID, "stop")]
    try:
        reply = resolve(_agent(mode, model, 1)("How was the film?"))
    finally:
        model.close()
    assert reply.formatted == Sentiment(label="positive", score=0.9, keywords=["delightful"])
    first, second = server.requests
    assert first["temperature"] == 0 and "maxItems" not in first["json_schema"]["properties"]["keywords"]
    assert second["temperature"] == 0.7 and second["seed"] == 1  # not the same greedy reply again
    assert second["repeat_penalty"] == 1.1 and second["dry_multiplier"] == 0.8
    assert second["max_tokens"] == 16  # cut at the length limit: twice the room
    assert second["json_schema"]["properties"]["keywords"]["maxItems"] == RETRY_MAX_ITEMS
    assert "cut at max_new_tokens=8" in second["messages"][-1]["content"]


def test_a_reply_stopped_by_the_repetition_guard_says_so(mode: str, tmp_path: Path) -> None:
    model, server = _with_fake_engine(mode, tmp_path)
    server.replies = [(LOOP, "stop"), (LOOP, "stop")]
    try:
        with pytest.raises(OutputValidationError) as caught:
            resolve(_agent(mode, model, 1)("How was the film?"))
    finally:
        model.close()
    assert server.stopped  # the guard stopped the generation
    assert caught.value.finish_reason == "repetition"
    assert "repetition guard" in caught.value.errors[0] and "repetition guard" in str(caught.value)
    first, second = server.requests
    assert second["max_tokens"] == first["max_tokens"]  # not cut by the limit: the same room
    assert second["json_schema"]["properties"]["keywords"]["maxItems"] == RETRY_MAX_ITEMS


def test_bounds_keep_what_the_schema_says() -> None:
    class Bounded(BaseModel):
        few: list[str] = Field(max_length=3)
        many: list[int] = Field(min_length=20)

    asked = OutputType(Bounded).response_format()
    bounded: Any = bounded_response_format(asked)
    properties = bounded["json_schema"]["schema"]["properties"]
    assert properties["few"]["maxItems"] == 3
    assert properties["many"]["maxItems"] == 20 and properties["many"]["minItems"] == 20
    assert "maxItems" not in asked["json_schema"]["schema"]["properties"]["many"]  # type: ignore[index]  # shared: never changed
    assert bounded_response_format({"type": "json_object"}) == {"type": "json_object"}


@pytest.mark.slow
@needs_model
def test_the_embedded_model_on_the_issue_case_says_why_then_a_retry_answers(mode: str) -> None:
    model = make(mode, max_new_tokens=256, temperature=0)
    prompt = "Sentiment of this review: The hotel was delightful. Delightful staff, delightful rooms."
    try:
        with pytest.raises(OutputValidationError) as caught:
            resolve(_agent(mode, model, 0)(prompt))
        assert caught.value.finish_reason == "repetition"  # "delightful" over and over, stopped by the guard
        assert "repetition guard" in str(caught.value)
        reply = resolve(_agent(mode, model, 2)(prompt))  # measured: the first retry answers (bench/README.md)
    finally:
        model.close()
    assert isinstance(reply.formatted, Sentiment)
    assert len(reply.formatted.keywords) <= RETRY_MAX_ITEMS
