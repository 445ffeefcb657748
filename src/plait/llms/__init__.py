"""Model backends. Heavy or optional backends are imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_module
from .base_llm import AsyncBaseLLM, BaseLLM, filter_suffix

if TYPE_CHECKING:
    from .anthropic_llm import AsyncClaudeAPI, ClaudeAPI
    from .huggingface import (
        AsyncHFTransformer,
        AsyncHFTransformerCasualLM,
        AsyncHFTransformerChat,
        HFTransformer,
        HFTransformerCasualLM,
        HFTransformerCausalLM,
        HFTransformerChat,
    )
    from .llama_cpp import AsyncLlamaCppModel, LlamaCppModel
    from .lmdeploy_wrapper import (
        AsyncLMDeployClient,
        AsyncLMDeployPipeline,
        AsyncLMDeployServer,
        LMDeployClient,
        LMDeployPipeline,
        LMDeployServer,
    )
    from .meta_template import INTERNLM2_META
    from .openai import GPTAPI, AsyncGPTAPI
    from .templates import APITemplateParser, LMTemplateParser
    from .vllm_wrapper import AsyncVllmModel, VllmModel

_LAZY = {
    "APITemplateParser": ".templates",
    "LMTemplateParser": ".templates",
    "INTERNLM2_META": ".meta_template",
    "GPTAPI": ".openai",
    "AsyncGPTAPI": ".openai",
    "LlamaCppModel": ".llama_cpp",
    "AsyncLlamaCppModel": ".llama_cpp",
    "HFTransformer": ".huggingface",
    "HFTransformerCasualLM": ".huggingface",
    "HFTransformerCausalLM": ".huggingface",
    "HFTransformerChat": ".huggingface",
    "AsyncHFTransformer": ".huggingface",
    "AsyncHFTransformerCasualLM": ".huggingface",
    "AsyncHFTransformerChat": ".huggingface",
    "VllmModel": ".vllm_wrapper",
    "AsyncVllmModel": ".vllm_wrapper",
    "LMDeployPipeline": ".lmdeploy_wrapper",
    "AsyncLMDeployPipeline": ".lmdeploy_wrapper",
    "LMDeployServer": ".lmdeploy_wrapper",
    "AsyncLMDeployServer": ".lmdeploy_wrapper",
    "LMDeployClient": ".lmdeploy_wrapper",
    "AsyncLMDeployClient": ".lmdeploy_wrapper",
    "ClaudeAPI": ".anthropic_llm",
    "AsyncClaudeAPI": ".anthropic_llm",
}

__all__ = [
    "GPTAPI",
    "INTERNLM2_META",
    "APITemplateParser",
    "AsyncBaseLLM",
    "AsyncClaudeAPI",
    "AsyncGPTAPI",
    "AsyncHFTransformer",
    "AsyncHFTransformerCasualLM",
    "AsyncHFTransformerChat",
    "AsyncLMDeployClient",
    "AsyncLMDeployPipeline",
    "AsyncLMDeployServer",
    "AsyncLlamaCppModel",
    "AsyncVllmModel",
    "BaseLLM",
    "ClaudeAPI",
    "HFTransformer",
    "HFTransformerCasualLM",
    "HFTransformerCausalLM",
    "HFTransformerChat",
    "LMDeployClient",
    "LMDeployPipeline",
    "LMDeployServer",
    "LMTemplateParser",
    "LlamaCppModel",
    "VllmModel",
    "filter_suffix",
]


__getattr__, __dir__ = lazy_module(__name__, _LAZY, __all__)
