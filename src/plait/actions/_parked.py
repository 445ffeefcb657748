"""Tool calls that wait, mid-call, for a person's answer to a question (private).

A tool that is asked a question while it runs (an MCP server's ``elicitation/create``, with
``MCPToolkit(..., elicit="approval")``) does not block its caller: it *parks* the call in this
process and returns at once an in-progress `ActionReturn` (``state=ActionStatusCode.ING``) whose
one result item is the question (`QUESTION`, with a ticket). The tool loop
(`plait.agents.tool_loop`) pauses the run on it, as on a call waiting for approval; `resume`
with the answer calls `go_on`, which hands the answer to the parked call and waits for what
comes next: the call's result, or its next question (another marker).

The parked call lives in this process only: after a restart `go_on` finds no ticket and answers
`GONE` at once (the call is not run again), never waiting.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..schema import ActionReturn, ActionStatusCode, AgentMessage

__all__ = ["GONE", "QUESTION", "GoOn", "checked_answer", "continued", "go_on", "park", "question_of"]

QUESTION = "question"
"""The type of the result item that carries a parked call's question."""

GONE = (
    "This call was waiting for a person's answer to the tool's question, and the call ended before the "
    "answer came (the agent restarted, or the tool's connection closed); it was not run again."
)
"""What the model is told when an answer comes for a call that no longer waits."""

GoOn = Callable[[Mapping[str, Any]], ActionReturn]
"""Hands a parked call its answer and returns what comes next (blocking: run it off any event loop)."""

_parked: dict[str, GoOn] = {}
_lock = threading.Lock()


def park(question: Mapping[str, Any], resume: GoOn) -> ActionReturn:
    """Park a call that asks `question`; the in-progress return that stands for it until answered.

    Args:
        question: What the person is asked: ``message``, ``requested_schema``, ``server``.
        resume: Called (off the event loop) with the checked answer; returns the call's next outcome.
    """
    ticket = uuid.uuid4().hex
    with _lock:
        _parked[ticket] = resume
    item = {"type": QUESTION, "content": {**question, "ticket": ticket}}
    return ActionReturn(result=[item], state=ActionStatusCode.ING)


def question_of(result: object) -> dict[str, Any] | None:
    """The question a tool result asks (with its ``ticket``), or None for an ordinary result."""
    content = result.content if isinstance(result, AgentMessage) else result
    if not isinstance(content, ActionReturn) or content.state != ActionStatusCode.ING:
        return None
    items = content.result or []
    if len(items) == 1 and items[0].get("type") == QUESTION and isinstance(items[0].get("content"), Mapping):
        return dict(items[0]["content"])
    return None


def go_on(ticket: str, answer: Mapping[str, Any]) -> ActionReturn:
    """Give the call parked as `ticket` its `answer`; its result, its next question, or `GONE` (blocking)."""
    with _lock:
        resume = _parked.pop(ticket, None)
    if resume is None:
        return ActionReturn(errmsg=GONE, state=ActionStatusCode.API_ERROR)
    try:
        return resume(answer)
    except Exception as exc:  # the tool's loop was closed under it: an observation, never a hang
        return ActionReturn(errmsg=f"{GONE} ({type(exc).__name__}: {exc})", state=ActionStatusCode.API_ERROR)


def checked_answer(decision: object, question: Mapping[str, Any]) -> dict[str, Any]:
    """A person's `decision` on a `question` as the answer sent: ``{'action': ..., 'content': ...}``.

    ``{'action': 'accept', 'content': {...}}`` (content checked against the question's
    ``requested_schema``), ``'decline'`` or ``'cancel'``; True accepts with no content, False declines.

    Raises:
        UserError: Another action, or content that does not fit the schema.
    """
    from .mcp._client_requests import elicitation_answer  # only loaded when a question is answered

    if decision is True:
        decision = {"action": "accept", "content": {}}
    elif decision is False:
        decision = "decline"
    schema = question.get("requested_schema")
    return dict(elicitation_answer(decision, schema if isinstance(schema, Mapping) else {}))


def continued(asked: object, outcome: ActionReturn) -> object:
    """The result of a call that asked (`asked`, as its executor wrapped it) now that it went on to `outcome`."""
    content = asked.content if isinstance(asked, AgentMessage) else asked
    if not isinstance(content, ActionReturn):
        return outcome
    merged = dataclasses.replace(content, result=outcome.result, errmsg=outcome.errmsg, state=outcome.state)
    return asked.model_copy(update={"content": merged}) if isinstance(asked, AgentMessage) else merged
