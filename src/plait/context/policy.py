"""`ContextPolicy`: the interceptor that keeps every model request within the model's context window."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeVar, cast

from ..effects import Call, Effect, Flow, ModelCall
from ..exceptions import ContextWindowExceeded, UserError
from ..hooks.usage import perform_observed
from ..interceptors import Interceptor
from ..memory.base_memory import ContextSummary, Memory
from ..utils.config import create_object
from .counting import MARGIN, Calibration
from .messages import (
    Counter,
    Message,
    Request,
    estimate_tokens,
    fewest_dropped,
    sendable_reasoning,
    shorten_tool_results,
    split_request,
)
from .summary import digest, fold, summary_message

__all__ = ["APP_CHOICES", "ContextPolicy", "PolicyName", "app_policy"]

logger = logging.getLogger("plait.context")

R = TypeVar("R")
T = TypeVar("T")
PolicyName = Literal["trim", "summarise", "error"]
"""The policies by name: ``"trim"``, ``"summarise"`` or ``"error"`` (see `plait.context`)."""

_POLICIES = ("trim", "summarise", "error")
_NEAR = 0.25  # below this share of the budget (estimated, non-ASCII text counted high) nothing is counted
_DEFAULT_WINDOW = 4096  # when a model does not say
_SMALLEST = 2048  # the smallest window assumed before a server has been asked


@dataclass
class _Cut:
    """Where a session's requests are cut: kept from one request to the next, so their start stays the same."""

    dropped: int = 0  # the oldest groups left out (or folded into the summary)
    anchor: tuple[Message, ...] = ()  # the messages dropped last time, to tell when the history changed under it


class ContextPolicy(Interceptor):
    """Keeps every model request within `context_window` - `reserve` tokens (see `plait.context`).

    Args:
        policy: ``"trim"``, ``"summarise"`` or ``"error"``.
        context_window: The model's context size in tokens (default: the model's own
            ``context_window`` (asked of the server once where the client can:
            ``fetch_context_window``), or ``n_ctx``, else `default_window`).
        reserve: Tokens kept free for the reply (default: the call's or model's
            ``max_new_tokens``, else 512).
        count: Counts a request's tokens (default: the model's ``count_tokens`` if it has
            one, else estimates calibrated by the usage the server reports, with a margin).
        summariser: The model that writes summaries (``"summarise"``; default: the model
            of the request being summarised).
        summary_tokens: The longest summary, in tokens (default: an eighth of the budget,
            at most 512).
        headroom: The share of the budget a trim or a new summary leaves free, so that the
            next turns are sent with the same start (a model server's prompt cache reuses
            it) until the history outgrows the budget again.
        default_window: The context size assumed for a model that does not tell its own
            (None: such a model's requests are left alone; the agents' default policy does
            that, so a remote model of unknown size is never trimmed to a guess).

    Attributes:
        owned: Whether an agent owns this policy (``context_policy=``): it then shapes only
            that agent's requests, wherever the agent runs; else (registered around a tree
            with `intercept`) the requests of every agent that has no policy of its own or
            only the default one.
        auto: Whether this is an agent's default policy (``context_policy="auto"``), which
            a policy registered around the agent does not replace but adds to.
        trimmed: Per session, how many requests were shaped (trimmed or summarised).
        summarised: Per session, how many times older messages were folded into the summary.
        last: The last request of each session: ``(tokens sent, budget, context window)``
            (tokens estimated while a request is far from full).
        sent: The last request of each session: ``(messages sent, messages it was made of)``.
    """

    effects = (ModelCall,)

    def __init__(
        self,
        policy: PolicyName = "trim",
        context_window: int | None = None,
        reserve: int | None = None,
        count: Counter | None = None,
        *,
        summariser: Any = None,
        summary_tokens: int | None = None,
        headroom: float = 0.25,
        default_window: int | None = _DEFAULT_WINDOW,
    ) -> None:
        if policy not in _POLICIES:
            raise UserError(f"policy must be one of {', '.join(map(repr, _POLICIES))}, not {policy!r}")
        if not 0 <= headroom < 1:
            raise UserError(f"headroom is a share of the budget in [0, 1), not {headroom!r}")
        self.policy = policy
        self.context_window = context_window
        self.reserve = reserve
        self.count = count
        self.summariser = create_object(summariser)  # a model, or its config dict
        self.summary_tokens = summary_tokens
        self.headroom = headroom
        self.default_window = default_window
        self.trimmed: dict[Hashable, int] = {}
        self.summarised: dict[Hashable, int] = {}
        self.last: dict[Hashable, tuple[int, int, int]] = {}
        self.sent: dict[Hashable, tuple[int, int]] = {}
        self.calibration = Calibration()
        self.owned = False
        self.auto = False
        self._cuts: dict[Hashable, _Cut] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ContextPolicy({self.policy!r}, context_window={self.context_window}, reserve={self.reserve})"

    def reset(self, session_id: Hashable) -> None:
        """Forget a session: its cut, statistics and calibration."""
        for table in (self.trimmed, self.summarised, self.last, self.sent, self._cuts):
            table.pop(session_id, None)  # each pop is atomic; the lock guards the read-modify-writes elsewhere
        self.calibration.forget(session_id)

    # -- the interceptor -------------------------------------------------------------------
    def around(self, effect: Effect[R]) -> Flow[R]:
        """Send the request as it is, shaped to fit, or not at all."""
        if not isinstance(effect, ModelCall) or not self._applies(effect) or not _is_chat(effect.messages):
            passed: R = yield effect
            return passed
        session = effect.session_id
        given = cast("list[Message]", effect.messages)
        replay = getattr(getattr(effect.llm, "profile", None), "reasoning_replay", None)
        messages = sendable_reasoning(given, replay)  # what will be sent is what counts
        known = self._known_window(effect.llm)
        reserve = self._reserve(effect)
        summary = effect.memory.summary if self.policy == "summarise" and effect.memory is not None else None
        rough = math.ceil(estimate_tokens(messages) * self.calibration.ratio * (1 + MARGIN))
        if session not in self._cuts and summary is None and rough < _NEAR * ((known or _SMALLEST) - reserve):
            assumed = known or self.default_window or _DEFAULT_WINDOW  # far from full: nothing to count or ask
            self.last[session] = (rough, assumed - reserve, assumed)
            self.sent[session] = (len(messages), len(messages))
            passed = yield effect
            return passed
        exact = self.count or _model_counter(effect.llm)
        model = id(effect.llm)

        def estimate(candidate: Sequence[Message]) -> int:  # with a margin: an estimate may fall short
            return math.ceil(self.calibration.count(session, model, candidate) * (1 + MARGIN))

        window = known or (yield from self._fetched_window(effect.llm))
        if window is None:  # a model of unknown size, and no size to assume: left alone
            unshaped: R = yield effect
            return unshaped
        budget = window - reserve
        request = split_request(messages, _pinned(effect.memory))
        count: Counter = exact or estimate
        blocking = exact is not None  # counting asks the engine: as an effect, an async driver runs it in a thread
        sent, used = yield from self._fit(effect, request, _Counting(count, blocking), budget, window, summary)
        self.last[session] = (used, budget, window)
        self.sent[session] = (len(sent), len(messages))
        if sent is not messages and sent != messages:
            with self._lock:
                self.trimmed[session] = self.trimmed.get(session, 0) + 1
            effect = effect.replace(messages=sent)
        result, response = yield from perform_observed(effect, observe=exact is None)
        if exact is None and response is not None and response.usage is not None:
            self.calibration.observe(session, model, sent, response.usage.prompt_tokens)
        return cast(R, result)

    def _applies(self, effect: ModelCall[Any]) -> bool:
        """An agent's own policy shapes its requests; one registered around a tree, those of agents without one."""
        own = getattr(effect.agent, "context_policy", None)
        return own is self or (not self.owned and (own is None or own.auto))

    def _fit(
        self,
        effect: ModelCall[Any],
        request: Request,
        counting: _Counting,
        budget: int,
        window: int,
        summary: ContextSummary | None,
    ) -> Flow[tuple[list[Message], int]]:
        """The request to send and its tokens: cut where it was cut before if that fits, else cut (or folded) anew."""
        session = effect.session_id
        memory = effect.memory
        if self.policy == "summarise" and memory is not None:
            start = _summary_start(request, summary)
            note = summary_message(summary) if summary is not None and start is not None else None
            start = start or 0
        else:
            note, start = None, self._start(session, request)
        count, blocking = counting
        candidate = request.compose(start, note)
        fits = yield from _perform(blocking, count, candidate)
        if fits <= budget:
            return candidate, fits
        lighter = request.without_older_reasoning()  # given up first: older turns' reasoning, not the turns
        if lighter != request:
            request, candidate = lighter, lighter.compose(start, note)
            fits = yield from _perform(blocking, count, candidate)
            if fits <= budget:
                return candidate, fits
        if self.policy == "error":
            raise ContextWindowExceeded(fits, budget, window)
        target = budget - int(budget * self.headroom)
        if self.policy == "summarise" and memory is not None:
            summary_tokens = self._summary_tokens(budget)
            dropped = yield from self._dropped(counting, request, target - summary_tokens - 16, budget, start)
            previous = summary.text if note is not None and summary is not None else ""
            args = (effect, memory, request, previous, start, dropped, window, summary_tokens)
            summary = yield from self._fold(*args)
            candidate = request.compose(dropped, summary_message(summary))
        else:
            dropped = yield from self._dropped(counting, request, target, budget, start)
            candidate = request.compose(dropped)
            self._cuts[session] = _Cut(dropped, tuple(request.covered(dropped)))
            self._notice(session, f"{len(request.covered(dropped))} older message(s) left out of the request")
        fits = yield from _perform(blocking, count, candidate)
        if fits > budget:  # the current turn alone does not fit: its tool results, cut?
            candidate = yield from _perform(blocking, shorten_tool_results, candidate, budget, count)
            fits = yield from _perform(blocking, count, candidate)
        if fits > budget:  # the system prompt and the current turn alone do not fit
            raise ContextWindowExceeded(fits, budget, window)
        return candidate, fits

    def _fold(
        self,
        effect: ModelCall[Any],
        memory: Memory,
        request: Request,
        previous: str,
        start: int,
        dropped: int,
        window: int,
        summary_tokens: int,
    ) -> Flow[ContextSummary]:
        """Fold the groups ``[start, dropped)`` (pinned ones stay as they are) into the session's summary."""
        folded = [
            m for i, group in enumerate(request.older[start:dropped], start) if i not in request.pinned for m in group
        ]
        llm = self.summariser if self.summariser is not None else effect.llm
        text = yield from fold(llm, previous, folded, effect.session_id, window=window, summary_tokens=summary_tokens)
        covered = request.covered(dropped)
        summary = ContextSummary(text, len(covered), digest(covered))
        memory.set_summary(summary)
        self._notice(effect.session_id, f"{len(folded)} older message(s) folded into the conversation's summary")
        with self._lock:
            self.summarised[effect.session_id] = self.summarised.get(effect.session_id, 0) + 1
        return summary

    def _dropped(self, counting: _Counting, request: Request, target: int, budget: int, start: int) -> Flow[int]:
        """The fewest oldest groups to leave out to fit `target` (the budget less headroom), or else `budget`."""
        count, blocking = counting
        dropped = yield from _perform(blocking, fewest_dropped, request, target, count, None, start)
        if dropped == len(request.older) and target < budget:  # even all of them: fitting at all is enough
            dropped = yield from _perform(blocking, fewest_dropped, request, budget, count, None, start)
        return dropped

    # -- settings --------------------------------------------------------------------------
    def _known_window(self, llm: object) -> int | None:
        """The context size, when it is known without asking a server."""
        for size in (self.context_window, getattr(llm, "context_window", None), getattr(llm, "n_ctx", None)):
            if isinstance(size, int) and size > 0:
                return size
        return None

    def _fetched_window(self, llm: object) -> Flow[int | None]:
        """The size a client can ask its server for (once; the client keeps the answer), else `default_window`."""
        fetch = getattr(llm, "fetch_context_window", None)
        size = (yield Call(fetch)) if callable(fetch) else None
        return size if isinstance(size, int) and size > 0 else self.default_window

    def _reserve(self, effect: ModelCall[R]) -> int:
        if self.reserve is not None:
            return self.reserve
        gen = getattr(effect.llm, "gen_params", None)
        for value in (
            effect.params.get("max_new_tokens"),
            gen.get("max_new_tokens") if isinstance(gen, (dict, Mapping)) else None,
        ):
            if isinstance(value, int) and value > 0:
                return value
        return 512

    def _summary_tokens(self, budget: int) -> int:
        return self.summary_tokens or max(32, min(512, budget // 8))

    def _start(self, session: Hashable, request: Request) -> int:
        """Where the last trim cut this session's requests, if its history is still the same there."""
        cut = self._cuts.get(session)
        if cut is None or cut.dropped > len(request.older) or tuple(request.covered(cut.dropped)) != cut.anchor:
            return 0
        return cut.dropped

    def _notice(self, session: Hashable, what: str) -> None:
        with self._lock:
            first = session not in self.trimmed and session not in self.summarised
        if first:
            logger.info("session %s: %s to fit the context", session, what)


APP_CHOICES = ("auto", "trim", "summarise", "error", "off")
"""What ``plait chat --context`` (and the other apps) accept."""


def app_policy(choice: str, embedded: bool) -> ContextPolicy | None:
    """The context policy of plait's apps (``plait chat``, ``plait serve``, the web demo) for a choice.

    ``"auto"``, their default, summarises the older turns, except on the embedded model
    (`embedded`), which trims: its 135M summaries keep almost none of what they fold and
    each fold costs seconds on a CPU (measured in ``bench/context_policies.py``). A model
    of unknown size is assumed to hold 4,096 tokens. ``"off"``: no policy.

    Raises:
        UserError: An unknown choice.
    """
    if choice not in APP_CHOICES:
        raise UserError(f"context policy must be one of {', '.join(APP_CHOICES)}, not {choice!r}")
    if choice == "off":
        return None
    if choice == "auto":
        choice = "trim" if embedded else "summarise"
    return ContextPolicy(cast(PolicyName, choice))


def _summary_start(request: Request, summary: ContextSummary | None) -> int | None:
    """How many older groups `summary` stands for, or None when it does not apply to this request."""
    if summary is None:
        return None
    covered = groups = 0
    while groups < len(request.older) and covered < summary.covers:
        covered += len(request.older[groups])
        groups += 1
    if covered != summary.covers or digest(request.covered(groups)) != summary.digest:
        return None
    return groups


def _pinned(memory: Memory | None) -> frozenset[str]:
    """The texts of the messages marked ``extra_info={'pinned': True}`` in a session's memory."""
    if memory is None:
        return frozenset()
    return frozenset(
        m.content
        for m in memory.memory
        if isinstance(m.extra_info, Mapping) and m.extra_info.get("pinned") is True and isinstance(m.content, str)
    )


def _is_chat(messages: object) -> bool:
    if not isinstance(messages, list):
        return False
    for message in messages:  # noqa: SIM110 - a loop, not all(generator): asked before every model call
        if not isinstance(message, (dict, Mapping)):
            return False
    return True


def _model_counter(llm: object) -> Counter | None:
    counter = getattr(llm, "count_tokens", None)
    return cast(Counter, counter) if callable(counter) else None


class _Counting(NamedTuple):
    count: Counter
    blocking: bool  # the count asks the engine


def _perform(blocking: bool, fn: Callable[..., T], *args: Any) -> Flow[T]:
    """``fn(*args)``: as a `Call` effect when it blocks (an async driver runs it in a thread), else right here."""
    if blocking:
        result: T = yield Call(fn, args)
        return result
    return fn(*args)
