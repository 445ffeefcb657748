"""Handoffs: an agent passes the conversation to a specialist, who answers from then on.

A tool-using agent built with ``handoffs=[billing, Handoff(refunds, history="none")]`` offers
its model one tool per target (``transfer_to_billing``, ``transfer_to_refunds``). When the model
calls one, the run ends there and the target answers the turn, in the same session and the same
driver (an `AgentCall`: the caller's interceptors, replay, tracing and ``stream_events`` see it).
A `sticky` handoff (the default) keeps the session with the target for later turns: the agent
hands each later message straight on, until a reply comes from elsewhere. Handing on is the same
transfer call, planned by the agent instead of its model (`handing_on`: kind `HANDED_ON`, kept
out of memory and of the stream events), so every turn with a target runs the one tool loop. A
tool of the target that needs a person's approval pauses the handing agent's run, in the first
turn as in later ones (the transfer call waits as an agent run as a tool does,
`plait.agents.agent_tool`): resumed there, the target goes on.

What the target sees is its `Handoff.history`:

* ``"full"``: the conversation so far, as messages of the user and the assistant (its own turns);
* ``"none"``: only the messages of this turn;
* ``"summary"``: one message summing up the conversation before this turn (by the handing
  agent's model, as `plait.context.ContextPolicy` summarises), then this turn's messages;
* a function of the ``"full"`` view (a list of `AgentMessage`) returning what the target sees.

Tools are never shared: the target keeps its own tools and sees no tool call or tool result of
the agent that handed over. Everything lives in the agents' memories, so a session with a
handoff survives ``state_dict`` -> JSON -> ``load_state_dict`` and a `SessionStore` restart:
the handing agent's memory records the transfer call and the target's replies (under the
target's name), which is how a later turn finds the agent the session is with.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Union

from ..actions.base_action import BaseAction
from ..context.summary import fold
from ..effects import AgentCall, Flow
from ..exceptions import UserError
from ..schema import ActionReturn, AgentMessage, AgentStatusCode
from .agent_tool import paused_return
from .call_path import normalize_inputs
from .run_state import PlannedCall

__all__ = ["HANDED_ON", "Handoff", "HandoffTool", "HistoryPolicy", "handing_on"]

HANDED_ON: Final = "handed_on"
"""The ``kind`` of a transfer call the agent plans itself: a later turn of a session with a sticky target."""

HistoryPolicy = Union[Literal["full", "none", "summary"], Callable[[list[AgentMessage]], Iterable[Any]]]
"""What a handoff's target sees of the conversation (see the module docstring)."""

_POLICIES = ("full", "none", "summary")
_SUMMARY_TOKENS = 256
_SUMMARY_WINDOW = 8192


def _snake(name: str) -> str:
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "agent"


@dataclass
class Handoff:
    """One agent a tool-using agent may hand the conversation to.

    Args:
        agent: The target (a plait agent of the same mode: sync for a sync agent, async for async).
        tool_name: The tool the model sees; default ``transfer_to_<agent name in snake case>``.
        description: The tool's description; default names the agent and its description.
        history: What the target sees (``"full"``, ``"none"``, ``"summary"`` or a function).
        sticky: Whether later turns of the session go straight to the target.

    Raises:
        UserError: `history` is none of those.
    """

    agent: Any
    tool_name: str = ""
    description: str = ""
    history: HistoryPolicy = "full"
    sticky: bool = True

    def __post_init__(self) -> None:
        if not (callable(self.history) or self.history in _POLICIES):
            raise UserError(
                f"history must be one of {', '.join(map(repr, _POLICIES))} or a function, not {self.history!r}"
            )
        name = str(getattr(self.agent, "name", "") or type(self.agent).__name__)
        self.tool_name = self.tool_name or f"transfer_to_{_snake(name)}"
        about = str(getattr(self.agent, "description", "") or "")
        self.description = self.description or f"Hand the conversation to {name}" + (f": {about}" if about else ".")

    @property
    def name(self) -> str:
        """The target's name (its replies' sender)."""
        return str(self.agent.name)


class HandoffTool(BaseAction, register=False):
    """The tool a model calls to take a `Handoff`: the target answers, in the caller's session and driver.

    Its result says the conversation was transferred; the target's reply waits in `replies` for
    the calling run, which ends with it. A pause of the target for a person's approval pauses
    the calling run too (`plait.agents.run_state.sub_pause`): resumed there, the call runs again
    and the target goes on where it stopped.

    Args:
        handoff: The handoff.
        owner: The agent that hands over (whose conversation the history policy reads).
    """

    def __init__(self, handoff: Handoff, owner: Any) -> None:
        self.handoff = handoff
        self.owner = owner
        self.replies: dict[Hashable, AgentMessage] = {}
        super().__init__(
            {"name": handoff.tool_name, "description": handoff.description, "parameters": [], "required": []}
        )

    @property
    def agent(self) -> Any:
        """The target (where a paused run's decisions go)."""
        return self.handoff.agent

    def run(self) -> str:  # pragma: no cover - call_flow runs the handoff; this names the API
        """Hand the conversation over (run through `call_flow`, never called directly)."""
        raise NotImplementedError

    def call_flow(
        self, inputs: object, name: str, session_id: Hashable | None, call_id: str | None = None
    ) -> Flow[ActionReturn]:
        """Show the target its history and let it answer (or go on with its paused run)."""
        session = 0 if session_id is None else session_id
        target = self.handoff.agent
        run = target.run_state(session)
        if call_id is not None and run is not None and run.pending and not run.waiting:
            reply: AgentMessage = yield AgentCall(target, (), session, resume=True, tool_call=call_id)
        else:
            messages = self.owner._memory.get_memory(session) if self.owner._memory is not None else []
            start, end = _this_turn(messages)
            if active(self.owner, messages[:start]) is self.handoff:  # the session is with the target: hand on
                told = normalize_inputs(messages[start:end])
            else:
                told = yield from history_flow(self.owner, self.handoff, session)
                target.reset(session, recursive=True)  # the target starts from what its history policy shows it
            reply = yield AgentCall(target, tuple(told), session, tool_call=call_id)
        if reply.stream_state == AgentStatusCode.INTERRUPTED:
            return paused_return({}, self.name, session, reply)
        self.replies[session] = reply
        return ActionReturn(
            args={}, type=self.name, result=[{"type": "text", "content": f"Transferred to {self.handoff.name}."}]
        )


def as_handoffs(targets: Iterable[Any] | None) -> list[Handoff]:
    """`targets` (agents or `Handoff`s) as handoffs, their tool names and target names checked unique.

    Raises:
        UserError: Two handoffs share a tool name or a target name.
    """
    result = [t if isinstance(t, Handoff) else Handoff(t) for t in targets or ()]
    for attribute in ("tool_name", "name"):
        seen: set[str] = set()
        for handoff in result:
            value = getattr(handoff, attribute)
            if value in seen:
                raise UserError(f"two handoffs share the {attribute.replace('_', ' ')} {value!r}")
            seen.add(value)
    return result


def reaches(handoff: Handoff, sender: str, memo: set[int] | None = None) -> bool:
    """Whether `sender` is the handoff's target or an agent the target hands to, however deep."""
    if sender == handoff.name:
        return True
    memo = set() if memo is None else memo
    if id(handoff.agent) in memo:
        return False
    memo.add(id(handoff.agent))
    return any(reaches(h, sender, memo) for h in getattr(handoff.agent, "handoffs", ()))


def _is_tool_part(message: AgentMessage) -> bool:
    """A tool call turn or a tool result (never shown across a handoff)."""
    calls = message.formatted.get("tool_calls") if isinstance(message.formatted, dict) else None
    extra = message.extra_info
    return bool(calls) or (isinstance(extra, dict) and "tool_call_id" in extra)


def active(agent: Any, messages: Sequence[AgentMessage]) -> Handoff | None:
    """The sticky handoff the session is with: the last message the user did not write decides."""
    for message in reversed(messages):
        if message.sender == "user":
            continue
        extra = message.extra_info
        if isinstance(extra, dict) and "tool_call_id" in extra:  # a transfer whose target did not answer yet
            return next((h for h in agent.handoffs if h.tool_name == extra.get("name") and h.sticky), None)
        if message.sender == agent.name:
            return None
        return next((h for h in agent.handoffs if h.sticky and reaches(h, message.sender)), None)
    return None


def own_view(agent: Any, messages: Sequence[AgentMessage]) -> list[AgentMessage]:
    """`messages` with the targets' replies as the agent's own turns (what its model is shown)."""
    names = {h.name for h in agent.handoffs}
    return [
        m.model_copy(update={"sender": agent.name}) if m.sender in names and not _is_tool_part(m) else m
        for m in messages
    ]


def _conversation(messages: Sequence[AgentMessage], target: str) -> list[AgentMessage]:
    """The user's messages and the assistant's text turns (as `target`'s own), no tool parts."""
    result = []
    for message in messages:
        if _is_tool_part(message):
            continue
        if message.sender == "user":
            result.append(message.model_copy())
        else:
            result.append(AgentMessage(sender=target, content=message.content))
    return result


def history_flow(agent: Any, handoff: Handoff, session_id: Hashable) -> Flow[list[AgentMessage]]:
    """What `handoff`'s target is told on taking the session (its `Handoff.history`)."""
    memory = agent._memory
    messages = memory.get_memory(session_id) if memory is not None else []
    start, end = _this_turn(messages)
    current = normalize_inputs(messages[start:end])
    if handoff.history == "none":
        return current
    full = _conversation(messages, handoff.name)
    if callable(handoff.history):
        return normalize_inputs(handoff.history(full))
    if handoff.history == "full":
        return full
    earlier = _conversation(messages[:start], handoff.name)
    if not earlier:
        return current
    chat = [{"role": "user" if m.sender == "user" else "assistant", "content": m.content} for m in earlier]
    summary = yield from fold(
        agent._require_llm(), "", chat, session_id, window=_SUMMARY_WINDOW, summary_tokens=_SUMMARY_TOKENS
    )
    note = AgentMessage(sender="user", content=f"Summary of the conversation so far:\n{summary}")
    return [note, *current]


def _this_turn(messages: Sequence[AgentMessage]) -> tuple[int, int]:
    """Where this turn's messages from the user are: the last run of them, before the agent's own work."""
    end = len(messages)
    while end and messages[end - 1].sender != "user":
        end -= 1
    start = end
    while start and messages[start - 1].sender == "user":
        start -= 1
    return start, end


def handing_on(agent: Any, session_id: Hashable) -> PlannedCall | None:
    """The transfer call that hands this turn on, when the session is with a sticky target (else None)."""
    memory = agent._memory
    current = active(agent, memory.get_memory(session_id)) if memory is not None else None
    if current is None:
        return None
    return {"name": current.tool_name, "arguments": {}, "id": f"handoff-{uuid.uuid4().hex[:12]}", "kind": HANDED_ON}


def taken(tool: object, session_id: Hashable) -> AgentMessage | None:
    """The target's reply when `tool` is a handoff that ran for `session_id` (taken out), else None."""
    if not isinstance(tool, HandoffTool):
        return None
    return tool.replies.pop(0 if session_id is None else session_id, None)
