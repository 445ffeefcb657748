"""`UsageMeter`: token usage and the last finish reason of each session's model calls, as an interceptor.

```python
meter = UsageMeter()
with intercept(agent, meter):
    agent("What is 37 * 91?", session_id="u1")
meter.take("u1")   # Metered(prompt_tokens=192, completion_tokens=31, calls=2, finish_reason='stop')
```

A model's ``chat`` answers with text only, so for a model whose ``chat`` is the text of its
``complete`` (``chat_is_complete_text``: the OpenAI-compatible and Claude clients) the meter
asks ``complete`` instead and hands the flow the same text; a ``complete`` or ``stream_chat``
call is read as it is (the final streamed item carries the `ModelResponse`). Sessions
are counted apart; one session runs one call at a time (`SessionBusyError`), so what `take`
returns belongs to that call.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar, cast

from ..effects import Effect, Flow, ModelCall
from ..interceptors import Interceptor
from ..llms.response import ModelResponse

__all__ = ["Metered", "UsageMeter", "perform_observed"]

R = TypeVar("R")


@dataclass
class Metered:
    """What a session's model calls reported since the last `UsageMeter.take`.

    Attributes:
        prompt_tokens: Prompt tokens, summed.
        completion_tokens: Generated tokens, summed.
        calls: Model calls seen.
        reported: Calls whose model reported its usage (the sums cover only these).
        finish_reason: Why the last call's generation stopped (``'stop'``, ``'length'``...), if known.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    reported: int = 0
    finish_reason: str | None = None

    @property
    def total_tokens(self) -> int:
        """Prompt and completion tokens."""
        return self.prompt_tokens + self.completion_tokens


class UsageMeter(Interceptor):
    """Counts every model call's usage per session (see the module docstring)."""

    effects = (ModelCall,)

    def __init__(self) -> None:
        self._sessions: dict[Hashable, Metered] = {}
        self._lock = threading.Lock()

    def take(self, session_id: Hashable) -> Metered:
        """What the session's calls reported since the last `take` (and start counting afresh)."""
        with self._lock:
            return self._sessions.pop(session_id, None) or Metered()

    def around(self, effect: Effect[R]) -> Flow[R]:
        """Perform the call (``chat`` as ``complete`` where the model has it) and count what it reports."""
        if not isinstance(effect, ModelCall):
            passed: R = yield effect
            return passed
        result, response = yield from perform_observed(effect)
        self._count(effect.session_id, response)
        return cast(R, result)

    def _count(self, session_id: Hashable, response: ModelResponse | None) -> None:
        with self._lock:
            metered = self._sessions.setdefault(session_id, Metered())
            metered.calls += 1
            if response is None:
                return
            metered.finish_reason = response.finish_reason or metered.finish_reason
            if response.usage is not None:
                metered.reported += 1
                metered.prompt_tokens += response.usage.prompt_tokens
                metered.completion_tokens += response.usage.completion_tokens


def perform_observed(effect: ModelCall[R], observe: bool = True) -> Flow[tuple[R, ModelResponse | None]]:
    """Perform a model call and return what it answers with the `ModelResponse` behind it (None: not seen).

    With `observe`, a ``chat`` call to a model whose ``chat`` is the text of its ``complete``
    (``chat_is_complete_text``) is sent as ``complete``, and the flow still gets the text.
    """
    chat = effect.method == "chat" and getattr(effect.llm, "chat_is_complete_text", False)
    if observe and chat and _one_chat(effect.messages):
        response: ModelResponse = yield effect.replace(method="complete")
        return cast(R, response.content), response  # what ``chat`` answers: the reply's text
    result: R = yield effect
    return result, _response_of(result)


def _response_of(result: object) -> ModelResponse | None:
    """The `ModelResponse` behind a model call's result: itself, or what a streamed final chunk carries."""
    if isinstance(result, ModelResponse):
        return result
    extra = getattr(result, "extra_info", None)
    if isinstance(extra, Mapping):  # the function-calling agents' chunks: {'response': ModelResponse}
        extra = extra.get("response")
    return extra if isinstance(extra, ModelResponse) else None


def _one_chat(messages: object) -> bool:
    """Whether `messages` is one conversation (a list of message dicts), not a batch or a raw prompt."""
    return isinstance(messages, list) and all(isinstance(m, dict) for m in messages)
