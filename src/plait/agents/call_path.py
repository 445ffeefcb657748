"""The agent call path, written once.

``normalise -> before_agent hooks -> memory -> forward -> memory -> after_agent hooks``
(on failure: roll memory back -> on_agent_error hooks -> raise)

`agent_call_flow` is a flow (see `plait.effects`); `Agent.__call__` hands it to its class's
driver (`plait.driver`), so `Agent`, `AsyncAgent`, `StreamingAgent` and `AsyncStreamingAgent`
share every line of it, and a parent agent runs a sub-agent's call path in its own driver
(`AgentCall`). A failing `forward` leaves the session's memory as it was; so does a cancelled
or interrupted call (the after-error hooks see the `CancelledError` / `KeyboardInterrupt`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from ..effects import Call, Flow, HookCall
from ..exceptions import SessionBusyError, UserError
from ..memory.base_memory import MessageLike, to_message
from ..memory.manager import MemoryManager
from ..schema import AgentMessage
from ..untrusted import clean_text

__all__ = ["CallPathAgent", "agent_call_flow", "normalize_inputs"]


class CallPathAgent(Protocol):
    """What the call path needs of an agent (every `AgentCore` is one)."""

    name: str
    _memory: MemoryManager | None
    _hooks: dict[int, Any]
    _calls: dict[Hashable, object]
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
            message = item.model_copy(deep=True)
        elif isinstance(item, (str, Mapping)):
            message = to_message(item)
        else:
            raise UserError(f"agents take AgentMessage, str or dict inputs, not {type(item).__name__}")
        if isinstance(message.content, str):
            message.content = clean_text(message.content)
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

    Raises:
        SessionBusyError: Another call of this agent on `session_id` has not finished
            (agents with memory take one call per session at a time).
    """
    memory = agent._memory
    token = object()
    if memory is not None and agent._calls.setdefault(session_id, token) is not token:  # atomic across threads
        raise SessionBusyError(agent.name, session_id)
    try:
        inputs = normalize_inputs(messages)
        for hook in list(agent._hooks.values()):
            replaced = yield HookCall(hook.before_agent, (agent, inputs, session_id))
            if replaced is not None:
                inputs = _replacement(replaced)
        mark = memory.length(session_id) if memory is not None else 0
        turn = memory.open_turn(session_id, mark) if memory is not None else None
        agent.update_memory(inputs, session_id)
        try:
            if getattr(type(agent).forward, "__plait_forward__", False):
                raw = yield from agent.forward_flow(inputs, session_id, kwargs)
            else:  # a user-defined forward
                raw = yield Call(
                    agent.forward, tuple(inputs), {"session_id": session_id, **kwargs}, stream=agent._stream_forward
                )
        except BaseException as error:
            if memory is not None:
                memory.truncate(session_id, mark)
                if turn is not None:
                    turn.abandon()
            if not isinstance(error, GeneratorExit):  # a closed flow must not yield
                yield from _tell_error(agent, error, session_id)
            raise
        response = raw if isinstance(raw, AgentMessage) else AgentMessage(sender=agent.name, content=raw)
        agent.update_memory(response, session_id)
        if turn is not None:  # the turn is on disk before the call returns
            yield Call(turn.commit)
        output = response.model_copy()  # hooks and callers may reassign fields without touching memory
        for hook in list(agent._hooks.values()):
            replaced = yield HookCall(hook.after_agent, (agent, output, session_id))
            if replaced is not None:
                output = replaced
        return output
    finally:
        if memory is not None:
            agent._calls.pop(session_id, None)
