"""The ``'summarise'`` policy's running summary: how older messages are folded into it, by a model.

Folding is a flow of `ModelCall` effects (to the agent's own model or another one), so it
runs in every mode, is recorded and replayed like any model call, and is seen by the
interceptors inside the policy (tracing, usage). Messages too long for one summarising
request are folded in several, each adding to the summary the last one wrote.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Sequence
from typing import Any

from ..effects import Flow, ModelCall
from ..memory.base_memory import ContextSummary
from .messages import Message, estimate_tokens, message_groups

__all__ = ["SUMMARY_HEADING", "digest", "fold", "summary_message", "transcript"]

SUMMARY_HEADING = "Summary of the earlier conversation:"
"""How the summary is introduced to the model, in the system message that carries it."""

_INSTRUCTIONS = (
    "You keep the running summary of a conversation between a user and an assistant. Rewrite the summary so "
    "that it also covers the new part of the conversation. Keep every fact, name, number, decision, tool result "
    "and open question a later turn may need; leave out greetings and repetition. Answer with the summary "
    "only, in at most {words} words."
)
_CUT = "\n[... {cut} of {total} characters left out]"


def digest(messages: Sequence[Message]) -> str:
    """A fingerprint of `messages` (SHA-256 of their JSON): tells when a summary no longer applies."""
    text = json.dumps(list(messages), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def summary_message(summary: ContextSummary) -> Message:
    """The system message that stands for the messages `summary` covers."""
    return {"role": "system", "content": f"{SUMMARY_HEADING}\n{summary.text}"}


def transcript(messages: Sequence[Message]) -> str:
    """`messages` as plain lines for the summarising model: ``role: text``, tool calls spelled out."""
    lines = []
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else "" if content is None else json.dumps(content, default=str)
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            text = " ".join(filter(None, [text, *(f"[calls {_call_text(call)}]" for call in calls)]))
        lines.append(f"{message.get('role', 'user')}: {text}")
    return "\n".join(lines)


def _call_text(call: object) -> str:
    function = call.get("function") if isinstance(call, dict) else None
    if isinstance(function, dict):
        return f"{function.get('name')}({function.get('arguments', '')})"
    return str(call)


def fold(
    llm: Any,
    previous: str,
    messages: Sequence[Message],
    session_id: Hashable,
    *,
    window: int,
    summary_tokens: int,
) -> Flow[str]:
    """The summary `previous` rewritten to also cover `messages`, by `llm` (in as many requests as needed).

    Each request is kept to about half of `window` (estimated), less the reply's
    `summary_tokens`; a single message longer than that is cut, saying how much.
    """
    room = max(64, (window - summary_tokens) // 2)
    words = max(16, summary_tokens * 2 // 3)
    text = previous
    chunk: list[Message] = []
    for group in message_groups(messages):
        if chunk and _size(text, [*chunk, *group]) > room:
            text = yield from _fold_once(llm, text, chunk, session_id, summary_tokens, words)
            chunk = []
        chunk.extend(_cut(message, room * 3) for message in group)
    if chunk:
        text = yield from _fold_once(llm, text, chunk, session_id, summary_tokens, words)
    return text


def _size(previous: str, messages: Sequence[Message]) -> int:
    return estimate_tokens([{"content": previous}, {"content": transcript(messages)}]) + 64


def _cut(message: Message, limit: int) -> Message:
    content = message.get("content")
    if not isinstance(content, str) or len(content) <= limit:
        return message
    return {**message, "content": content[:limit] + _CUT.format(cut=len(content) - limit, total=len(content))}


def _fold_once(
    llm: Any, previous: str, messages: Sequence[Message], session_id: Hashable, summary_tokens: int, words: int
) -> Flow[str]:
    request = [
        {"role": "system", "content": _INSTRUCTIONS.format(words=words)},
        {
            "role": "user",
            "content": f"Summary so far:\n{previous or '(none yet)'}\n\nNew part of the conversation:\n"
            f"{transcript(messages)}\n\nThe updated summary:",
        },
    ]
    reply: object = yield ModelCall(llm, "chat", request, session_id, {"max_new_tokens": summary_tokens})
    text = reply if isinstance(reply, str) else str(getattr(reply, "content", reply))
    return text.strip() or previous
