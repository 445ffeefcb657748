"""The README and docs speak to a reader who has never seen the project's origin (issue 36, item 6)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# how the project's private origin was named: numbered seeds and their course notes
ORIGIN = re.compile(r"\bseed \d{3}\b|\bseeds?'|\bseeds \d{3}|course notes", re.IGNORECASE)

WIDTH = 100
"""The widest code line the tutorial shows (wider ones run off the page)."""


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_no_private_origin_names(page: Path) -> None:
    found = [line for line in page.read_text("utf-8").splitlines() if ORIGIN.search(line)]
    assert not found, f"{page.name} speaks of the project's origin: {found}"


def test_tutorial_code_fits_the_page() -> None:
    inside, wide = False, []
    for number, line in enumerate((ROOT / "docs" / "tutorial.md").read_text("utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            inside = not inside
        elif inside and len(line) > WIDTH:
            wide.append((number, len(line)))
    assert not wide, f"code lines wider than {WIDTH} characters (line, width): {wide}"
