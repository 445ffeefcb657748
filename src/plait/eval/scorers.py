"""Scorers: does an answer match a case's ``expected``?

A scorer is ``fn(output, expected) -> bool | float``: `output` is the agent's answer as
text, `expected` the case's value as the data set wrote it. A bool is the verdict (score 1.0
or 0.0); a number is a score in [0, 1] that passes at `PASS_SCORE` or more. What a scorer
raises, or a value it returns that is neither, is the case's error (the run goes on).

Built in (`expected` may be one value or a list of acceptable ones; a case passes when any
matches):

* ``contains``: the expected text occurs in the answer, ignoring case;
* ``exact``: the answer is the expected text, ignoring surrounding whitespace;
* ``regex``: the expected regular expression matches somewhere in the answer.

Any other scorer is named ``MODULE:FN`` (`load_object`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Union, cast

from ..exceptions import UserError
from ..types import JSONValue
from ..utils.loading import load_object

__all__ = ["BUILTIN_SCORERS", "PASS_SCORE", "Scorer", "contains", "exact", "load_scorer", "regex", "score"]

Scorer = Callable[[str, JSONValue], Union[bool, float]]
"""``fn(output, expected) -> bool | float``."""

PASS_SCORE = 0.5
"""A numeric score passes at this value or more."""


def _options(expected: JSONValue) -> list[str]:
    values = expected if isinstance(expected, list) else [expected]
    return ["" if value is None else str(value) for value in values]


def contains(output: str, expected: JSONValue) -> bool:
    """Whether any expected text occurs in `output`, ignoring case."""
    folded = output.casefold()
    return any(option.casefold() in folded for option in _options(expected))


def exact(output: str, expected: JSONValue) -> bool:
    """Whether `output` is one of the expected texts, ignoring surrounding whitespace."""
    return output.strip() in {option.strip() for option in _options(expected)}


def regex(output: str, expected: JSONValue) -> bool:
    """Whether any expected regular expression matches somewhere in `output`.

    Raises:
        UserError: A pattern that does not compile.
    """
    for pattern in _options(expected):
        try:
            if re.search(pattern, output):
                return True
        except re.error as exc:
            raise UserError(f"expected is not a valid regular expression ({exc}): {pattern[:100]!r}") from None
    return False


BUILTIN_SCORERS: dict[str, Scorer] = {"contains": contains, "exact": exact, "regex": regex}
"""The scorers named by a word."""


def load_scorer(scorer: str | Scorer) -> Scorer:
    """A scorer: itself, a built-in one by name, or ``MODULE:FN``.

    Raises:
        UserError: An unknown name, or ``MODULE:FN`` that is not a callable.
    """
    if callable(scorer):
        return scorer
    if scorer in BUILTIN_SCORERS:
        return BUILTIN_SCORERS[scorer]
    if ":" not in scorer:
        raise UserError(f"unknown scorer {scorer!r}: use {', '.join(BUILTIN_SCORERS)} or MODULE:FN")
    found = load_object(scorer, "--scorer")
    if not callable(found):
        raise UserError(f"--scorer {scorer!r} is not a function")
    return cast(Scorer, found)  # of unknown signature: what it returns is checked by score()


def score(scorer: Scorer, output: str, expected: JSONValue) -> tuple[bool, float]:
    """``(passed, score)`` of an answer.

    Raises:
        UserError: The scorer returned neither a bool nor a number in [0, 1].
    """
    verdict = scorer(output, expected)
    if isinstance(verdict, bool):
        return verdict, float(verdict)
    if isinstance(verdict, (int, float)) and not math.isnan(verdict) and 0 <= verdict <= 1:
        return verdict >= PASS_SCORE, float(verdict)
    raise UserError(f"a scorer returns a bool or a number in [0, 1], not {verdict!r}"[:200])
