"""A person's decisions on a paused run's waiting calls, recorded in its `RunState`.

A run of the tool loop (`plait.agents.tool_loop`) that pauses lists its waiting calls by id
(`call_id`); `decide` checks each decision against the call it names and records what the run
does with it when it goes on: run it (True), tell the model it was refused (`REFUSED`, or
`refused_because` a reason), take a `ToolOutput` as its result (an external tool's: `EXTERNAL`),
or answer the question a running call asked. Decisions on a paused sub-agent's calls
(``'<call id>/<its id>'``) go on to its own run (`plait.agents._sub_runs`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Final

from ..actions._parked import checked_answer
from ..exceptions import ResumeError, UserError
from ..schema import ToolOutput
from ._sub_runs import decide_sub
from .run_state import PlannedCall, RunState

__all__ = ["EXTERNAL", "LOST", "REFUSED", "call_id", "decide", "refused_because"]

REFUSED = "A person refused this call: it did not run."
"""What the model is told about a call refused with ``False``."""


def refused_because(reason: str) -> str:
    """What the model is told about a call refused with a reason: that it did not run, and why."""
    return f"{REFUSED} Their reason: {reason}"


LOST = "This call was started before the agent restarted and its result was lost; it was not run again."
"""What the model is told about an approved call whose run a restart cut off (it runs at most once)."""

EXTERNAL: Final = "external"
"""The ``kind`` of a planned call to an external tool: the caller runs it (it always waits)."""


def call_id(call: PlannedCall, index: int) -> str:
    """The id a pending call is decided by: the model's, else its place in the turn."""
    return call.get("id") or f"call-{index}"


def decide(state: RunState, decisions: Mapping[str, object], session_id: Hashable, agent: object = None) -> None:
    """Record a person's decisions on a paused run's waiting calls.

    Each decision is True (run the call), False (refused: the model is told `REFUSED`), a
    string (refused: the model is told `REFUSED` and this reason, `refused_because`) or a
    `ToolOutput` (the call does not run: its text is the result). A call to an external tool
    takes only a `ToolOutput` (or a refusal): the agent cannot run it. Calls left undecided go
    on waiting. Those on a paused sub-agent's calls (``'<call id>/<its id>'``) go to its run.

    Raises:
        ResumeError: A decision names a call that is not waiting, or does not fit it.
    """
    unknown = [key for key in decisions if key not in state.waiting]
    if unknown:
        raise ResumeError(
            f"no call {unknown[0]!r} waits for a decision on session {session_id!r}; waiting: {state.waiting}",
            session_id,
            state.waiting,
        )
    decided: dict[int, dict[str, Any] | None] = {}  # checked first: a decision that does not fit changes nothing
    routed = []
    for index, call in enumerate(state.pending):
        key = call_id(call, index)
        outcome = state.outcomes[index] if index < len(state.outcomes) else None
        if outcome is not None and "paused" in outcome:  # its sub-agent's calls: decided there
            nested = {k[len(key) + 1 :]: v for k, v in decisions.items() if k.startswith(f"{key}/")}
            routed += [(call, outcome["paused"], nested)] if nested else []
        if key not in decisions:
            continue
        decision = decisions[key]
        if outcome is not None and "question" in outcome:  # a call that asked: the decision is the answer
            try:
                decided[index] = {**outcome, "answer": checked_answer(decision, outcome["question"])}
            except UserError as exc:
                raise ResumeError(f"the answer to {key!r} does not fit: {exc}", session_id, state.waiting) from None
        elif decision is True and call.get("kind") == EXTERNAL:
            raise ResumeError(
                f"{key!r} calls the external tool {call['name']!r}, which the agent cannot run: "
                "answer it with ToolOutput(text)",
                session_id,
                state.waiting,
            )
        elif decision is True:
            pass  # it runs when the run goes on
        elif isinstance(decision, ToolOutput) and isinstance(decision.text, str):
            decided[index] = {"output": decision.text}
        elif decision is False or isinstance(decision, str):
            decided[index] = {"refused": refused_because(decision) if isinstance(decision, str) else REFUSED}
        else:
            raise ResumeError(
                f"decide {key!r} with True, False, a reason (str) or ToolOutput(text), not {decision!r}",
                session_id,
                state.waiting,
            )
    for call, paused, nested in routed:
        decide_sub(agent, call, paused, nested, session_id, state.waiting, decide)
    for index, outcome in decided.items():
        state.outcomes[index] = outcome
    state.waiting = [key for key in state.waiting if key not in decisions]
