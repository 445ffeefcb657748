r"""Inline ``<think>...</think>`` reasoning split from a reply's content.

Servers without a reasoning parser return a reasoning model's thinking inside ``content``:
Qwen3 and InternLM3 in thinking mode write ``<think>...</think>`` before the answer; a
reply cut off while thinking has only the opening tag; DeepSeek-R1 distills (and newer
Qwen3 templates) open the block in the prompt, so the reply *starts* with reasoning and has
only the closing ``</think>``.

`split_think` splits a whole reply; `ThinkStream` splits a streamed one and never shows a
tag, or the start of one, as content. The rules:

- Every ``<think>...</think>`` block is reasoning, wherever it stands; an unclosed block
  runs to the end. Blocks are stripped and joined with a blank line.
- ``opened=True`` says the prompt already opened the block: the reply is reasoning up to its
  first ``</think>``. `split_think` works this out itself by default (the first tag in the
  reply is a closing one); a stream must be told, since it cannot wait for the tag.
- A ``<think>`` inside reasoning and a ``</think>`` outside it are dropped.
- Content keeps its text as it is, except whitespace next to a removed block, handled as
  for tool-call markup (`plait.llms._held_text`): none at the start or end, the widest
  whitespace between words.

Example:
    ```python
    assert split_think('<think>\nThe user greets me.\n</think>\n\nHello!') == ('The user greets me.', 'Hello!')
    assert split_think('Plan: greet back.</think>Hello!') == ('Plan: greet back.', 'Hello!')
    assert split_think('Hello!') == ('', 'Hello!')
    ```
"""

from __future__ import annotations

from ..exceptions import UserError
from ._held_text import ProseJoiner, partial_marker_start

__all__ = ["ThinkStream", "split_think"]

OPEN = "<think>"
CLOSE = "</think>"
_TAGS = (OPEN, CLOSE)


class _Reasoning:
    """Joins reasoning pieces: each block stripped, blocks separated by a blank line; only ever appends."""

    def __init__(self) -> None:
        self._out: list[str] = []
        self._spaces = ""
        self._new_block = True

    @property
    def text(self) -> str:
        return "".join(self._out)

    def add(self, piece: str) -> str:
        core = piece.strip()
        if not core:
            self._spaces += piece
            return ""
        lead = piece[: len(piece) - len(piece.lstrip())]
        separator = ("\n\n" if self._out else "") if self._new_block else self._spaces + lead
        settled = separator + core
        self._out.append(settled)
        self._spaces, self._new_block = piece[len(piece.rstrip()) :], False
        return settled

    def end_block(self) -> None:
        self._spaces, self._new_block = "", True


class ThinkStream:
    r"""Splits a streamed reply into reasoning and content, holding back anything that may be a tag.

    `feed` returns ``(reasoning, content)`` that became safe to show; `finish` returns what was
    held back. Everything returned, joined, is exactly what `split_think` gives for the whole
    reply with the same `opened`.

    Args:
        opened: Whether the prompt already opened the think block (DeepSeek-R1 distills and
            other templates that end the prompt with ``<think>``): the reply starts as reasoning.

    Example:
        ```python
        stream = ThinkStream()
        parts = [stream.feed(piece) for piece in ['<thi', 'nk>Greet', ' back.</th', 'ink>\n\nHi', '!']]
        parts.append(stream.finish())
        assert ''.join(r for r, _ in parts) == 'Greet back.'
        assert ''.join(c for _, c in parts) == 'Hi!'
        ```
    """

    def __init__(self, opened: bool = False) -> None:
        self._text = ""
        self._pos = 0
        self._thinking = opened
        self._content = ProseJoiner()
        self._reasoning = _Reasoning()
        self._finished = False
        if opened:
            self._content.markup()

    def feed(self, delta: str) -> tuple[str, str]:
        """Add the next piece of the reply; returns ``(reasoning, content)`` safe to show now."""
        if self._finished:
            raise UserError("this ThinkStream is finished; start a new one for the next reply")
        self._text += delta
        return self._advance(final=False)

    def finish(self) -> tuple[str, str]:
        """End of the reply: returns the held-back ``(reasoning, content)``."""
        if self._finished:
            raise UserError("finish() was already called on this ThinkStream")
        reasoning, content = self._advance(final=True)
        self._finished = True
        return reasoning, content + self._content.close()

    @property
    def reasoning(self) -> str:
        """The reasoning shown so far (all of it after `finish`)."""
        return self._reasoning.text

    @property
    def content(self) -> str:
        """The content shown so far (all of it after `finish`)."""
        return self._content.text

    def _advance(self, final: bool) -> tuple[str, str]:
        reasoning: list[str] = []
        content: list[str] = []
        text, pos = self._text, self._pos
        while pos < len(text):
            found = [(index, tag) for tag in _TAGS if (index := text.find(tag, pos)) >= 0]
            if not found:
                stop = None if final else partial_marker_start(text, pos, _TAGS)
                piece = text[pos:stop]
                pos = len(text) if stop is None else stop
                if self._thinking:
                    reasoning.append(self._reasoning.add(piece))
                else:
                    content.append(self._content.prose(piece))
                break
            index, tag = min(found)
            piece = text[pos:index]
            pos = index + len(tag)
            if self._thinking:
                reasoning.append(self._reasoning.add(piece))
                if tag == CLOSE:
                    self._reasoning.end_block()
                    self._thinking = False
            else:
                content.append(self._content.prose(piece))
                self._content.markup()  # a stray </think> is dropped like a block
                self._thinking = tag == OPEN
        self._pos = pos
        return "".join(reasoning), "".join(content)


def split_think(text: str, *, opened: bool | None = None) -> tuple[str, str]:
    """Split a reply into ``(reasoning, content)``; see the module docstring for the rules.

    Args:
        text: The reply's ``content``.
        opened: Whether the prompt already opened the think block. None (the default): when
            the first think tag in `text` is ``</think>``, the text before it is reasoning.

    Returns:
        The reasoning (``''`` when there is none) and the content without it.
    """
    if opened is None:
        close = text.find(CLOSE)
        opened = close >= 0 and not 0 <= text.find(OPEN) < close
    stream = ThinkStream(opened=opened)
    reasoning, content = stream.feed(text)
    rest_reasoning, rest_content = stream.finish()
    return reasoning + rest_reasoning, content + rest_content
