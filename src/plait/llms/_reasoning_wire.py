"""Reasoning on the OpenAI chat-completions wire: read from replies, sent back per profile (pure, no IO).

Servers put a reasoning model's thinking in different places; `reply_reasoning` and
`ReasoningStream` read every one of them:

- a message (or stream delta) field: ``reasoning_content`` (DeepSeek's API, LMDeploy, older
  vLLM, llama.cpp's server with ``reasoning_format``), ``reasoning`` (newer vLLM, Ollama's
  OpenAI route, OpenRouter) or ``thinking`` (Ollama's native API). The first non-empty
  one of a message or delta is taken, so a server that fills two of them with the same
  text is read once;
- inline ``<think>...</think>`` in ``content`` when the server parses no reasoning
  (`plait.llms.think_tags`), unless the profile says ``think_tags='off'``.

`replay_messages` decides what goes back: a chat message built from plait's memory carries
its reasoning under the ``reasoning`` key (`plait.schema.Reasoning.to_wire`); the key is
always removed, and per the replay policy the reasoning of assistant turns that called
tools is sent in the profile's field (``'field'``), inline as ``<think>`` tags (``'tags'``),
or not at all (``'drop'``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..schema import Reasoning
from ..untrusted import as_text
from .profiles import ReasoningReplay, ThinkTags
from .think_tags import ThinkStream, split_think

__all__ = [
    "REASONING_FIELDS",
    "EngineReply",
    "ReasoningStream",
    "answer_of",
    "field_reasoning",
    "replay_messages",
    "reply_reasoning",
]

REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
"""The message fields servers carry reasoning in, in the order they are read."""

REASONING_KEY = "reasoning"
"""The key of a plait chat message that holds its reasoning (`Reasoning.to_wire`)."""


def field_reasoning(message: Mapping[str, object]) -> str | None:
    """The reasoning text a message or delta carries in one of `REASONING_FIELDS`.

    Returns:
        The first non-empty text; ``''`` when a field is there but empty; None when none is.
    """
    present = False
    for name in REASONING_FIELDS:
        value = message.get(name)
        if isinstance(value, str):
            if value:
                return as_text(value)
            present = True
    return "" if present else None


def _joined(*parts: str | None) -> Reasoning | None:
    texts = [part for part in parts if part]
    if not texts:
        return Reasoning("") if any(part is not None for part in parts) else None
    return Reasoning("\n\n".join(texts))


def reply_reasoning(field: str | None, content: str, think: ThinkTags) -> tuple[Reasoning | None, str]:
    """A whole reply's reasoning and its content without it.

    Args:
        field: What `field_reasoning` read from the message (None: no field).
        content: The message's content.
        think: How inline think tags are read (``'off'``: not at all). Whether the block
            was opened by the prompt is worked out from the content (its first tag is a
            closing one), which also holds for a stream once it is complete.

    Returns:
        ``(reasoning, content)``; reasoning None when the reply had none.
    """
    inline = None
    if think != "off" and "think>" in content:
        inline, content = split_think(content)
    return _joined(field, inline), content


class ReasoningStream:
    """Reads reasoning out of a streamed reply: field deltas, and think tags in the content deltas.

    Args:
        think: How inline think tags are read. ``'opened'`` starts the content as reasoning,
            unless a reasoning field arrived first (then the server parses reasoning and
            the content is the answer).

    Attributes:
        content: The visible content so far (think blocks held back and removed).
        raw: Every content delta, as received.
    """

    __slots__ = ("_field", "_finished", "_tags", "_think", "content", "raw")

    def __init__(self, think: ThinkTags = "closed") -> None:
        self._think = think
        self._field: str | None = None
        self._tags: ThinkStream | None = None  # from the first '<' on (or from the start, for an opened block)
        self._finished = False
        self.content = ""
        self.raw = ""

    def feed(self, delta: Mapping[str, object], text: str) -> bool:
        """Take one delta (its content already read as `text`); True when the visible content or the reasoning grew.

        Content passes through as it comes until a ``<`` shows that a tag may follow; from
        there a `ThinkStream` holds back what may be a tag and removes think blocks.
        """
        field = field_reasoning(delta)
        if field is not None:
            self._field = (self._field or "") + field
        thought = bool(field)
        if not text:
            return thought
        first, before = not self.raw, len(self.content)
        self.raw += text
        if self._tags is None:
            if self._think == "opened" and first and self._field is None:
                self._tags = ThinkStream(opened=True)
            elif self._think == "off" or "<" not in text:
                self.content += text
                return True
            else:
                start = text.index("<")
                self.content += text[:start]
                text, self._tags = text[start:], ThinkStream()
        inline, shown = self._tags.feed(text)
        self.content += shown
        return thought or bool(inline) or len(self.content) != before

    def finish(self) -> None:
        """End of the reply: the content held back (a partial tag, trailing whitespace) is shown."""
        if self._tags is not None and not self._finished:
            self.content += self._tags.finish()[1]
        self._finished = True

    @property
    def reasoning(self) -> str:
        """The reasoning received so far (fields, then think blocks shown so far)."""
        inline = self._tags.reasoning if self._tags is not None else ""
        return "\n\n".join(part for part in (self._field, inline) if part)

    def result(self) -> tuple[Reasoning | None, str]:
        """The complete reply's ``(reasoning, content)``, split as `reply_reasoning` splits a whole reply."""
        return reply_reasoning(self._field, self.raw, self._think)


def answer_of(text: str, think: ThinkTags) -> str:
    """An in-process engine's whole reply without its reasoning (split as `reply_reasoning` splits a server's)."""
    return reply_reasoning(None, text, think)[1]


class EngineReply:
    """An in-process engine's reply text (vLLM, LMDeploy), split into answer and reasoning as it grows.

    Such engines return only text, so a thinking model's reasoning is its inline ``<think>``
    blocks; they are split exactly as in a server's reply (`ReasoningStream`).

    Args:
        think: How inline think tags are read (the model's profile's ``think_tags``).
    """

    __slots__ = ("_split", "_think")

    def __init__(self, think: ThinkTags) -> None:
        self._think = think
        self._split = ReasoningStream(think)

    def add(self, delta: str) -> bool:
        """Take the next piece of text; True when the visible answer or the reasoning grew."""
        return self._split.feed({}, delta)

    def grow(self, text: str) -> bool:
        """Take the whole text so far (an engine that streams cumulative outputs); True when anything grew.

        A text that does not extend the previous one (the engine revised it) is split again from its start.
        """
        raw = self._split.raw
        if text.startswith(raw):
            return self.add(text[len(raw) :])
        self._split = ReasoningStream(self._think)
        self.add(text)
        return True

    @property
    def content(self) -> str:
        """The answer so far (think blocks held back and removed)."""
        return self._split.content

    @property
    def reasoning(self) -> Reasoning | None:
        """The reasoning so far (None: none yet): a stream item's extra."""
        text = self._split.reasoning
        return Reasoning(text) if text else None

    def end(self) -> tuple[str, Reasoning | None]:
        """The complete reply's ``(answer, reasoning)``, split as `answer_of` splits it (an empty block: None)."""
        self._split.finish()
        reasoning, content = self._split.result()
        return content, reasoning if reasoning is not None and reasoning.text else None


def _with_think(content: object, text: str) -> str:
    body = "" if content is None else str(content)
    return f"<think>\n{text}\n</think>\n\n{body}" if text else body


def replay_messages(
    messages: Sequence[Mapping[str, object]], replay: ReasoningReplay, field: str | None
) -> list[Mapping[str, object]]:
    """`messages` as sent: each message's `REASONING_KEY` removed, or turned into what `replay` says.

    Only assistant turns that called tools send reasoning back: the turns DeepSeek and Kimi
    require it on (HTTP 400 otherwise), and the ones a tool loop continues from. Messages
    without the key are passed on as they are (not copied).
    """
    out: list[Mapping[str, object]] = []
    for message in messages:
        if not isinstance(message, Mapping) or REASONING_KEY not in message:
            out.append(message)
            continue
        sent = {key: value for key, value in message.items() if key != REASONING_KEY}
        reasoning = Reasoning.from_wire(message[REASONING_KEY])
        if (
            reasoning is not None
            and replay != "drop"
            and message.get("role") == "assistant"
            and message.get("tool_calls")
        ):
            if replay == "field" and field:
                sent.setdefault(field, reasoning.text)
            elif replay == "tags":
                sent["content"] = _with_think(sent.get("content"), reasoning.text)
        out.append(sent)
    return out
