"""Each export format from `Trajectory` records: its lines validate against its JSON Schema; verl keeps the tokens."""

from __future__ import annotations

import importlib.util
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from plait.exceptions import UserError
from plait.trajectories import StepOutcome, Trajectory, TrajectoryFile, TurnTokens
from plait.trajectories.export import (
    export,
    export_trajectories,
    schema,
    to_openai,
    to_sharegpt,
    to_verl,
    to_xtuner,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "Calculator",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Use the calculator."},
    {"role": "user", "content": "What is 6 * 7?"},
    {
        "role": "assistant",
        "reasoning_content": "Multiply.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Calculator", "arguments": '{"expression": "6 * 7"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "42"},
    {"role": "assistant", "content": "It is 42."},
]


def trajectory(**changes: Any) -> Trajectory:
    fields: dict[str, Any] = {
        "id": "t1",
        "messages": MESSAGES,
        "tools": TOOLS,
        "reward": 1.0,
        "outcomes": [StepOutcome(message=3, status="ok")],
        "source": "proxy",
        "tokens": [
            TurnTokens(message=2, prompt_ids=[1, 2, 3], completion_ids=[4, 5], logprobs=[-0.5, -0.25]),
            TurnTokens(message=4, prompt_ids=[1, 2, 3, 4, 5, 6, 7], completion_ids=[8, 9], logprobs=[-1.0, -0.125]),
        ],
    }
    fields.update(changes)
    return Trajectory(**fields)


@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "xtuner", "verl", "trajectories"])
def test_each_format_validates_against_its_schema(tmp_path: Path, fmt: str) -> None:
    source = tmp_path / "in.jsonl"
    with TrajectoryFile(source) as out:
        out.append(trajectory())
        out.append(trajectory(id="t2", tokens=[], reward=None))  # text only, unscored
    written = export(source, tmp_path / "out.jsonl", fmt)
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert written == len(lines) == (1 if fmt == "verl" else 2)  # verl needs the tokens
    for line in lines:
        jsonschema.validate(line, schema(fmt))
    assert export(source, tmp_path / "rewarded.jsonl", fmt, min_reward=0.5) == 1


def test_the_formats_carry_the_conversation() -> None:
    one = trajectory()
    openai = to_openai(one)
    assert openai["tools"] == TOOLS
    assert all("reasoning_content" not in m for m in openai["messages"])  # no such field in the format
    assert [t["from"] for t in to_sharegpt(one)["conversations"]] == ["human", "function_call", "observation", "gpt"]
    xtuner = to_xtuner(one)["messages"]
    assert [m["role"] for m in xtuner] == ["system", "user", "assistant", "user", "assistant"]
    assert xtuner[0]["content"].startswith("Use the calculator.\n\nYou can call these tools:\n[{")
    call = xtuner[2]["content"]
    assert call.startswith("<|action_start|><|plugin|>\n") and call.endswith("<|action_end|>")
    assert json.loads(call.split("\n", 1)[1].removesuffix("<|action_end|>")) == {
        "name": "Calculator",
        "parameters": {"expression": "6 * 7"},
    }
    assert xtuner[3] == {"role": "user", "content": "42"} and xtuner[4]["loss"] is True


def test_verl_rollout_keeps_tokens_mask_logprobs_and_reward() -> None:
    line = to_verl(trajectory())
    assert line is not None
    assert line["prompt_ids"] == [1, 2, 3]
    assert line["response_ids"] == [4, 5, 6, 7, 8, 9]  # sampled, the tool's tokens between turns, sampled
    assert line["response_mask"] == [1, 1, 0, 0, 1, 1]
    assert line["response_logprobs"] == [-0.5, -0.25, 0.0, 0.0, -1.0, -0.125]
    assert (line["reward_score"], line["num_turns"]) == (1.0, 4)
    assert line["extra_fields"]["id"] == "t1"
    no_logprobs = to_verl(trajectory(tokens=[TurnTokens(message=4, prompt_ids=[1], completion_ids=[2])]))
    assert no_logprobs is None  # message 2 has no tokens: not token-exact
    rerendered = trajectory(
        tokens=[
            TurnTokens(message=2, prompt_ids=[1, 2, 3], completion_ids=[4, 5]),
            TurnTokens(message=4, prompt_ids=[1, 2, 99, 6], completion_ids=[8]),  # the history re-tokenised
        ]
    )
    assert to_verl(rerendered) is None


def test_unknown_format_and_missing_source_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown export format 'alpaca': use openai, sharegpt, xtuner, verl"):
        export_trajectories([trajectory()], tmp_path / "x.jsonl", "alpaca")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="no evaluation in"):
        export(tmp_path / "nowhere", tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()


XTUNER_WHEEL = os.environ.get("PLAIT_XTUNER_WHEEL", "")


@pytest.mark.skipif(
    not XTUNER_WHEEL,
    reason="XTuner does not install here (it pins transformers==4.48, bitsandbytes and torchvision); set "
    "PLAIT_XTUNER_WHEEL to a downloaded xtuner wheel (pip download --no-deps xtuner) to run its map function",
)
def test_xtuner_export_loads_with_xtuners_own_map_function(tmp_path: Path) -> None:
    """XTuner's ``openai_map_fn`` (a module with no imports) taken from its wheel, run on the export's lines."""
    with zipfile.ZipFile(XTUNER_WHEEL) as wheel:
        source = wheel.read("xtuner/dataset/map_fns/dataset_map_fns/openai_map_fn.py")
    module_path = tmp_path / "openai_map_fn.py"
    module_path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("xtuner_openai_map_fn", module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    line = to_xtuner(trajectory())
    conversation = module.openai_map_fn(line)["conversation"]
    assert [turn["output"] for turn in conversation] == [m["content"] for m in line["messages"][2::2]]
    assert conversation[1]["input"] == "42" and all(turn["output_with_loss"] for turn in conversation)
    assert conversation[0]["system"].startswith("Use the calculator.")
