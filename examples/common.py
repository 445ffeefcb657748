"""Shared by the examples: which model to run on.

The settings are the CLI's: ``PLAIT_API_BASE`` (else ``OPENAI_BASE_URL``), with ``PLAIT_MODEL``
and optionally ``OPENAI_API_KEY``, to use any OpenAI-compatible server (vLLM, LMDeploy, Ollama,
llama.cpp server, OpenAI); otherwise the embedded local model runs in-process (``PLAIT_MODEL``
then may name a catalogue model (``plait models``), a ``.gguf`` file or ``hf:OWNER/REPO/FILE.gguf``).
"""

from __future__ import annotations

import os
from typing import Any


def make_llm(asynchronous: bool = False, **gen_params: Any) -> Any:
    """An LLM for the examples: the configured server, or the embedded model."""
    base = os.environ.get("PLAIT_API_BASE") or os.environ.get("OPENAI_BASE_URL")
    if base:
        from plait.llms import GPTAPI, AsyncGPTAPI

        cls = AsyncGPTAPI if asynchronous else GPTAPI
        return cls(model_type=os.environ.get("PLAIT_MODEL", "default"), api_base=base, **gen_params)
    from plait.cli import embedded_model
    from plait.llms import AsyncLlamaCppModel, LlamaCppModel

    cls_local = AsyncLlamaCppModel if asynchronous else LlamaCppModel
    return cls_local(**embedded_model(os.environ.get("PLAIT_MODEL")), **gen_params)
