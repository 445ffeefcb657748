"""`FaultInjector`: make chosen effects fail (or answer) on purpose, in any mode, without patching.

```python
from plait.effects import ActionCall, ModelCall
from plait.exceptions import LLMConnectionError
from plait.interceptors import intercept
from plait.testing import FaultInjector

faults = FaultInjector().fail(ModelCall, LLMConnectionError("down"), nth=2)   # the 2nd model call fails
with intercept(agent, faults):
    agent("hi")                       # raises LLMConnectionError at the second model call
faults.seen                           # [('ModelCall', 1, 'ran'), ('ModelCall', 2, 'failed')]
```

Which class to name: `Call` is a plain function call, such as a tool API's own code (a fault
there is the tool raising, which tool loops turn into an observation for the model);
`ActionCall` is a whole tool call and `ToolCall` a whole executor call (a fault there is the
tool machinery failing, which propagates); `ModelCall` is a request to the model.

Rules are tried in the order they were added; the first that matches an effect decides it.
A matching rule either raises its error where the effect would have run (so the flow's own
error handling runs: memory rolled back, tool errors turned into observations) or answers
with its value instead of running the effect. Effects no rule matches run as usual.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from typing_extensions import TypedDict, Unpack

from ..effects import Effect, Flow
from ..interceptors import Interceptor

__all__ = ["FaultInjector", "Match"]

R = TypeVar("R")
E = TypeVar("E", bound="Effect[Any]")
_NO_VALUE = object()


class Match(TypedDict, Generic[E], total=False):
    """Which effects of a class a rule decides (every one when empty).

    Attributes:
        nth: Only the n-th effect of that class (1-based), counted from the injector's creation.
        times: At most this many times (None: every match).
        when: Only effects for which ``when(effect)`` is true.
    """

    nth: int | None
    times: int | None
    when: Callable[[E], bool] | None


@dataclass
class _Rule:
    kind: type[Effect[Any]]
    error: BaseException | None
    value: Any  # sent back as the answered effect's result, whatever its type
    nth: int | None
    times: int | None
    when: Callable[[Any], bool] | None
    used: int = 0

    def matches(self, effect: object, index: int) -> bool:
        if not isinstance(effect, self.kind):
            return False
        if self.nth is not None and index != self.nth:
            return False
        if self.times is not None and self.used >= self.times:
            return False
        return self.when is None or bool(self.when(effect))


class FaultInjector(Interceptor):
    """An interceptor that raises errors or returns canned values for the effects its rules match.

    Attributes:
        seen: ``(effect class name, its 1-based index among effects of that class, outcome)``
            for every effect of a kind some rule names; outcome is ``'ran'``, ``'failed'`` or
            ``'answered'``.
    """

    def __init__(self) -> None:
        self._rules: list[_Rule] = []
        self._counts: dict[type, int] = {}
        self._lock = threading.Lock()
        self.seen: list[tuple[str, int, str]] = []
        self.effects = ()

    def fail(self, kind: type[E], error: BaseException, **match: Unpack[Match[E]]) -> FaultInjector:
        """Raise `error` for effects of class `kind`.

        Args:
            kind: The effect class (`ModelCall`, `ActionCall`, `ToolCall`, ...).
            error: What to raise where the effect would run.
            **match: Which of them (`Match`: ``nth``, ``times``, ``when``).

        Returns:
            The injector, for chaining.
        """
        return self._add(kind, error, _NO_VALUE, match)

    def answer(self, kind: type[E], value: object, **match: Unpack[Match[E]]) -> FaultInjector:
        """Return `value` for effects of class `kind` instead of running them (same matching as `fail`)."""
        return self._add(kind, None, value, match)

    def _add(self, kind: type[E], error: BaseException | None, value: object, match: Match[E]) -> FaultInjector:
        rule = _Rule(kind, error, value, match.get("nth"), match.get("times"), match.get("when"))
        self._rules.append(rule)
        self.effects = tuple(dict.fromkeys(r.kind for r in self._rules))
        return self

    def _decide(self, effect: object) -> tuple[_Rule | None, int]:
        with self._lock:
            kind = type(effect)
            index = self._counts.get(kind, 0) + 1
            self._counts[kind] = index
            for rule in self._rules:
                if rule.matches(effect, index):
                    rule.used += 1
                    outcome = "failed" if rule.error is not None else "answered"
                    self.seen.append((kind.__name__, index, outcome))
                    return rule, index
            self.seen.append((kind.__name__, index, "ran"))
            return None, index

    def around(self, effect: Effect[R]) -> Flow[R]:
        """Fail, answer, or run `effect`, as the first matching rule says."""
        rule, _ = self._decide(effect)
        if rule is None:
            result: R = yield effect
            return result
        if rule.error is not None:
            raise rule.error
        answer: R = rule.value
        return answer
