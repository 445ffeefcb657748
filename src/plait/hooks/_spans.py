"""What plait's tracers share: the open span of each context, how effects are named, safe values.

`JSONLTracer` (local JSON lines) and `plait.tracing` (OpenTelemetry) both keep a tree of
spans: agent calls, model calls and tool calls, nested by the call tree. A `SpanContext`
holds the innermost open span of one tracer per context, so a span opened in a thread or an
asyncio task started inside another span has that span as its parent (threads started with
`asyncio.to_thread` and tasks copy the context they were made in), and concurrent sessions
keep separate trees.
"""

from __future__ import annotations

import contextvars
import json
from typing import Generic, TypeVar

from ..effects import ActionCall
from ..untrusted import as_text, clean_text
from ..utils._json import json_default

__all__ = ["SpanContext", "content_of", "dumps", "jsonable", "model_name", "tool_name"]

S = TypeVar("S")


class SpanContext(Generic[S]):
    """The innermost open span of one tracer in the current context (thread or task).

    Args:
        name: The name of the context variable (for debugging).
    """

    def __init__(self, name: str) -> None:
        self._var: contextvars.ContextVar[S | None] = contextvars.ContextVar(name, default=None)

    def get(self) -> S | None:
        """The open span here (None: none, a root span comes next)."""
        return self._var.get()

    def enter(self, span: S) -> contextvars.Token[S | None]:
        """Make `span` the open span here; the token closes it (`leave`)."""
        return self._var.set(span)

    def leave(self, token: contextvars.Token[S | None], parent: S | None) -> None:
        """Close the span `token` opened: its `parent` is the open span again."""
        try:
            self._var.reset(token)
        except (ValueError, RuntimeError):  # ended in another context (a stream resumed elsewhere)
            self._var.set(parent)


def model_name(llm: object) -> str:
    """The model an LLM object asks for: its ``model_type``, else its ``path``, else its class name."""
    for attribute in ("model_type", "path"):
        value = getattr(llm, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(llm).__name__


def tool_name(effect: ActionCall) -> str:
    """The tool an `ActionCall` runs as models name it: ``Tool``, or ``Toolkit.api`` for a toolkit's API."""
    name = str(getattr(effect.action, "name", None) or type(effect.action).__name__)
    if effect.api == "run" and not getattr(effect.action, "is_toolkit", False):
        return name
    return f"{name}.{effect.api}"


def content_of(message: object) -> object:
    """A message's content as JSON-ready data (other objects as their text)."""
    content = getattr(message, "content", message)
    return content if isinstance(content, (str, int, float, bool, type(None), list, dict)) else str(content)


def jsonable(value: object) -> object:
    """`value` in a form `json.dumps` takes (plait's JSON encoding, else its text); never raises."""
    try:
        return json_default(value)
    except TypeError:
        return str(value)


def dumps(value: object) -> str:
    """`value` as clean JSON text (non-ASCII kept, lone surrogates replaced), whatever it holds; never raises."""
    try:
        return clean_text(json.dumps(value, ensure_ascii=False, default=jsonable))
    except (ValueError, TypeError, RecursionError):  # a circular or too deep value, a number too long to print
        return as_text(value)
