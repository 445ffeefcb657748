"""`ParkedRuns`: runs paused on a stateless client's tools, kept until the client sends their results.

A client without a session (LangChain, litellm) sends the whole conversation each time. When the
served agent pauses on calls to the client's tools, its run (the agent's own tool results of the
turn included) is parked here under the conversation it answered: a fingerprint of the request's
messages and the waiting call ids, in the client's tenant. The client's next request, that same
conversation plus the assistant's ``tool_calls`` and a ``tool`` message for each, takes the run
up again where it stopped; the agent's own calls do not run again. A request that matches no
parked run (another worker, a restart, an edited history, an expired run) is answered from its
history instead (`openai_route`), so parking only keeps what the history cannot carry.

Parked runs are few and short-lived: at most `limit`, each for `ttl` seconds; the oldest and the
expired are dropped (their sessions reset) as new ones come.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ...types import SessionId
from .openai_request import Turn

__all__ = ["ParkedRuns"]


def _fingerprint(turns: Sequence[Turn], calls: Sequence[str]) -> str:
    data = [[t.role, t.text, t.tool_call_id, [c["id"] for c in t.tool_calls]] for t in turns]
    return hashlib.sha256(json.dumps([data, sorted(calls)]).encode()).hexdigest()


class ParkedRuns:
    """The paused sessions of stateless requests, by the conversation that resumes them.

    Args:
        reset: Drops a session from the agent (``agent.reset(session, recursive=True)``).
        limit: Runs kept at most.
        ttl: Seconds a run is kept.
        clock: The time (tests pass their own).
    """

    def __init__(
        self,
        reset: Callable[[SessionId], Any],
        limit: int = 256,
        ttl: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reset = reset
        self._limit = limit
        self._ttl = ttl
        self._clock = clock
        self._runs: OrderedDict[str, tuple[float, SessionId]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._runs)

    def park(self, tenant: str, turns: Sequence[Turn], waiting: Sequence[str], session: SessionId) -> None:
        """Keep `session`, paused on `waiting` calls, for the request whose messages were `turns`."""
        self._expire()
        self._runs[f"{tenant}\n{_fingerprint(turns, waiting)}"] = (self._clock() + self._ttl, session)
        while len(self._runs) > self._limit:
            _, (_, oldest) = self._runs.popitem(last=False)
            self._reset(oldest)

    def take(self, tenant: str, turns: Sequence[Turn]) -> SessionId | None:
        """The parked session `turns` go on with (and no longer parked), or None.

        `turns` match when they are the parked request's messages, then an assistant message whose
        ``tool_calls`` are the waiting calls, then a ``tool`` message for each.
        """
        self._expire()
        answers = 0
        while answers < len(turns) and turns[-1 - answers].role == "tool":
            answers += 1
        if not answers or answers >= len(turns) or turns[-1 - answers].role != "assistant":
            return None
        calls = [call["id"] for call in turns[-1 - answers].tool_calls]
        if sorted(calls) != sorted(str(t.tool_call_id) for t in turns[len(turns) - answers :]):
            return None
        found = self._runs.pop(f"{tenant}\n{_fingerprint(turns[: -1 - answers], calls)}", None)
        return None if found is None else found[1]

    def _expire(self) -> None:
        now = self._clock()
        for key in [key for key, (until, _) in self._runs.items() if until <= now]:
            self._reset(self._runs.pop(key)[1])
