r"""The visible text of a reply with markup cut out, built so that a stream shows a prefix of it (private).

Shared by the tool-call detector and the ``<think>`` splitter. A reply is a sequence of prose
and markup (a tool call, a think block). Cutting the markup out leaves the whitespace around
it, so each *gap* — a run of markup and the whitespace around and between it — is replaced by:

- nothing, at the start or the end of the text (no prose before it, or none after it);
- otherwise the longest whitespace piece inside it (``'A\n\n<call>\n\nB'`` -> ``'A\n\nB'``).

Whitespace with no markup next to it is kept as it is. `ProseJoiner` applies the rule as the
pieces arrive and only ever appends: whitespace is held until the next prose shows whether a
gap it belongs to is inside the text or at its end; `close` settles the end.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

__all__ = ["ProseJoiner", "partial_marker_start"]


class ProseJoiner:
    """Joins prose pieces, dropping markup per the gap rule; `text` only ever grows."""

    def __init__(self) -> None:
        self._out: list[str] = []
        self._spaces: list[str] = [""]  # whitespace pieces since the last prose, split at markup
        self._gap = False  # markup since the last prose
        self._started = False  # prose other than whitespace was shown

    @property
    def text(self) -> str:
        """What is settled so far."""
        return "".join(self._out)

    def prose(self, piece: str) -> str:
        """Add prose; returns the text that became settled (possibly ``''``)."""
        core = piece.strip()
        if not core:
            self._spaces[-1] += piece
            return ""
        lead = piece[: len(piece) - len(piece.lstrip())]
        self._spaces[-1] += lead
        if not self._gap:
            separator = "".join(self._spaces)  # no markup: the whitespace as it was
        elif self._started:
            separator = max(self._spaces, key=len)  # a gap between words
        else:
            separator = ""  # a gap at the start
        trail = piece[len(piece.rstrip()) :]
        settled = separator + core
        self._out.append(settled)
        self._spaces, self._gap, self._started = [trail], False, True
        return settled

    def markup(self) -> None:
        """Note markup here (its text is dropped)."""
        self._gap = True
        self._spaces.append("")

    def close(self) -> str:
        """End of text: returns the held whitespace that stays (none when markup ended the text)."""
        rest = "" if self._gap else "".join(self._spaces)
        self._out.append(rest)
        self._spaces, self._gap = [""], False
        return rest


@lru_cache(maxsize=64)
def _prefixes(markers: frozenset[str]) -> tuple[frozenset[str], int]:
    """The proper prefixes of `markers`, and the longest marker's length."""
    prefixes = frozenset(marker[:size] for marker in markers for size in range(1, len(marker)))
    return prefixes, max(map(len, markers), default=0)


def partial_marker_start(text: str, start: int, markers: Iterable[str]) -> int | None:
    """First index ``>= start`` from which the rest of `text` is a proper prefix of one of `markers`."""
    prefixes, longest = _prefixes(frozenset(markers))
    for index in range(max(start, len(text) - longest + 1), len(text)):
        if text[index:] in prefixes:
            return index
    return None
