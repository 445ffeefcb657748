"""Decoding what the llama.cpp engine answers (private): OpenAI-shaped JSON results to text, usage, errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

from ..exceptions import LLMError, LLMResponseError
from ._decoded import json_object
from .response import Usage

__all__ = ["Result", "checked", "choice_text", "finish_reason_of", "first_choice", "usage_of"]

Result: TypeAlias = Mapping[str, object]
"""An engine result: a decoded OpenAI-shaped JSON object."""


def usage_of(data: object) -> Usage | None:
    if not isinstance(data, Mapping):
        return None
    return Usage(
        prompt_tokens=int(data.get("prompt_tokens") or 0),
        completion_tokens=int(data.get("completion_tokens") or 0),
        total_tokens=int(data.get("total_tokens") or 0),
    )


def first_choice(result: object) -> Mapping[str, object]:
    """The first choice of an engine result; raises `LLMError` for an error body."""
    if isinstance(result, Mapping):
        choices = result.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            return choices[0]
        error = result.get("error", result if "message" in result else None)
        if error is not None:
            message = error.get("message", error) if isinstance(error, Mapping) else error
            raise LLMError(f"llama.cpp failed: {message}")
    raise LLMResponseError(f"llama.cpp returned a result without choices: {result!r:.300}")


def checked(result: object) -> Result:
    """`result` once `first_choice` found its first choice (it raises for an error body)."""
    first_choice(result)
    return json_object(result)


def choice_text(choice: Mapping[str, object]) -> str:
    if "message" in choice:
        return str(json_object(choice["message"] or {}).get("content") or "")
    if "delta" in choice:
        return str(json_object(choice["delta"] or {}).get("content") or "")
    return str(choice.get("text") or "")


def finish_reason_of(choice: Mapping[str, object]) -> str | None:
    reason = choice.get("finish_reason")
    return None if reason is None else str(reason)
