"""``plait export`` of evaluation folders: the OpenAI and ShareGPT outputs stay byte-identical (golden files).

The folders under ``tests/golden/export`` are real ``plait eval`` runs (a native tool agent, ReAct,
the InternLM2 plugin protocol, a plain chat agent, against the fake server); their
``openai*.jsonl`` / ``sharegpt*.jsonl`` were written by the exporter before it moved to
`plait.trajectories.export`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.trajectories.export import export

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "export"


@pytest.mark.parametrize("run", ["tool", "react", "internlm", "chat"])
@pytest.mark.parametrize("fmt", ["openai", "sharegpt"])
@pytest.mark.parametrize("passed", [False, True])
def test_eval_exports_are_unchanged(tmp_path: Path, run: str, fmt: str, passed: bool) -> None:
    name = f"{fmt}.passed.jsonl" if passed else f"{fmt}.jsonl"
    target = tmp_path / name
    written = export(GOLDEN / run, target, fmt, only_passed=passed)
    expected = (GOLDEN / run / name).read_bytes()
    assert target.read_bytes() == expected
    assert written == expected.count(b"\n")
