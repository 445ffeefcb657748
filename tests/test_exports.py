"""The public surface is curated: `__all__` is pinned here and every name resolves."""

from __future__ import annotations

import subprocess
import sys

import plait

EXPECTED = [
    "ActionReturn",
    "ActionStatusCode",
    "ActionValidCode",
    "Agent",
    "AgentDict",
    "AgentList",
    "AgentMessage",
    "AgentStatusCode",
    "AsyncAgent",
    "AsyncSequential",
    "AsyncStreamingAgent",
    "AsyncStreamingSequential",
    "FunctionCall",
    "Hook",
    "Memory",
    "MemoryManager",
    "MessageLogger",
    "ModelStatusCode",
    "RemovableHandle",
    "Sequential",
    "StreamingAgent",
    "StreamingSequential",
    "__version__",
]


def test_all_is_pinned_and_sorted() -> None:
    assert plait.__all__ == EXPECTED
    assert sorted(plait.__all__) == plait.__all__


def test_every_public_name_resolves() -> None:
    for name in plait.__all__:
        assert getattr(plait, name) is not None, name


def test_import_is_lazy_and_fast() -> None:
    code = (
        "import sys, time; t = time.perf_counter(); import plait; dt = time.perf_counter() - t; "
        "heavy = [m for m in ('pydantic', 'aiohttp', 'jinja2', 'plait.agents') if m in sys.modules]; "
        "print(dt, heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split(" ", 1)
    assert float(out[0]) < 0.5
    assert out[1].strip() == "[]"
