"""`Hook`: code that runs around every agent call and tool call, and its `RemovableHandle`."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from ..types import SessionId

if TYPE_CHECKING:
    from ..actions.action_executor import ActionExecutorCore
    from ..agents.agent import AgentCore
    from ..schema import AgentMessage

__all__ = ["Hook", "RemovableHandle"]


class Hook:
    """Override any of the four methods; each may be sync or ``async def`` (async agents await it).

    A method that returns something other than None replaces what it was given: the input
    messages (a list) in `before_agent`, the response in `after_agent`, the tool-call message
    in `before_action`, the tool-result message in `after_action`. `on_agent_error` is told
    when a call raised (after memory was rolled back); the exception then propagates.

    Example:
        ```python
        class Shout(Hook):
            def after_agent(self, agent, message, session_id):
                message.content = message.content.upper()
                return message

        agent.register_hook(Shout())
        ```
    """

    def before_agent(self, agent: AgentCore, messages: list[AgentMessage], session_id: SessionId) -> object:
        """Called with the normalised input messages before they reach memory and `forward`."""
        return None

    def after_agent(self, agent: AgentCore, message: AgentMessage, session_id: SessionId) -> object:
        """Called with the agent's response after it was stored in memory."""
        return None

    def on_resume(self, agent: AgentCore, decisions: Mapping[str, object], session_id: SessionId) -> object:
        """Called when a run paused for approval is taken up with `decisions` (instead of `before_agent`)."""
        return None

    def on_agent_error(self, agent: AgentCore, error: BaseException, session_id: SessionId) -> object:
        """Called when the agent's call raised `error` (memory is already rolled back)."""
        return None

    def before_action(self, executor: ActionExecutorCore, message: AgentMessage, session_id: SessionId) -> object:
        """Called with the tool-call message before the executor dispatches it."""
        return None

    def after_action(self, executor: ActionExecutorCore, message: AgentMessage, session_id: SessionId) -> object:
        """Called with the message holding the tool's `ActionReturn`."""
        return None


class _Registry(Protocol):
    """What a handle unregisters from: a dict of hooks (or interceptors) keyed by handle id."""

    def pop(self, key: int, default: None, /) -> object:
        """Remove `key` if present."""
        ...


class RemovableHandle:
    """Returned by ``register_hook``; `remove()` (idempotent) unregisters the hook.

    Also a context manager: the hook is removed when the block ends.
    """

    _ids = itertools.count()

    def __init__(self, hooks_dict: _Registry, *more: _Registry) -> None:
        self.hooks_dict = hooks_dict
        self.more = more
        self.id = next(RemovableHandle._ids)

    def remove(self) -> None:
        """Unregister the hook (from every registry it went into); calling it again does nothing."""
        self.hooks_dict.pop(self.id, None)
        for registry in self.more:
            registry.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.remove()
