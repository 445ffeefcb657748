"""The agent call path, written once.

``normalise -> before_agent hooks -> memory -> forward -> output type -> memory + commit -> after_agent hooks``
(on failure, a failed commit included: roll memory back -> on_agent_error hooks -> raise)

`agent_call_flow` is a flow (see `plait.effects`); `Agent.__call__` hands it to its class's
driver (`plait.driver`), so `Agent`, `AsyncAgent`, `StreamingAgent` and `AsyncStreamingAgent`
share every line of it, and a parent agent runs a sub-agent's call path in its own driver
(`AgentCall`). A failing `forward` leaves the session's memory as it was; so does a cancelled
or interrupted call (the after-error hooks see the `CancelledError` / `KeyboardInterrupt`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..effects import Call, Flow, HookCall, in_place, perform
from ..exceptions import GuardrailTripped, ResumeError, SessionBusyError, UserError
from ..interceptors import GLOBAL_INTERCEPTORS, AgentRun
from ..memory.base_memory import MessageLike, to_message
from ..memory.manager import MemoryManager
from ..schema import AgentMessage, AgentStatusCode, owned_copy, shallow_copy
from ..sessions import SessionRegistry
from ..untrusted import clean_text
from .decisions import decide
from .run_state import RunState
from .tool_loop import LoopAgent

if TYPE_CHECKING:
    from ..memory.session_store import Turn

__all__ = ["CallPathAgent", "agent_call_flow", "agent_resume_flow", "normalize_inputs"]


class CallPathAgent(LoopAgent, Protocol):
    """What the call path needs of an agent (every `AgentCore` is one)."""

    name: str
    _memory: MemoryManager | None
    _hooks: dict[int, Any]
    _session_registry: SessionRegistry
    _session_path: str
    _stream_forward: ClassVar[bool]

    @property
    def forward(self) -> Callable[..., Any]:
        """The agent's ``forward`` (a user's own, or the mode class's driving `forward_flow`)."""
        ...

    def forward_flow(
        self, inputs: Sequence[AgentMessage], session_id: Hashable, kwargs: Mapping[str, object]
    ) -> Flow[AgentMessage]:
        """What the agent does with its inputs, as a flow."""
        ...

    def update_memory(self, message: MessageLike | Sequence[MessageLike] | None, session_id: Hashable = 0) -> None:
        """Add messages to a session's memory."""
        ...

    def _refresh_part(self, session_id: Hashable) -> None:
        """Read the agent's part of a session back when a shared store holds a newer one."""
        ...

    def run_state(self, session_id: Hashable = 0) -> RunState | None:
        """The state of the session's unfinished tool-loop run."""
        ...

    def resume_flow(self, session_id: Hashable, kwargs: Mapping[str, object]) -> Flow[AgentMessage]:
        """The session's paused run, going on (its decisions recorded)."""
        ...

    def output_flow(
        self, reply: AgentMessage, session_id: Hashable, kwargs: Mapping[str, object]
    ) -> Flow[AgentMessage]:
        """The reply as the agent's output type (validated, re-asked for), or as it is."""
        ...


def normalize_inputs(messages: Iterable[Any]) -> list[AgentMessage]:
    """Turn call inputs into fresh `AgentMessage` objects the agent owns.

    Strings become user messages; messages are deep-copied (one message each, never the
    history) so hooks and memory never alias the caller's objects. None inputs are dropped.
    Text content is cleaned (`plait.untrusted.clean_text`): a lone surrogate a caller sends
    never reaches memory.
    """
    result: list[AgentMessage] = []
    for item in messages:
        if item is None:
            continue
        if isinstance(item, AgentMessage):
            message = owned_copy(item)
        elif isinstance(item, (str, Mapping)):
            message = to_message(item)
        else:
            raise UserError(f"agents take AgentMessage, str or dict inputs, not {type(item).__name__}")
        if isinstance(message.content, str):
            cleaned = clean_text(message.content)
            if cleaned is not message.content:  # assigned only when it changes (an assignment is validated)
                message.content = cleaned
        result.append(message)
    return result


def _replacement(value: Any) -> list[AgentMessage]:
    if isinstance(value, (AgentMessage, str, Mapping)):
        return normalize_inputs([value])
    return normalize_inputs(value)


def _tell_error(agent: CallPathAgent, error: BaseException, session_id: Hashable) -> Flow[None]:
    """The ``on_agent_error`` hooks of a failed call (hooks need not derive from `Hook`)."""
    for hook in list(agent._hooks.values()):
        told = getattr(hook, "on_agent_error", None)
        if told is not None:
            yield HookCall(told, (agent, error, session_id))


def agent_call_flow(
    agent: CallPathAgent, messages: tuple[Any, ...], session_id: Hashable, kwargs: Mapping[str, object]
) -> Flow[AgentMessage]:
    """One agent call as a flow; the result is the response after the after-hooks ran.

    A tool-using run that pauses for approval answers with an ``INTERRUPTED`` message: it is
    not stored (the turn's messages so far are), and the session waits for `agent_resume_flow`.

    Raises:
        SessionBusyError: Another call of this agent on `session_id` has not finished
            (agents with memory take one call per session at a time).
        ResumeError: The session's run waits for decisions on tool calls.
    """
    if GLOBAL_INTERCEPTORS:  # process-wide interceptors (plait.tracing) see the whole call
        steps = partial(_guarded, agent, session_id, kwargs, messages, None)
        return (yield from perform(AgentRun(agent, messages, session_id, steps)))
    return (yield from _guarded(agent, session_id, kwargs, messages, None))


def agent_resume_flow(
    agent: CallPathAgent, decisions: Mapping[str, object], session_id: Hashable, kwargs: Mapping[str, object]
) -> Flow[AgentMessage]:
    """Take a paused run up again with a person's decisions (see `plait.agents.decisions.decide`).

    The run goes on where it stopped; its reply is stored and passes the after-hooks like any
    call's. A resume that fails rolls the session back to before the paused call began (the
    calls that ran are not run again: the run is over).

    Raises:
        ResumeError: Nothing waits for a decision on `session_id`, or a decision does not fit.
    """
    if GLOBAL_INTERCEPTORS:
        steps = partial(_guarded, agent, session_id, kwargs, (), decisions)
        return (yield from perform(AgentRun(agent, (), session_id, steps)))
    return (yield from _guarded(agent, session_id, kwargs, (), decisions))


def _guarded(
    agent: CallPathAgent,
    session_id: Hashable,
    kwargs: Mapping[str, object],
    messages: tuple[Any, ...],
    decisions: Mapping[str, object] | None,
) -> Flow[AgentMessage]:
    """The call path of a call (`decisions` None) or a resume, one at a time per session."""
    memory = agent._memory
    token = object()
    registry, path = agent._session_registry, agent._session_path
    session = registry.session(session_id) if memory is not None else None
    if session is not None and not session.claim(path, token):  # one call per agent and session
        raise SessionBusyError(agent.name, session_id)
    try:
        if session is not None:  # another worker may have taken turns on it (a shared store): read it back
            agent._refresh_part(session_id)
        inputs, mark = yield from _opening(agent, session_id, messages, decisions)
        # a crash mid-call drops what the call added (a resume: what it adds to the paused turn, which stays)
        if memory is not None:  # a call's mark is the length now; a resume's, where its paused call began
            start = mark if decisions is None else memory.length(session_id)
            turn = registry.open_turn(session_id, path, memory.make, start)
        else:
            turn = None
        agent.update_memory(inputs, session_id)
        try:
            raw = yield from _forward(agent, inputs, session_id, kwargs, resuming=decisions is not None)
            response = raw if isinstance(raw, AgentMessage) else AgentMessage(sender=agent.name, content=raw)
            paused = response.stream_state == AgentStatusCode.INTERRUPTED
            if not paused:
                response = yield from agent.output_flow(response, session_id, kwargs)  # typed: valid or raise
                if getattr(agent, "output_guardrails", None):
                    yield from _guard(agent, "output", [response])  # a refused reply rolls the turn back
            yield from _keep(agent, response, session_id, mark, turn)  # a turn the store refuses rolls back too
        except BaseException as error:
            if memory is not None:
                memory.truncate(session_id, mark)
                if turn is not None:
                    turn.abandon()
            agent.set_run_state(None, session_id)  # a failed run is over (what ran does not run again)
            if not isinstance(error, GeneratorExit):  # a closed flow must not yield
                yield from _tell_error(agent, error, session_id)
            raise
        if memory is not None and not paused:
            memory.cap(session_id)  # an explicit storage cap (max_messages), between whole calls
        output = shallow_copy(response)  # hooks and callers may reassign fields without touching memory
        for hook in list(agent._hooks.values()) if agent._hooks else ():
            replaced = yield HookCall(hook.after_agent, (agent, output, session_id))
            if replaced is not None:
                output = replaced
        return output
    finally:
        if session is not None:
            session.release(path, token)


def _keep(
    agent: CallPathAgent, response: AgentMessage, session_id: Hashable, mark: int, turn: Turn | None
) -> Flow[None]:
    """Store a finished call's reply (a paused run: its state) and commit the turn (the call's commit point).

    Raises:
        SessionStoreError: The store could not keep the turn (the call path rolls it back).
    """
    if response.stream_state == AgentStatusCode.INTERRUPTED:
        run = agent.run_state(session_id)
        if run is not None:
            if run.turn_start is None:
                run.turn_start = mark  # what a failed resume rolls back to
            agent.keep_paused_run(run, session_id)  # on disk with the turn, where a SessionStore keeps it
    else:
        agent.update_memory(response, session_id)
    if turn is not None:  # the turn is on disk before the call returns
        yield Call(turn.commit)


def _opening(
    agent: CallPathAgent, session_id: Hashable, messages: tuple[Any, ...], decisions: Mapping[str, object] | None
) -> Flow[tuple[list[AgentMessage], int]]:
    """``(inputs, mark)``: a call's inputs after the before-hooks, or a resume's decisions recorded.

    `mark` is the memory length a failure rolls back to: now for a call, where the paused
    call began for a resume.
    """
    memory = agent._memory
    paused = agent.run_state(session_id)
    if decisions is not None:
        if paused is None or not (paused.waiting or paused.pending):
            raise ResumeError(f"{agent.name} has no paused run to resume in session {session_id!r}", session_id)
        decide(paused, decisions, session_id, agent)
        for hook in list(agent._hooks.values()):
            told = getattr(hook, "on_resume", None)
            if told is not None:
                yield HookCall(told, (agent, dict(decisions), session_id))
        if paused.turn_start is not None:
            return [], paused.turn_start
        return [], memory.length(session_id) if memory is not None else 0
    if paused is not None and paused.waiting:
        raise ResumeError(
            f"{agent.name} waits for decisions on tool calls {paused.waiting} in session {session_id!r}: "
            "resume(decisions, session_id=...) first, or reset the session",
            session_id,
            paused.waiting,
        )
    inputs = normalize_inputs(messages)
    for hook in list(agent._hooks.values()) if agent._hooks else ():
        replaced = yield HookCall(hook.before_agent, (agent, inputs, session_id))
        if replaced is not None:
            inputs = _replacement(replaced)
    if getattr(agent, "input_guardrails", None):
        yield from _guard(agent, "input", inputs)
    return inputs, memory.length(session_id) if memory is not None else 0


def _guard(agent: CallPathAgent, stage: str, messages: Sequence[AgentMessage]) -> Flow[None]:
    """Run the agent's `stage` guardrails on the text of `messages`; the first refusal raises."""
    guardrails = getattr(agent, f"{stage}_guardrails", ())
    if not guardrails:
        return
    text = "\n".join(m.content if isinstance(m.content, str) else str(m.content) for m in messages)
    for guardrail in guardrails:
        reason = yield Call(guardrail, (text,))
        if reason is not None:
            raise GuardrailTripped(str(reason), guardrail, stage)


def _forward(
    agent: CallPathAgent, inputs: list[AgentMessage], session_id: Hashable, kwargs: Mapping[str, object], resuming: bool
) -> Flow[Any]:
    """What the agent answers: its paused run going on, its `forward_flow`, or a user-defined ``forward``."""
    if resuming:
        return (yield from agent.resume_flow(session_id, kwargs))
    if in_place(agent, "forward"):
        return (yield from agent.forward_flow(inputs, session_id, kwargs))
    return (
        yield Call(agent.forward, tuple(inputs), {"session_id": session_id, **kwargs}, stream=agent._stream_forward)
    )
