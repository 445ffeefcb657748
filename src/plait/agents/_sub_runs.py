"""Calls that wait after they ran, for `plait.agents.tool_loop` (private): questions and paused sub-agents.

A tool call learns its call id (`with_call_id`). An agent run as a tool that pauses for
approval (`plait.agents.run_state.sub_pause`) pauses the calling run: the call waits, its
sub-agent's calls are listed under the call's id as ``'<call id>/<their id>'``
(`nested_pending`), decisions on them go to the sub-agent's paused run (`decide_sub`), and
once none waits the call runs again and the sub-agent goes on (`goes_on`). A call that asks
a person a question (an MCP elicitation) waits likewise (`still_waits`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from ..actions._parked import question_of
from ..effects import Effect, ToolCall
from ..exceptions import ResumeError
from ..schema import PendingCall
from .run_state import PlannedCall, RunState, encode_result, sub_pause

__all__ = ["decide_sub", "goes_on", "nested_pending", "still_waits", "with_call_id"]


def still_waits(state: RunState, key: str, index: int, result: object) -> bool:
    """Whether a call that ran waits on (it asks a person something, or its sub-agent paused); noted in `state`."""
    question = question_of(result)
    if question is not None:  # the call asks a person something: it waits, still running
        state.outcomes[index] = {"question": question, "asked": encode_result(result)}
        state.waiting.append(key)
        return True
    paused = sub_pause(result)
    if paused is not None:  # a sub-agent paused: the call waits for the decisions on its calls
        state.outcomes[index] = {"paused": paused}
        state.waiting += [f"{key}/{sub['id']}" for sub in paused["calls"]]
        return True
    return False


def goes_on(outcome: Mapping[str, Any], key: str, waiting: list[str]) -> bool:
    """Whether a waiting call goes on: its question is answered, or none of its sub-agent's calls waits."""
    if "question" in outcome:
        return "answer" in outcome
    return not any(k.startswith(f"{key}/") for k in waiting)


def with_call_id(effect: Effect[Any], call_id: str) -> Effect[Any]:
    """`effect` with the model's id for the call when it is an executor call (an agent run as a tool needs it)."""
    if isinstance(effect, ToolCall) and effect.call_id is None:
        return dataclasses.replace(effect, call_id=call_id)
    return effect


def nested_pending(key: str, paused: Mapping[str, Any], waiting: list[str]) -> list[PendingCall]:
    """The waiting calls of the sub-agent call `key` runs, named ``'<key>/<their id>'``."""
    found = []
    for sub in paused["calls"]:
        nested = f"{key}/{sub['id']}"
        if nested in waiting:
            found.append(PendingCall(nested, str(sub["name"]), dict(sub.get("arguments") or {})))
    return found


def decide_sub(
    agent: object,
    call: PlannedCall,
    paused: Mapping[str, Any],
    decisions: Mapping[str, object],
    session_id: Hashable,
    waiting: list[str],
    decide: Callable[..., None],
) -> None:
    """Hand decisions to the paused run of the sub-agent `call` runs (an `AgentTool` of `agent`'s executor).

    Raises:
        ResumeError: That run is gone (its session was not restored), or a decision does not fit it.
    """
    executor = getattr(agent, "executor", None)
    resolve = getattr(executor, "resolve_name", None)
    actions = getattr(executor, "actions", None)
    tool = actions.get(resolve(call["name"])) if callable(resolve) and isinstance(actions, Mapping) else None
    sub = getattr(tool, "agent", None)
    session = paused.get("session")
    run = sub.run_state(session) if sub is not None and session is not None else None
    if sub is None or run is None:
        raise ResumeError(
            f"the paused run of {call['name']!r} (session {session!r}) is gone: its calls cannot be decided",
            session_id,
            waiting,
        )
    decide(run, decisions, session, sub)
    sub.keep_paused_run(run, session)
