"""Counting a request's tokens for models that cannot count them: estimates calibrated by reported usage.

A model that offers ``count_tokens(messages)`` (the embedded llama.cpp model, the HF
backends) is counted exactly. An OpenAI-compatible server cannot be asked, but each reply
says how many prompt tokens the request took (``usage.prompt_tokens``). `Calibration` keeps,
per session and model, the last request whose usage was reported:

* a request that starts with those messages (the next turn of a conversation) is counted as
  the reported tokens plus the estimate of what it adds;
* any request's estimate is scaled by the ratio of reported to estimated tokens, a running
  average over the requests seen (text in languages or formats the four-characters-a-token
  estimate gets wrong is corrected after one reply).

Measured on the embedded model's tokenizer (``bench/context_policies.py``), the calibrated
count of a growing conversation is within a few tokens of the exact one, while the bare
estimate is off by up to a fifth; a policy keeps `MARGIN` of the budget free on top.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from .messages import Message, estimate_tokens

__all__ = ["MARGIN", "Calibration"]

MARGIN = 0.05
"""How much a policy adds to a calibrated estimate (a share of it), to stay clear of the real count."""

_LEARN = 0.3  # weight of the newest request in the running ratio
_RATIO_RANGE = (0.25, 4.0)


@dataclass(frozen=True)
class _Reported:
    sent: list[Message]
    estimate: int
    tokens: int


class Calibration:
    """Token counts for one policy's requests, calibrated by the usage servers report (see the module docstring)."""

    def __init__(self) -> None:
        self.ratio = 1.0
        self._reported: dict[Hashable, dict[Hashable, _Reported]] = {}  # session -> model -> last report
        self._lock = threading.Lock()

    def count(self, session_id: Hashable, model: Hashable, messages: Sequence[Message]) -> int:
        """The tokens `messages` take, as well as they are known for a session's requests to a model."""
        estimate = estimate_tokens(messages)
        reports = self._reported.get(session_id)
        reported = reports.get(model) if reports is not None else None
        if (
            reported is not None
            and len(messages) >= len(reported.sent)
            and list(messages[: len(reported.sent)]) == reported.sent
        ):
            return reported.tokens + math.ceil((estimate - reported.estimate) * self.ratio)
        return math.ceil(estimate * self.ratio)

    def observe(self, session_id: Hashable, model: Hashable, sent: Sequence[Message], prompt_tokens: int) -> None:
        """The model's server reported that `sent`, a request of the session, took `prompt_tokens`."""
        estimate = estimate_tokens(sent)
        if prompt_tokens <= 0 or estimate <= 0:
            return
        low, high = _RATIO_RANGE
        with self._lock:
            self._reported.setdefault(session_id, {})[model] = _Reported(list(sent), estimate, prompt_tokens)
            ratio = min(high, max(low, prompt_tokens / estimate))
            self.ratio += _LEARN * (ratio - self.ratio)

    def forget(self, session_id: Hashable) -> None:
        """Drop what was reported for a session."""
        self._reported.pop(session_id, None)  # atomic
