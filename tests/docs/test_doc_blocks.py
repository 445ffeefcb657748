"""Every Python block of the README runs as written, each in a fresh interpreter in an empty folder.

A block tagged ```` ```python no-run ```` (one that cannot run offline, such as an MCP server
fetched from npm) is only compiled; how many there are is pinned, so a new one is a decision.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
NO_RUN_BLOCKS = 1  # the MCP filesystem server (Node.js, fetched from npm)
PYTHON_TAGS = {"python", "python no-run"}
OTHER_TAGS = {"", "bash"}
TIMEOUT_S = 120
_FENCE = re.compile(r"^(\s*)```(.*)$")


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    tag: str  # the fence's info string, e.g. "python" or "python no-run"
    code: str


def readme_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, in order."""
    blocks: list[Block] = []
    opened: tuple[int, str, str] | None = None  # (line, indent, tag)
    body: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        fence = _FENCE.match(line)
        if opened is None:
            if fence:
                opened, body = (number, fence.group(1), fence.group(2).strip()), []
            continue
        if fence and fence.group(2).strip() == "":
            start, indent, tag = opened
            blocks.append(Block(start, tag, "\n".join(b.removeprefix(indent) for b in body) + "\n"))
            opened = None
        else:
            body.append(line)
    assert opened is None, f"README.md:{opened[0]}: a code block is never closed"
    return blocks


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))
RUN = [b for b in BLOCKS if b.tag == "python"]
NO_RUN = [b for b in BLOCKS if b.tag == "python no-run"]


def test_blocks_are_found_and_tagged() -> None:
    assert len(RUN) >= 5, [b.line for b in BLOCKS]
    unknown = [(b.line, b.tag) for b in BLOCKS if b.tag not in PYTHON_TAGS | OTHER_TAGS]
    assert unknown == [], "tag a Python block 'python' (run by this test) or 'python no-run'"


def test_no_run_blocks_are_pinned_and_compile() -> None:
    assert len(NO_RUN) == NO_RUN_BLOCKS, [b.line for b in NO_RUN]
    for block in NO_RUN:
        compile(block.code, f"README.md:{block.line}", "exec")


def test_parser_reads_tags_and_indented_fences() -> None:
    text = "x\n```python no-run\na = 1\n```\n  ```python\n  b = 2\n  ```\n```\nplain\n```\n"
    assert readme_blocks(text) == [
        Block(2, "python no-run", "a = 1\n"),
        Block(5, "python", "b = 2\n"),
        Block(8, "", "plain\n"),
    ]


@pytest.mark.parametrize("block", RUN, ids=[f"README.md:{b.line}" for b in RUN])
def test_readme_block_runs(block: Block, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PLAIT_API_BASE", "PLAIT_MODEL"):
        env.pop(name, None)  # the blocks must not depend on the caller's settings
    script = tmp_path / f"readme_{block.line}.py"
    script.write_text(block.code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, script.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"README.md:{block.line} failed:\n{block.code}\n--- stderr ---\n{done.stderr[-4000:]}"


def test_readme_blocks_pass_mypy_strict(tmp_path: Path) -> None:
    """A user's script written from the README type-checks under ``mypy --strict`` (issue 16)."""
    files = []
    for block in RUN:
        file = tmp_path / f"readme_line_{block.line}.py"
        file.write_text(block.code, encoding="utf-8")
        files.append(str(file))
    env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
    command = [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache")]
    checked = subprocess.run([*command, *files], capture_output=True, text=True, env=env, timeout=300)
    assert checked.returncode == 0, checked.stdout[-3000:]
