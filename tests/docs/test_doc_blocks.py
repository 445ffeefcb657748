"""Every Python block of README.md and docs/**/*.md runs as written (``make doctest``).

Each *program* runs in a fresh interpreter, in an empty temporary folder, with no model key or
server address from the caller's environment: blocks run offline against the `plait.testing`
doubles (`ScriptedLLM`, `FakeOpenAIServer`, ...) or the embedded model. The fence's info string
says what happens to a block:

* ```` ```python ```` starts a program: the block runs on its own.
* ```` ```python continued ```` adds to the program of the block before it on the same page (a page
  that builds one example over several blocks says so in its text); the program runs once, as the
  blocks joined in order.
* ```` ```python no-run ```` is only compiled: for the few blocks that cannot run offline (an MCP
  server fetched from npm, a GPU engine). How many each file has is pinned in `NO_RUN`, so a new
  one is a decision.

Other fences (``bash``, ``text``, ``json``, ...) are not run. Every program also passes
``mypy --strict``: a user's script copied from the docs type-checks.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
NO_RUN = {
    "README.md": 1,  # the MCP filesystem server (Node.js, fetched from npm)
    "docs/memory.md": 2,  # a PostgreSQL server; pytest running a third party's backend through the suite
    "docs/models.md": 2,  # HF transformers and vLLM load multi-GB weights (vLLM needs a GPU); a client of a running
    # `plait models serve`
    "docs/serving.md": 1,  # a Ray actor (Ray starts a local runtime: tens of seconds)
}
MIN_RUN_BLOCKS = 40  # the issue 23 floor for README.md and docs/ together
RUN_TAGS = {"python", "python continued"}
PYTHON_TAGS = {*RUN_TAGS, "python no-run"}
OTHER_TAGS = {"", "bash", "text", "json", "yaml", "toml", "console", "jsonl", "mermaid"}
TIMEOUT_S = 180
_FENCE = re.compile(r"^(\s*)```(.*)$")


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    tag: str  # the fence's info string, e.g. "python" or "python no-run"
    code: str


@dataclass(frozen=True)
class Program:
    """One or more blocks of a page that run together: a ``python`` block and its ``python continued`` ones."""

    source: str  # the file, relative to the repository root
    blocks: tuple[Block, ...]

    @property
    def name(self) -> str:
        return f"{self.source}:{'+'.join(str(b.line) for b in self.blocks)}"

    @property
    def code(self) -> str:
        return "\n".join(b.code for b in self.blocks)


def markdown_blocks(text: str, source: str = "<text>") -> list[Block]:
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
    assert opened is None, f"{source}:{opened[0]}: a code block is never closed"
    return blocks


def programs(blocks: list[Block], source: str) -> list[Program]:
    """The runnable programs of a page: each ``python`` block with the ``python continued`` blocks after it."""
    found: list[Program] = []
    for block in blocks:
        if block.tag == "python":
            found.append(Program(source, (block,)))
        elif block.tag == "python continued":
            assert found, f"{source}:{block.line}: 'python continued' with no 'python' block before it"
            found[-1] = Program(source, (*found[-1].blocks, block))
    return found


BLOCKS = {str(path.relative_to(ROOT)): markdown_blocks(path.read_text(encoding="utf-8"), str(path)) for path in SOURCES}
PROGRAMS = [program for source, blocks in BLOCKS.items() for program in programs(blocks, source)]


def test_blocks_are_found_and_tagged() -> None:
    run = sum(len(p.blocks) for p in PROGRAMS)
    assert run >= MIN_RUN_BLOCKS, f"only {run} runnable blocks"
    assert any(p.source == "README.md" for p in PROGRAMS)
    unknown = [(s, b.line, b.tag) for s, bs in BLOCKS.items() for b in bs if b.tag not in PYTHON_TAGS | OTHER_TAGS]
    assert unknown == [], f"tag a block with one of {sorted(PYTHON_TAGS | OTHER_TAGS)}"


def test_no_run_blocks_are_pinned_and_compile() -> None:
    counted = {s: n for s, bs in BLOCKS.items() if (n := sum(b.tag == "python no-run" for b in bs))}
    assert counted == NO_RUN
    for source, blocks in BLOCKS.items():
        for block in blocks:
            if block.tag == "python no-run":
                compile(block.code, f"{source}:{block.line}", "exec")


def test_parser_reads_tags_and_indented_fences() -> None:
    text = "x\n```python no-run\na = 1\n```\n  ```python\n  b = 2\n  ```\n```\nplain\n```\n"
    assert markdown_blocks(text) == [
        Block(2, "python no-run", "a = 1\n"),
        Block(5, "python", "b = 2\n"),
        Block(8, "", "plain\n"),
    ]


def test_continued_blocks_join_the_program_before_them() -> None:
    text = "```python\na = 1\n```\n```bash\nls\n```\n```python continued\nprint(a)\n```\n```python\nb = 2\n```\n"
    found = programs(markdown_blocks(text), "page.md")
    assert [p.name for p in found] == ["page.md:1+7", "page.md:10"]
    assert found[0].code == "a = 1\n\nprint(a)\n"
    with pytest.raises(AssertionError, match="no 'python' block before it"):
        programs(markdown_blocks("```python continued\nx = 1\n```\n"), "page.md")


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_block_runs(program: Program, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PLAIT_API_BASE", "PLAIT_MODEL", "ANTHROPIC_API_KEY"):
        env.pop(name, None)  # the blocks must not depend on the caller's settings
    script = tmp_path / "block.py"
    script.write_text(program.code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, script.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"{program.name} failed:\n{program.code}\n--- stderr ---\n{done.stderr[-4000:]}"


# mypy analyses plait and every package a block imports (transformers, torch, ray, the openai SDK:
# some 10,000 modules) before it checks the blocks: minutes from a cold cache, ~10 s from a warm one.
# The blocks are checked with the project's own mypy settings (pyproject.toml) in the project's own
# cache, the one `make typecheck` fills (`make test` runs it first): only what the blocks add (the
# openai SDK, the blocks themselves) is analysed, once; later runs reuse it all.
MYPY_CACHE = ROOT / ".mypy_cache"
MYPY_COLD_S = 1800  # a fresh clone's first run on a crowded machine; a warm run takes ~10 s


@pytest.mark.timeout(MYPY_COLD_S)
def test_blocks_pass_mypy_strict(tmp_path: Path) -> None:
    """A user's script written from the README or the docs type-checks under ``mypy --strict`` (issue 16).

    Every program is checked in one mypy run, in the project's mypy cache (see `MYPY_CACHE`).
    """
    files = []
    for number, program in enumerate(PROGRAMS):
        file = tmp_path / f"block_{number}.py"
        file.write_text(f"# {program.name}\n{program.code}", encoding="utf-8")
        files.append(str(file))
    env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),  # the settings `make typecheck` uses, so its cache entries hold here
        "--strict",
        "--no-error-summary",
        "--cache-dir",
        str(MYPY_CACHE),
    ]
    checked = subprocess.run(
        [*command, *files], cwd=ROOT, capture_output=True, text=True, env=env, timeout=MYPY_COLD_S - 60
    )
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
