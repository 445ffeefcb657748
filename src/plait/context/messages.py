"""Chat requests as the units a context policy keeps, drops or folds: estimates, groups, trims.

A request is read as three parts (`split_request`): the *head* (its leading system
messages), the *older* turns, and the *current turn* (the last user message and everything
after it, such as this turn's tool rounds). A turn is a user message and everything up to the
next one, and a policy keeps or drops whole turns, so it never sends a tool call without its
results, a result without its call, or an answer without its question. (`message_groups`
cuts finer, one message or one tool round per group.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "Counter",
    "Message",
    "Request",
    "estimate_tokens",
    "fewest_dropped",
    "message_groups",
    "reasoning_text",
    "sendable_reasoning",
    "shorten_tool_results",
    "split_request",
    "trim_messages",
]

Message = Mapping[str, object]
Counter = Callable[[Sequence[Message]], int]
"""Counts the tokens of a request (a list of chat messages)."""

_PER_MESSAGE = 4  # role and separators of a chat template, roughly


def estimate_tokens(messages: Sequence[Message]) -> int:
    """An estimate of the tokens `messages` take, a little on the high side for English.

    ASCII text is counted at four characters a token, any other character as a token of
    its own (CJK text, accented letters: tokenizers trained on English split them finely),
    plus a few tokens per message for the chat template.
    """
    total = 0
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else "" if content is None else str(content)
        calls = message.get("tool_calls")
        if calls:
            text += str(calls)
        text += reasoning_text(message)  # reasoning the model's client sends back (`sendable_reasoning`)
        wide = len(text) - len(text.encode("ascii", "ignore")) if not text.isascii() else 0
        total += _PER_MESSAGE + math.ceil((len(text) - wide) / 4) + wide
    return total


def reasoning_text(message: Message) -> str:
    """The text of a chat message's reasoning (its ``reasoning`` key, `plait.schema.Reasoning.to_wire`), or ``''``."""
    reasoning = message.get("reasoning")
    return str(reasoning.get("text") or "") if isinstance(reasoning, Mapping) else ""


def _without_reasoning(message: Message) -> Message:
    return {k: v for k, v in message.items() if k != "reasoning"} if "reasoning" in message else message


def sendable_reasoning(messages: list[Message], replay: str | None) -> list[Message]:
    """`messages` without the reasoning the model's client will not send (its profile's ``reasoning_replay``).

    ``'drop'``: none is sent; ``'field'`` / ``'tags'``: only an assistant turn that called tools
    sends its reasoning back; None (a model without a profile): kept as it is. What is left is
    what a policy counts. The same list is returned when nothing changes.
    """
    if replay is None or not any("reasoning" in m for m in messages):
        return messages
    keep = replay != "drop"
    return [m if keep and _opens_tool_round(m) else _without_reasoning(m) for m in messages]


def message_groups(messages: Sequence[Message]) -> list[list[Message]]:
    """`messages` cut into the units a trim keeps or drops whole (see the module docstring)."""
    groups: list[list[Message]] = []
    for message in messages:
        if message.get("role") == "tool" and groups and _opens_tool_round(groups[-1][0]):
            groups[-1].append(message)
        else:
            groups.append([message])
    return groups


def _opens_tool_round(message: Message) -> bool:
    return message.get("role") == "assistant" and bool(message.get("tool_calls"))


@dataclass(frozen=True)
class Request:
    """A chat request cut into head, older groups and current turn (`split_request`).

    Attributes:
        head: The leading system messages.
        older: The turns between the head and the current turn, oldest first.
        current: The current turn: the last user message and what follows it.
        pinned: Indices into `older` of the turns that are always sent.
    """

    head: list[Message]
    older: list[list[Message]]
    current: list[Message]
    pinned: frozenset[int] = frozenset()

    def compose(self, dropped: int, summary: Message | None = None) -> list[Message]:
        """The request without its `dropped` oldest groups (pinned ones stay), `summary` after the head."""
        kept = [m for i, group in enumerate(self.older) if i >= dropped or i in self.pinned for m in group]
        return [*self.head, *([summary] if summary is not None else []), *kept, *self.current]

    def without_older_reasoning(self) -> Request:
        """The request with the reasoning of its older turns left out (what a policy gives up first)."""
        older = [[_without_reasoning(m) for m in group] for group in self.older]
        return Request(self.head, older, self.current, self.pinned)

    def covered(self, dropped: int) -> list[Message]:
        """The messages of the `dropped` oldest groups (pinned ones too: they are part of what is behind)."""
        return [m for group in self.older[:dropped] for m in group]


def split_request(messages: Sequence[Message], pinned: Collection[str] = ()) -> Request:
    """`messages` as head, older turns and current turn; a turn with a message carrying a text of `pinned` is pinned."""
    items = list(messages)
    head = 0
    while head < len(items) and items[head].get("role") == "system":
        head += 1
    last_user = max((i for i in range(head, len(items)) if items[i].get("role") == "user"), default=len(items))
    older = _turns(items[head:last_user])
    pins = frozenset(i for i, group in enumerate(older) if pinned and any(_holds(m, pinned) for m in group))
    return Request(items[:head], older, items[last_user:], pins)


def _holds(message: Message, texts: Collection[str]) -> bool:
    """Whether `message` carries one of `texts` (an aggregator may have joined it with its neighbours)."""
    content = message.get("content")
    return isinstance(content, str) and any(text in content for text in texts)


def _turns(messages: Sequence[Message]) -> list[list[Message]]:
    """`messages` cut into turns: a user message and what follows it up to the next one."""
    turns: list[list[Message]] = []
    for message in messages:
        if message.get("role") == "user" or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return turns


def fewest_dropped(
    request: Request, budget: int, count: Counter, summary: Message | None = None, start: int = 0
) -> int:
    """The fewest oldest groups (at least `start`) to leave out so the request fits `budget`.

    Whole candidate requests are counted (a binary search: a few counts), so an exact
    counter's template overhead is counted once. When even leaving every older group out
    does not fit, that is the answer (the caller decides what then happens).
    """
    low, high = start, len(request.older)
    while low < high:
        middle = (low + high) // 2
        if count(request.compose(middle, summary)) <= budget:
            high = middle
        else:
            low = middle + 1
    return low


def trim_messages(messages: Sequence[Message], budget: int, count: Counter = estimate_tokens) -> list[Message]:
    """The most recent turns of `messages` that fit in `budget` tokens.

    The leading system messages and the current turn are always kept, even when they alone
    exceed the budget; of the older groups, the longest newest run that fits is kept.
    """
    request = split_request(messages)
    return request.compose(fewest_dropped(request, budget, count))


_MIN_KEPT = 200  # characters a cut tool result keeps at least


def shorten_tool_results(messages: Sequence[Message], budget: int, count: Counter = estimate_tokens) -> list[Message]:
    """`messages` with their longest tool results cut until they fit `budget` (or cannot be cut further).

    A cut result keeps its beginning and says how many characters were left out, so the
    model knows it did not see everything.
    """
    fitted: list[Message] = list(messages)
    originals = {i: str(m["content"]) for i, m in enumerate(fitted) if m.get("role") == "tool" and m.get("content")}
    kept = {i: len(text) for i, text in originals.items()}
    while count(fitted) > budget and kept:
        i = max(kept, key=lambda index: kept[index])
        if kept[i] <= _MIN_KEPT:
            break
        text = originals[i]
        kept[i] = max(_MIN_KEPT, kept[i] // 2)
        cut = f"{text[: kept[i]]}\n[... {len(text) - kept[i]} of {len(text)} characters cut to fit the context]"
        fitted[i] = {**fitted[i], "content": cut}
    return fitted
