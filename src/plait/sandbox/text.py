"""Text helpers shared by the interpreter tools: code extraction and output shaping."""

from __future__ import annotations

import json
import re

__all__ = ["extract_code", "join_output", "truncate"]

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3|ipython)?[ \t]*\n(.*?)(?:\n[ \t]*```|$)", re.DOTALL | re.IGNORECASE)


def extract_code(text: str) -> str:
    """The code in `text`: the first fenced block (```` ```python ````) if any, else `text` itself.

    A JSON object ``{"code": ...}`` (a habit of some models) is unwrapped too.
    """
    if "```" in text:
        match = _FENCE.search(text)
        if match:
            return match.group(1)
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        try:
            data = json.loads(stripped)
        except ValueError:
            return text
        code = data.get("code") if isinstance(data, dict) else None
        if isinstance(code, str):
            return code
    return text


_MARKER = re.compile(r"\n\.\.\. \[output truncated: (\d+) more (?:characters|bytes)\]$")


def truncate(text: str, limit: int | None) -> str:
    """`text` cut to `limit` characters with a visible marker (None or negative: no limit).

    A marker already at the end of `text` (from the output cap) is folded into the new one.
    """
    if limit is None or limit < 0 or len(text) <= limit:
        return text
    earlier = 0
    match = _MARKER.search(text)
    if match:
        earlier = int(match.group(1))
        text = text[: match.start()]
    if len(text) <= limit and not earlier:
        return text
    more = max(0, len(text) - limit) + earlier
    return text[:limit] + f"\n... [output truncated: {more} more characters]"


def join_output(*parts: str | None) -> str:
    """Non-empty parts joined by newlines, trailing newlines removed."""
    return "\n".join(part.rstrip("\n") for part in parts if part and part.strip("\n"))
