"""The trajectory record: round trip, hostile lines, torn lines, token exactness."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from plait.exceptions import ParseError, UserError
from plait.trajectories import StepOutcome, Trajectory, TrajectoryFile, TurnTokens, read_trajectories


def _trajectory(tokens: bool = True) -> Trajectory:
    return Trajectory(
        id="t1",
        messages=[
            {"role": "user", "content": "2+2?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": '{"x": "2+2"}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "4"},
            {"role": "assistant", "content": "4", "reasoning_content": "easy"},
        ],
        tokens=[TurnTokens(message=1, completion_ids=[5, 6]), TurnTokens(message=3, completion_ids=[7])]
        if tokens
        else [],
        reward=1.0,
        outcomes=[StepOutcome(message=2)],
        source="eval",
    )


def test_round_trip_and_exactness(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TrajectoryFile(path) as out:
        out.append(_trajectory())
        out.append(_trajectory(tokens=False).model_copy(update={"id": "t2"}))
    back = list(read_trajectories(path))
    assert back == [_trajectory(), _trajectory(tokens=False).model_copy(update={"id": "t2"})]
    assert [t.token_exact for t in back] == [True, False]


@pytest.mark.parametrize(
    ("line", "names"),
    [
        ("[1]", "JSON object"),
        ('{"id": "x", "messages": [{"content": "no role"}]}', "no role"),
        ('{"id": "x", "messages": [], "tokens": [{"message": 3, "completion_ids": []}]}', "not an assistant"),
        (
            '{"id": "x", "messages": [{"role": "assistant"}],'
            ' "tokens": [{"message": 0, "completion_ids": [1], "logprobs": []}]}',
            "logprobs",
        ),
        ('{"id": "x", "messages": [], "version": 9}', "version 9"),
        ('{"id": "x", "messages": [], "secret": 1}', "secret"),
    ],
)
def test_hostile_lines_are_parse_errors(line: str, names: str) -> None:
    with pytest.raises(ParseError, match=names):
        Trajectory.from_json(line)


def test_torn_last_line_is_cut_and_bad_line_named(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(_trajectory().to_json().encode() + b"\n" + b'{"id": "half')
    with TrajectoryFile(path) as out:
        out.append(_trajectory().model_copy(update={"id": "t3"}))
    assert [t.id for t in read_trajectories(path)] == ["t1", "t3"]
    with open(path, "ab") as fh:
        fh.write(b'{"id": 1}\n')
    with pytest.raises(UserError, match="line 3"):
        list(read_trajectories(os.fspath(path)))
