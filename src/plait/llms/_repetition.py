"""`RepetitionGuard`: notices a generation that has started repeating itself, so it can be stopped.

Small models at temperature 0 fall into loops (``a being in a spaceship, a being in a
spaceship, ...``) and fill every token of ``max_new_tokens``: 90 s of nothing on a CPU. The
embedded engine stops such a generation as soon as its last `WINDOW` characters (or four
periods, for longer units) are one unit of at most `MAX_PERIOD` characters over and over,
and reports the finish reason `REPETITION`.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_PERIOD", "REPETITION", "WINDOW", "RepetitionGuard"]

REPETITION: Final = "repetition"
"""The finish reason of a generation stopped because it repeated itself."""

WINDOW: Final = 200
"""Characters of pure repetition before a generation is stopped (at least four periods)."""

MAX_PERIOD: Final = 150
"""The longest repeated unit looked for, in characters."""

_EVERY: Final = 16
"""Characters between two looks at the tail (a look compares at most `MAX_PERIOD` slices)."""


class RepetitionGuard:
    """Feed it a generation's text as it grows; `looping` says when the tail is one unit repeated."""

    __slots__ = ("_checked",)

    def __init__(self) -> None:
        self._checked = 0

    def looping(self, text: str) -> bool:
        """Whether `text` (the whole generation so far) ends in a loop."""
        if len(text) - self._checked < _EVERY or len(text) < WINDOW:
            return False
        self._checked = len(text)
        return is_looping(text)


def is_looping(text: str) -> bool:
    """Whether the end of `text` is one unit of 1 to `MAX_PERIOD` characters repeated over `WINDOW` characters or more.

    A tail of length ``n`` has period ``p`` when it equals itself shifted by ``p``:
    ``tail[:-p] == tail[p:]`` (one slice comparison per candidate period).
    """
    for period in range(1, MAX_PERIOD + 1):
        span = max(WINDOW, 4 * period)
        if len(text) < span:
            return False
        tail = text[-span:]
        if tail[:-period] == tail[period:]:
            return True
    return False
