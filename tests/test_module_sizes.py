"""The architecture's size rule: one concept per module, median <= 250 lines, none over 600."""

from __future__ import annotations

import statistics
from pathlib import Path

import plait

SOURCE = Path(plait.__file__).resolve().parent


def _sizes() -> dict[str, int]:
    return {
        str(path.relative_to(SOURCE)): len(path.read_text("utf-8").splitlines())
        for path in sorted(SOURCE.rglob("*.py"))
    }


def test_no_module_is_over_600_lines() -> None:
    over = {name: lines for name, lines in _sizes().items() if lines > 600}
    assert not over, f"split these modules (600 lines at most): {over}"


def test_the_median_module_is_at_most_250_lines() -> None:
    sizes = _sizes()
    assert len(sizes) > 100  # the whole package was read
    assert statistics.median(sizes.values()) <= 250
