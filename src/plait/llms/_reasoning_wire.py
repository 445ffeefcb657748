"""Reasoning on the OpenAI chat-completions wire: read from replies, sent back per profile (pure, no IO).

Servers put a reasoning model's thinking in different places; `reply_reasoning` and
`ReasoningStream` read every one of them:

- a message (or stream delta) field: ``reasoning_content`` (DeepSeek's API, LMDeploy, older
  vLLM, llama.cpp's server with ``reasoning_format``), ``reasoning`` (newer vLLM, Ollama's
  OpenAI route, OpenRouter) or ``thinking`` (Ollama's native API). The first non-empty
  one of a message or delta is taken, so a server that fills two of them with the same
  text is read once;
- inline ``<think>...</think>`` in ``content`` when the server parses no reasoning
  (`plait.llms.think_tags`), unless the profile says ``think_tags='off'``;
- OpenRouter's ``reasoning_details`` array (``reasoning.text``, ``reasoning.summary``,
  ``reasoning.encrypted`` items; streamed as fragments that share an ``index``): kept whole
  and opaque in `Reasoning.details`, its text read when no reasoning field came with it.

`replay_messages` decides what goes back: a chat message built from plait's memory carries
its reasoning under the ``reasoning`` key (`plait.schema.Reasoning.to_wire`); the key is
always removed, and per the replay policy the reasoning of assistant turns that called
tools is sent in the profile's field (``'field'``; reasoning that came with ``reasoning_details``
sends those back instead, unchanged, as OpenRouter requires in tool loops), inline as
``<think>`` tags (``'tags'``), or not at all (``'drop'``).
"""

from __future__ import annotations

import dataclasses
import json
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

DETAILS_FIELD = "reasoning_details"
"""OpenRouter's message (and delta) field of structured reasoning items, sent back unchanged."""

_DETAIL_TEXTS = {"reasoning.text": "text", "reasoning.summary": "summary"}
"""The readable text of each kind of reasoning item (``reasoning.encrypted`` has none)."""

_JOINED = ("text", "summary", "data", "signature")
"""The string fields of a streamed reasoning item whose fragments are joined."""


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


def detail_items(value: object) -> list[dict[str, object]]:
    """The reasoning items of a ``reasoning_details`` value (anything not a list of objects: none)."""
    if not isinstance(value, list):
        return []
    return [dict(item) for item in value if isinstance(item, Mapping)]


def merge_details(items: list[dict[str, object]], fragments: object) -> str:
    """Fold one delta's ``reasoning_details`` fragments into `items` (in place); returns the text they added.

    A fragment with the ``index`` and ``type`` of an item already there continues it: its
    ``text``, ``summary``, ``data`` and ``signature`` are appended, its other fields fill the
    item's empty ones. Any other fragment starts a new item.
    """
    added = []
    for fragment in detail_items(fragments):
        index, kind = fragment.get("index"), fragment.get("type")
        same = next(
            (it for it in items if index is not None and (it.get("index"), it.get("type")) == (index, kind)), None
        )
        text = fragment.get(_DETAIL_TEXTS.get(kind, "") if isinstance(kind, str) else "")
        added.append(text if isinstance(text, str) else "")
        if same is None:
            items.append(fragment)
            continue
        for key, value in fragment.items():
            held = same.get(key)
            if key in _JOINED and isinstance(value, str) and isinstance(held, str):
                same[key] = held + value
            elif held is None or held == "":
                same[key] = value
    return "".join(added)


def _details_text(items: list[dict[str, object]]) -> str | None:
    """The readable text of reasoning items (None: they hold none)."""
    texts = []
    for item in items:
        kind = item.get("type")
        text = item.get(_DETAIL_TEXTS.get(kind, "") if isinstance(kind, str) else "")
        if isinstance(text, str) and text:
            texts.append(as_text(text))
    return "\n\n".join(texts) if texts else None


def _joined(*parts: str | None) -> Reasoning | None:
    texts = [part for part in parts if part]
    if not texts:
        return Reasoning("") if any(part is not None for part in parts) else None
    return Reasoning("\n\n".join(texts))


def reply_reasoning(
    field: str | None, content: str, think: ThinkTags, details: object = None
) -> tuple[Reasoning | None, str]:
    """A whole reply's reasoning and its content without it.

    Args:
        field: What `field_reasoning` read from the message (None: no field).
        content: The message's content.
        think: How inline think tags are read (``'off'``: not at all). Whether the block
            was opened by the prompt is worked out from the content (its first tag is a
            closing one), which also holds for a stream once it is complete.
        details: The message's ``reasoning_details`` (a stream's merged by `merge_details`):
            kept as `Reasoning.details`; their text is the reasoning when `field` is None.

    Returns:
        ``(reasoning, content)``; reasoning None when the reply had none.
    """
    inline = None
    if think != "off" and "think>" in content:
        inline, content = split_think(content)
    items = detail_items(details)
    reasoning = _joined(_details_text(items) if field is None and items else field, inline)
    if items:
        reasoning = dataclasses.replace(reasoning or Reasoning(""), details=json.dumps(items))
    return reasoning, content


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

    __slots__ = ("_details", "_field", "_finished", "_tags", "_think", "content", "raw")

    def __init__(self, think: ThinkTags = "closed") -> None:
        self._think = think
        self._field: str | None = None
        self._details: list[dict[str, object]] = []  # reasoning_details, fragments merged
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
        if DETAILS_FIELD in delta:
            added = merge_details(self._details, delta[DETAILS_FIELD])
            thought = thought or (bool(added) and self._field is None)  # the items' text shows when no field does
        if not text:
            return thought
        first, before = not self.raw, len(self.content)
        self.raw += text
        if self._tags is None:
            if self._think == "opened" and first and self._field is None and not self._details:
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
        """The reasoning received so far (fields, else the reasoning items' text; then think blocks shown so far)."""
        inline = self._tags.reasoning if self._tags is not None else ""
        field = self._field if self._field is not None else _details_text(self._details)
        return "\n\n".join(part for part in (field, inline) if part)

    def result(self) -> tuple[Reasoning | None, str]:
        """The complete reply's ``(reasoning, content)``, split as `reply_reasoning` splits a whole reply."""
        return reply_reasoning(self._field, self.raw, self._think, self._details)


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


def _stored_details(details: str | None) -> list[dict[str, object]] | None:
    """The reasoning items `Reasoning.details` holds (None: none, or text that is not a JSON array of objects)."""
    if details is None:
        return None
    try:
        items = detail_items(json.loads(details))
    except ValueError:  # edited or corrupted state: nothing to send back
        return None
    return items or None


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
            details = _stored_details(reasoning.details)
            if replay == "field" and details is not None:
                sent.setdefault(DETAILS_FIELD, details)  # as the server gave them
            elif replay == "field" and field and field != DETAILS_FIELD:
                sent.setdefault(field, reasoning.text)
            elif replay == "tags":
                sent["content"] = _with_think(sent.get("content"), reasoning.text)
        out.append(sent)
    return out
