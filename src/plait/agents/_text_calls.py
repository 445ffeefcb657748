"""Tool calls a model wrote into its text, read as native calls (private to `function_calling`; issue 37).

A server that runs without a tool parser for the model (or whose parser failed) answers a
request that offered tools with no ``tool_calls``: the calls are in ``content``, in the model
family's markup (`plait.llms.text_tool_calls`). This is the one place where every agent that
uses native calls (`FunctionCallingAgent` and its async / streaming siblings, the HTTP server
and the eval runner that drive them) reads them:

- `read_reply`: a reply without native calls whose text holds calls becomes a reply with
  those calls (offered tools only) and the text around them as its content, the thought.
  Markup that cannot be used (a tool that was not offered, arguments that are not a JSON
  object even after an unambiguous repair) is a *problem*: a line told to the model as an
  observation; it never runs.
- `HeldMarkup`: while a reply streams, the visible text is the text that can no longer turn
  into markup, so markup never shows, not even the start of a tag.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..llms.response import ModelResponse, ToolCall
from ..llms.text_tool_calls import TextCallStream, find_tool_calls

__all__ = ["HeldMarkup", "ReadReply", "offered_tools", "read_reply"]

OBSERVER = "ActionExecutor"
"""The sender of the observation that names what was wrong with calls written in text."""


def offered_tools(tools: object) -> dict[str, Mapping[str, object]]:
    """The tools a request offered, by name, from its OpenAI ``tools`` list (each with its spec).

    The specs type Qwen3-Coder's text parameter values (``"3"`` -> ``3`` for an integer).
    Entries that are not a function spec with a string name are left out.
    """
    offered: dict[str, Mapping[str, object]] = {}
    for spec in tools if isinstance(tools, Sequence) and not isinstance(tools, str) else ():
        function = spec.get("function") if isinstance(spec, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if isinstance(name, str) and isinstance(spec, Mapping):
            offered[name] = spec
    return offered


@dataclass(frozen=True)
class ReadReply:
    """A reply with the calls written in its text read.

    Attributes:
        response: The reply: when its text held calls, with them as `ModelResponse.tool_calls`
            and the text around them as its content; else the reply as it came.
        problems: One line per piece of markup that could not be used, for the model.
    """

    response: ModelResponse
    problems: tuple[str, ...] = ()


def text_call_id(turn: int, index: int) -> str:
    """The id of the `index`-th call written in the text of the run's `turn`-th reply.

    Nine letters and digits (``t00010000``): the form Mistral's tokenizer accepts for the
    ids it is sent back. Unique within a run of up to 9,999 model calls.
    """
    return f"t{turn % 10_000:04d}{index % 10_000:04d}"


def read_reply(
    response: ModelResponse, offered: Mapping[str, Mapping[str, object]], formats: Sequence[str] | None, turn: int
) -> ReadReply:
    """Read the tool calls written in a reply's text, when it has no native calls and tools were offered.

    Args:
        response: The model's reply.
        offered: The offered tools by name (`offered_tools`); none offered: the reply is kept.
        formats: The text formats to read (`plait.llms.text_tool_calls.FORMATS` names); all when None.
        turn: The run's model-call count, which makes the calls' ids (`text_call_id`).

    Returns:
        The reply with its calls, and the problems.
    """
    if response.tool_calls or not offered or (formats is not None and not formats):
        return ReadReply(response)
    found = find_tool_calls(response.content, offered, formats)
    if not found.found:
        return ReadReply(response)
    calls = [ToolCall(text_call_id(turn, i), call.name, call.arguments) for i, call in enumerate(found.calls)]
    finish = "tool_calls" if calls else response.finish_reason
    return ReadReply(
        dataclasses.replace(response, content=found.text, tool_calls=calls, finish_reason=finish), found.problems
    )


class HeldMarkup:
    """The visible part of one streamed reply: what can no longer turn into tool-call markup.

    Streamed items carry the reply's whole text so far; `visible` maps it to the whole
    visible text so far, which only grows while the reply does. Its final value is the
    content `read_reply` gives (the calls cut out).

    Args:
        offered: The offered tools by name (`offered_tools`).
        formats: The text formats to hold back; all when None.
    """

    def __init__(self, offered: Mapping[str, Mapping[str, object]], formats: Sequence[str] | None) -> None:
        self._offered = offered
        self._formats = formats
        self._stream: TextCallStream | None = None  # made at the first chunk: a reply that never streams needs none
        self._seen = ""
        self._shown = ""

    def visible(self, text: str) -> str:
        """The visible text of the reply whose text so far is `text`."""
        if self._stream is None or not text.startswith(self._seen):  # first, or rewritten (a stop word cut)
            self._stream, self._seen, self._shown = TextCallStream(self._offered, self._formats), "", ""
        self._shown += self._stream.feed(text[len(self._seen) :])
        self._seen = text
        return self._shown
