"""Model backends. Heavy or optional backends are imported on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base_llm import AsyncBaseLLM, BaseLLM, filter_suffix

if TYPE_CHECKING:
    from .meta_template import INTERNLM2_META
    from .openai import GPTAPI, AsyncGPTAPI
    from .templates import APITemplateParser, LMTemplateParser

_LAZY = {
    "APITemplateParser": ".templates",
    "LMTemplateParser": ".templates",
    "INTERNLM2_META": ".meta_template",
    "GPTAPI": ".openai",
    "AsyncGPTAPI": ".openai",
    "LlamaCppModel": ".llama_cpp",
    "AsyncLlamaCppModel": ".llama_cpp",
}

__all__ = [
    "GPTAPI",
    "INTERNLM2_META",
    "APITemplateParser",
    "AsyncBaseLLM",
    "AsyncGPTAPI",
    "AsyncLlamaCppModel",
    "BaseLLM",
    "LMTemplateParser",
    "LlamaCppModel",
    "filter_suffix",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'plait.llms' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
