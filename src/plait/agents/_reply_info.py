"""What an agent's reply message says of the model reply behind it: usage, and a generation cut short.

An agent's reply message is built once from the model's `ModelResponse` (`reply_info` is its
``extra_info``): the token usage, and ``finish_reason`` when the generation did not end on
its own (`CUT_SHORT`: the token limit, or the embedded engine's repetition guard). A reply
that ended normally carries no ``finish_reason``. `finish_reason_of` reads it back from any
reply message (also a streamed one, whose ``extra_info`` is the `ModelResponse`), and
`cut_note` says it in words for a typed answer that did not validate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..llms._repetition import REPETITION, WINDOW
from ..llms.response import ModelResponse
from ..schema import AgentMessage

__all__ = ["CUT_SHORT", "cut_note", "finish_reason_of", "reply_info"]

CUT_SHORT: Final = frozenset({"length", REPETITION})
"""Finish reasons of a generation that was stopped before the model ended it."""


def reply_info(response: ModelResponse) -> dict[str, object] | None:
    """A reply message's ``extra_info`` from the model's reply: its usage; its finish reason when cut short."""
    info: dict[str, object] = {}
    usage = response.usage
    if usage is not None:
        info["usage"] = {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        }
    if response.finish_reason in CUT_SHORT:
        info["finish_reason"] = response.finish_reason
    return info or None


def finish_reason_of(message: AgentMessage) -> str | None:
    """The finish reason a reply message carries (`reply_info`, or a streamed reply's `ModelResponse`)."""
    extra = message.extra_info
    if isinstance(extra, Mapping):
        extra = extra.get("response", extra)  # a function-calling agent's streamed final chunk
    if isinstance(extra, ModelResponse):
        return extra.finish_reason
    reason = extra.get("finish_reason") if isinstance(extra, Mapping) else None
    return reason if isinstance(reason, str) else None


def cut_note(finish_reason: str, limit: object) -> str:
    """Why a cut-short reply is incomplete, as one ``'(reply): ...'`` error line (`limit`: max_new_tokens)."""
    if finish_reason == REPETITION:
        return (
            f"(reply): the reply was stopped before its JSON ended: it repeated itself for {WINDOW} characters "
            "(the embedded engine's repetition guard); write a shorter answer without repeating items"
        )
    shown = f"max_new_tokens={limit}" if limit is not None else "the token limit"
    return (
        f"(reply): the reply was cut at {shown} before its JSON ended (finish_reason {finish_reason!r}); "
        "write a shorter answer, or raise max_new_tokens"
    )
