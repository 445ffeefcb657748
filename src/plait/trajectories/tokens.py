"""`TokenRecorder`: the exact tokens of each model call of a session, as an interceptor.

```python
recorder = TokenRecorder()
register_interceptor(agent, recorder)
agent("What is 37 * 91?", session_id="u1")
recorder.take("u1")   # [TurnTokenIds(prompt_ids=[...], completion_ids=[...], logprobs=[...]) or None, ...]
```

A model call's tokens are its `ModelResponse.tokens`: the embedded engine gives them when it is
asked for ``logprobs=True`` (``LlamaCppModel(logprobs=True)``); a call whose response carries
none (a ``chat`` call's text, a server that sends no token ids) is recorded as None, so the
list stays in step with the session's model calls. `plait eval` records them per case
(`plait.eval.case_runner`), and `plait.trajectories.from_eval` gives the k-th call's tokens to
the trajectory's k-th assistant message when the counts agree.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict
from typing import Any, TypeVar, cast

from ..effects import Effect, Flow, ModelCall
from ..hooks.usage import perform_observed
from ..interceptors import Interceptor
from ..llms.response import TurnTokenIds
from .record import TurnTokens

__all__ = ["TokenRecorder", "recorded", "turn_tokens_of"]

R = TypeVar("R")


class TokenRecorder(Interceptor):
    """Keeps each session's model calls' tokens, in call order (see the module docstring)."""

    effects = (ModelCall,)

    def __init__(self) -> None:
        self._sessions: dict[Hashable, list[TurnTokenIds | None]] = {}
        self._lock = threading.Lock()

    def around(self, effect: Effect[R]) -> Flow[R]:
        """Perform the call as asked and keep the tokens its response carries."""
        if not isinstance(effect, ModelCall):
            passed: R = yield effect
            return passed
        result, response = yield from perform_observed(effect, observe=False)
        with self._lock:
            self._sessions.setdefault(effect.session_id, []).append(None if response is None else response.tokens)
        return cast(R, result)

    def take(self, session_id: Hashable) -> list[TurnTokenIds | None]:
        """The session's calls' tokens since the last `take` (None for a call without them)."""
        with self._lock:
            return self._sessions.pop(session_id, [])

    def reset(self, session_id: Hashable) -> None:
        """Forget the session."""
        self.take(session_id)


def recorded(calls: Sequence[TurnTokenIds | None]) -> list[dict[str, Any] | None] | None:
    """`calls` as JSON data for a results record (None: no call had tokens)."""
    if not any(call is not None for call in calls):
        return None
    return [None if call is None else asdict(call) for call in calls]


def turn_tokens_of(calls: object, messages: Sequence[Mapping[str, Any]]) -> list[TurnTokens]:
    """The `TurnTokens` of a trajectory: the k-th call's tokens for its k-th assistant message.

    Empty when `calls` (a record's ``tokens``) is not a list as long as the assistant messages
    (calls and messages cannot be paired then) or an entry is malformed.
    """
    assistants = [i for i, message in enumerate(messages) if message.get("role") == "assistant"]
    if not isinstance(calls, list) or len(calls) != len(assistants):
        return []
    turns: list[TurnTokens] = []
    for index, call in zip(assistants, calls, strict=True):
        if call is None:
            continue
        try:
            turns.append(TurnTokens(message=index, **call))
        except (TypeError, ValueError):  # a hand-edited or foreign record: no tokens rather than wrong ones
            return []
    return turns
