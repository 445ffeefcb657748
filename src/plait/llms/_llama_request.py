"""The llama.cpp engine's request (private): plait's generation parameters as the fields llama.cpp reads."""

from __future__ import annotations

from collections.abc import Mapping

from ..outputs import response_schema
from .base_llm import Prompt, engine_fields

__all__ = [
    "ENGINE_PARAMS",
    "NOT_SENT",
    "RENAMED",
    "RETRY_MAX_ITEMS",
    "bounded_response_format",
    "engine_request",
]

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


RETRY_MAX_ITEMS = 8
"""The most items an array of a typed answer may have when it is asked again after a reply that was cut short."""


def bounded_response_format(response_format: object) -> object:
    """`response_format` with every unbounded array of its schema bounded (`RETRY_MAX_ITEMS`), for the grammar.

    A small model's reply that was cut short (the length limit, the repetition guard) is mostly
    one list item over and over; decoded again under the bound, the grammar must close the list
    in time. Bounds the schema sets itself are kept; a response format without a JSON schema
    is returned as it is. (Strings are not bounded: a ``maxLength`` grammar of llama.cpp made
    a retry about ten times slower, 35-45 s instead of 4 s, on SmolLM2-135M.)
    """
    if not isinstance(response_format, Mapping) or response_format.get("type") != "json_schema":
        return response_format
    spec = response_format.get("json_schema")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("schema"), Mapping):
        return response_format
    return {**response_format, "json_schema": {**spec, "schema": _bounded(spec["schema"])}}


def _bounded(schema: object) -> object:
    if isinstance(schema, list):
        return [_bounded(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    result = {key: _bounded(value) for key, value in schema.items()}
    if result.get("type") == "array" and "maxItems" not in result:
        result["maxItems"] = _at_least(result.get("minItems"), RETRY_MAX_ITEMS)
    return result


def _at_least(minimum: object, bound: int) -> int:
    """`bound`, or the schema's own `minimum` where that is larger (a bound must leave a valid value)."""
    return minimum if isinstance(minimum, int) and minimum > bound else bound
