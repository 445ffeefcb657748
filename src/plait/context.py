"""Keeping a request within the model's context window: `ContextPolicy`, an interceptor on model calls.

The stored history is never changed: the policy shapes what one request *sends*, where every
paradigm's request passes (the `ModelCall` effect), in every mode. Two policies:

* ``"error"``: a request that would not fit raises `ContextWindowExceeded` before it is sent,
  naming the numbers (the session stays as it was: the call rolls back).
* ``"trim"``: the oldest turns are left out until the request fits. Kept always: the leading
  system messages, and the current turn (the last user message and everything after it, such as
  this turn's tool rounds). An assistant message that calls tools and the tool results that
  answer it are kept or left out together, so the request is never a broken prompt. A notice
  is logged the first time a session's history is trimmed. When the current turn alone does
  not fit because of a tool result, the longest results are cut (the text says how much was
  cut) until it does.

```python
policy = ContextPolicy("trim", context_window=4096, reserve=512)
with intercept(agent, policy):
    agent(long_question, session_id="u1")     # sends what fits in 4096 - 512 tokens
```

Token counts are the model's own where it offers ``count_tokens(messages)`` (the embedded
llama.cpp model: exact, from its chat template and tokenizer), else estimated
(`estimate_tokens`: about four characters a token, plus a few per message). The context size
is the model's ``context_window`` where it has one.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Literal, TypeVar, cast

from .effects import Call, Effect, Flow, ModelCall
from .exceptions import ContextWindowExceeded, UserError
from .interceptors import Interceptor

__all__ = [
    "ContextPolicy",
    "PolicyName",
    "estimate_tokens",
    "message_groups",
    "shorten_tool_results",
    "trim_messages",
]

logger = logging.getLogger(__name__)

R = TypeVar("R")
Message = Mapping[str, object]
Counter = Callable[[Sequence[Message]], int]
PolicyName = Literal["trim", "error"]
"""The policies by name: ``"trim"`` (leave the oldest turns out) or ``"error"`` (refuse)."""

_PER_MESSAGE = 4  # role and separators of a chat template, roughly


def estimate_tokens(messages: Sequence[Message]) -> int:
    """An estimate of the tokens `messages` take: a quarter of their characters, plus a few per message."""
    total = 0
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else "" if content is None else str(content)
        calls = message.get("tool_calls")
        total += _PER_MESSAGE + math.ceil((len(text) + (len(str(calls)) if calls else 0)) / 4)
    return total


def message_groups(messages: Sequence[Message]) -> list[list[Message]]:
    """`messages` cut into the units a trim keeps or drops whole.

    Each group is one message, except that an assistant message with ``tool_calls`` forms one
    group with the ``tool`` messages that follow it.
    """
    groups: list[list[Message]] = []
    for message in messages:
        if message.get("role") == "tool" and groups and _opens_tool_round(groups[-1][0]):
            groups[-1].append(message)
        else:
            groups.append([message])
    return groups


def _opens_tool_round(message: Message) -> bool:
    return message.get("role") == "assistant" and bool(message.get("tool_calls"))


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


def trim_messages(messages: Sequence[Message], budget: int, count: Counter = estimate_tokens) -> list[Message]:
    """The most recent turns of `messages` that fit in `budget` tokens (see the module docstring).

    The leading system messages and the current turn are always kept, even when they alone
    exceed the budget (the caller decides what then happens); of the older groups, the
    longest newest run that fits is kept. Whole candidate prompts are counted (a binary
    search: a few counts), so an exact counter's template overhead is counted once.
    """
    items = list(messages)
    head = 0
    while head < len(items) and items[head].get("role") == "system":
        head += 1
    last_user = max((i for i in range(head, len(items)) if items[i].get("role") == "user"), default=len(items))
    pinned_head, current = items[:head], items[last_user:]
    groups = message_groups(items[head:last_user])

    def keeping(k: int) -> list[Message]:
        return pinned_head + [m for group in groups[len(groups) - k :] for m in group] + current

    low, high = 0, len(groups)  # keeping `low` groups fits (or nothing can be left out); find the most
    while low < high:
        middle = (low + high + 1) // 2
        if count(keeping(middle)) <= budget:
            low = middle
        else:
            high = middle - 1
    return keeping(low)


class ContextPolicy(Interceptor):
    """Keeps every model request within `context_window` - `reserve` tokens (see the module docstring).

    Args:
        policy: ``"trim"`` or ``"error"``.
        context_window: The model's context size in tokens (default: the model's own
            ``context_window`` or ``n_ctx`` attribute, else 4096).
        reserve: Tokens kept free for the reply (default: the call's or model's
            ``max_new_tokens``, else 512).
        count: Counts a request's tokens (default: the model's ``count_tokens`` if it has one,
            else `estimate_tokens`).

    Attributes:
        trimmed: How many requests were trimmed, per session.
        last: The last request of each session: ``(tokens sent, budget, context window)``.
    """

    effects = (ModelCall,)

    def __init__(
        self,
        policy: PolicyName = "trim",
        context_window: int | None = None,
        reserve: int | None = None,
        count: Counter | None = None,
    ) -> None:
        if policy not in ("trim", "error"):
            raise UserError(f"policy must be 'trim' or 'error', not {policy!r}")
        self.policy = policy
        self.context_window = context_window
        self.reserve = reserve
        self.count = count
        self.trimmed: dict[Hashable, int] = {}
        self.last: dict[Hashable, tuple[int, int, int]] = {}
        self._lock = threading.Lock()

    def around(self, effect: Effect[R]) -> Flow[R]:
        """Send the request as it is, trimmed, or not at all."""
        if not isinstance(effect, ModelCall) or not _is_chat(effect.messages):
            passed: R = yield effect
            return passed
        messages = cast("list[Message]", effect.messages)
        count = self.count or _model_counter(effect.llm)
        window = self._window(effect.llm)
        budget = window - self._reserve(effect)
        # counting may ask the engine (a blocking call): as an effect, an async driver runs it in a thread
        used: int = yield Call(count, (messages,))
        self.last[effect.session_id] = (used, budget, window)
        if used > budget:
            if self.policy == "error":
                raise ContextWindowExceeded(used, budget, window)
            fitted: list[Message] = yield Call(trim_messages, (messages, budget, count))
            kept: int = yield Call(count, (fitted,))
            if kept > budget:  # the current turn alone does not fit: its tool results, cut?
                fitted = yield Call(shorten_tool_results, (fitted, budget, count))
                kept = yield Call(count, (fitted,))
            if kept > budget:  # the system prompt and the current turn alone do not fit
                raise ContextWindowExceeded(kept, budget, window)
            self._notice(effect.session_id, len(messages) - len(fitted))
            self.last[effect.session_id] = (kept, budget, window)
            effect = effect.replace(messages=fitted)
        result: R = yield effect
        return result

    def _window(self, llm: object) -> int:
        for value in (self.context_window, getattr(llm, "context_window", None), getattr(llm, "n_ctx", None)):
            if isinstance(value, int) and value > 0:
                return value
        return 4096

    def _reserve(self, effect: ModelCall[R]) -> int:
        if self.reserve is not None:
            return self.reserve
        gen = getattr(effect.llm, "gen_params", None)
        for value in (
            effect.params.get("max_new_tokens"),
            gen.get("max_new_tokens") if isinstance(gen, Mapping) else None,
        ):
            if isinstance(value, int) and value > 0:
                return value
        return 512

    def _notice(self, session_id: Hashable, dropped: int) -> None:
        with self._lock:
            first = session_id not in self.trimmed
            self.trimmed[session_id] = self.trimmed.get(session_id, 0) + 1
        if first:
            logger.info(
                "session %s: %d older message(s) left out of the request to fit the context", session_id, dropped
            )


def _is_chat(messages: object) -> bool:
    return isinstance(messages, list) and all(isinstance(m, Mapping) for m in messages)


def _model_counter(llm: object) -> Counter:
    counter = getattr(llm, "count_tokens", None)
    return cast(Counter, counter) if callable(counter) else estimate_tokens
