"""The llama.cpp engine's request (private): plait's generation parameters as the fields llama.cpp reads."""

from __future__ import annotations

from collections.abc import Mapping

from ..outputs import response_schema
from .base_llm import Prompt, engine_fields

__all__ = ["ENGINE_PARAMS", "NOT_SENT", "RENAMED", "engine_request"]

RENAMED = {
    "max_new_tokens": "max_tokens",
    "repetition_penalty": "repeat_penalty",
    "stop_words": "stop",
}
NOT_SENT = frozenset({"stream", "messages", "prompt", "session_ids"})

ENGINE_PARAMS = frozenset(
    {
        # llama.cpp server's sampling and request options (tools/server/README.md, POST /completion)
        *("dynatemp_range", "dynatemp_exponent", "min_p", "n_predict", "n_indent", "n_keep", "typical_p"),
        *("repeat_penalty", "repeat_last_n", "presence_penalty", "frequency_penalty"),
        *("dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers"),
        *("xtc_probability", "xtc_threshold", "mirostat", "mirostat_tau", "mirostat_eta", "grammar", "json_schema"),
        *("ignore_eos", "logit_bias", "n_probs", "min_keep", "t_max_predict_ms", "id_slot", "cache_prompt"),
        *("return_tokens", "samplers", "timings_per_token", "post_sampling_probs", "response_fields", "lora"),
        # its OpenAI-compatible chat fields
        *("max_tokens", "stop", "response_format", "logprobs", "top_logprobs", "n", "chat_template_kwargs"),
        *("reasoning_format", "parse_tool_calls", "parallel_tool_calls", "seed"),
    }
)
"""The generation parameters `LlamaCppModel` takes beyond plait's own: the request fields llama.cpp reads."""


def engine_request(prompt: Prompt, params: Mapping[str, object], stream: bool = False) -> dict[str, object]:
    """The engine request for `prompt` (messages, or a raw prompt string) under `params`.

    A ``response_format`` becomes the JSON schema the reply is decoded under; `stream` asks
    for chunks and the usage at the end.
    """
    sent = {key: value for key, value in params.items() if key not in NOT_SENT and (key != "stop_words" or value)}
    schema = response_schema(sent.pop("response_format", None))
    request = engine_fields(sent, RENAMED)
    if schema is not None:  # decoded under the schema's grammar
        request["json_schema"] = schema
    if isinstance(prompt, str):
        request["prompt"] = prompt
    else:
        request["messages"] = prompt
    if stream:
        request["stream"] = True
        request["stream_options"] = {"include_usage": True}
    return request
