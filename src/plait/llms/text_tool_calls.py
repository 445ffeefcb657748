r"""Tool calls that a model wrote into its text: found, checked, and cut out of the answer.

A server without a tool parser for the model (or whose parser failed) returns the calls
inside ``content``, in the model family's own markup. `find_tool_calls` turns them into
calls and returns the text around them — the model's thought — without the markup;
`TextCallStream` does the same for a streamed reply and never shows markup, not even the
start of a tag, while it streams.

The formats (`FORMATS`; see `plait.llms._text_call_formats` for each wire form):

| name | markup |
|---|---|
| ``hermes`` | ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Qwen2.5/3, Hermes) |
| ``qwen3_coder`` | ``<tool_call><function=F><parameter=P>v</parameter></function></tool_call>`` (outer tags optional) |
| ``internlm2`` | ``<|action_start|><|plugin|>{"name": ..., "parameters": {...}}<|action_end|>`` |
| ``llama3`` | ``<|python_tag|>{"name": ..., "parameters": {...}}`` (``;`` between), ``<|python_tag|>f.call(k=v)`` |
| ``mistral`` | ``[TOOL_CALLS][{"name": ..., "arguments": {...}}]``, ``[TOOL_CALLS]NAME[ARGS]{...}`` |
| ``deepseek`` | ``<｜tool▁calls▁begin｜>...<｜tool▁calls▁end｜>`` (V3/R1 and V3.1 calls inside) |
| ``fenced_json`` | a ```` ```json ```` block whose whole body is a call object (or a list of them) |
| ``bare_json`` | a whole reply that is a call object, a list of them, or several joined by ``;`` |

The rules:

- The markers above are markup wherever they stand, and never reach the text: a block that
  cannot be used (unknown tool, arguments that are not an object) becomes a *problem*, a
  one-line message meant as an observation for the model. Markup left unclosed at the end of
  the reply runs to the end.
- Loose JSON is a call only when it is the whole reply or the whole body of a JSON code block,
  and has a call's shape: ``name`` plus ``arguments`` or ``parameters`` and nothing else but
  ``type``/``id`` (or ``{"type": "function", "function": {...}}``). A JSON example inside a
  sentence, or prose naming a tool, is text.
- Only offered tools become calls. Arguments must be a JSON object (or JSON text of one);
  a trailing comma, missing closing brackets at the very end, single quotes and Python
  literals (``True``, ``None``) are repaired (`FoundCall.repair` says which); anything else is
  a problem.
- Qwen3-Coder parameter values are text in the markup; when `offered` maps names to their
  parameters' JSON schema, values are typed by it (``"3"`` -> ``3`` for an integer), else kept as text.
- Cutting markup out keeps the text readable: markup at the start or end takes the whitespace
  next to it along; markup between words leaves the widest whitespace around it (see
  `plait.llms._held_text`). A reply without markup comes back unchanged.

Example:
    ```python
    found = find_tool_calls(
        'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        offered=["get_weather"],
    )
    assert found.text == 'Let me check.'
    assert found.calls[0].name == 'get_weather' and found.calls[0].arguments == '{"city": "Paris"}'
    ```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..exceptions import UserError
from ..utils.names import did_you_mean
from ._call_shapes import CallBuilder, FoundCall, Offered
from ._held_text import ProseJoiner
from ._text_call_formats import FORMATS, Markup, Pending, Scanner, ScanState

__all__ = ["FORMATS", "FoundCall", "Offered", "TextCallStream", "TextToolCalls", "check_formats", "find_tool_calls"]


@dataclass(frozen=True)
class TextToolCalls:
    """What `find_tool_calls` found in a reply.

    Attributes:
        calls: The usable calls, in the order written; only offered tools.
        text: The reply without the markup: the thought around the calls (the whole reply
            when there was none).
        problems: One line per piece of markup that could not be used (unknown tool,
            arguments that are not a JSON object...), written for the model.
    """

    calls: tuple[FoundCall, ...]
    text: str
    problems: tuple[str, ...]

    @property
    def found(self) -> bool:
        """Whether the reply held call markup at all (usable or not)."""
        return bool(self.calls or self.problems)


def check_formats(formats: Sequence[str] | None) -> tuple[str, ...]:
    """`formats` as a tuple of format names (all of `FORMATS` for None).

    Raises:
        UserError: A string instead of a sequence, or an unknown name (the closest one is named).
    """
    if formats is None:
        return FORMATS
    if isinstance(formats, str):
        raise UserError(f"formats must be a sequence of format names, not the string {formats!r}; e.g. [{formats!r}]")
    for name in formats:
        if name not in FORMATS:
            hint = did_you_mean(str(name), FORMATS) or f"known: {', '.join(FORMATS)}"
            raise UserError(f"unknown text tool-call format {name!r}; {hint}")
    return tuple(formats)


class TextCallStream:
    r"""Finds tool calls in a streamed reply and holds their markup back from the visible text.

    `feed` returns the text that is safe to show: prose that can no longer turn into markup.
    Markup is never returned, nor a tail that may still become markup (``'<tool'``,
    ``'[TOOL_'``), nor whitespace that may end up next to markup; a reply that starts like a
    JSON call (``{`` or ``[{``) is held whole until `finish`. What `feed` returned, followed by
    what `finish` returns, is exactly the final `TextToolCalls.text`.

    Args:
        offered: The tools the request offered: names, or names mapped to their parameters'
            JSON schema (used to type Qwen3-Coder parameter values).
        formats: The formats to look for (names from `FORMATS`); all when None.

    Raises:
        UserError: An unknown format name (the closest one is named), or a tool name that is not a string.

    Example:
        ```python
        stream = TextCallStream(['get_weather'])
        shown = stream.feed('Checking.') + stream.feed('\n<tool_') + stream.feed('call>{"name": "get_weather", ')
        shown += stream.feed('"arguments": {"city": "Paris"}}</tool_call>')
        rest, found = stream.finish()
        assert shown + rest == found.text == 'Checking.'
        assert [call.name for call in found.calls] == ['get_weather']
        ```
    """

    def __init__(self, offered: Offered, formats: Sequence[str] | None = None) -> None:
        self._scanner = Scanner(CallBuilder(offered), check_formats(formats))
        self._text = ""
        self._pos = 0
        self._state = ScanState()
        self._triggers: frozenset[str] | None = None
        self._joiner = ProseJoiner()
        self._calls: list[FoundCall] = []
        self._problems: list[str] = []
        self._finished = False

    def feed(self, delta: str) -> str:
        """Add the next piece of the reply; returns the text that became safe to show (often ``''``)."""
        if self._finished:
            raise UserError("this TextCallStream is finished; start a new one for the next reply")
        self._text += delta
        if self._triggers is not None and not any(char in delta for char in self._triggers):
            return ""  # what holds the scan back cannot have changed
        return self._advance(final=False)

    def finish(self) -> tuple[str, TextToolCalls]:
        """End of the reply: ``(the held-back text to show now, the result for the whole reply)``."""
        if self._finished:
            raise UserError("finish() was already called on this TextCallStream")
        rest = self._advance(final=True) + self._joiner.close()
        self._finished = True
        return rest, TextToolCalls(tuple(self._calls), self._joiner.text, tuple(self._problems))

    def _advance(self, final: bool) -> str:
        events, self._pos, self._state, pending = self._scanner.scan(self._text, self._pos, self._state, final)
        shown: list[str] = []
        for event in events:
            if isinstance(event, Markup):
                self._joiner.markup()
                self._calls += event.calls
                self._problems += event.problems
            else:
                shown.append(self._joiner.prose(event))
        self._triggers = pending.triggers if isinstance(pending, Pending) else None
        return "".join(shown)


def find_tool_calls(text: str, offered: Offered, formats: Sequence[str] | None = None) -> TextToolCalls:
    """Find the tool calls written in a reply's text; see the module docstring for the rules.

    Args:
        text: The reply's ``content`` (after any ``<think>`` part was split off).
        offered: The tools the request offered: names, or names mapped to their parameters'
            JSON schema.
        formats: The formats to look for (names from `FORMATS`); all when None.

    Returns:
        The calls, the text without the markup, and the problems.

    Raises:
        UserError: An unknown format name, or a tool name that is not a string.
    """
    stream = TextCallStream(offered, formats)
    stream.feed(text)
    return stream.finish()[1]
