"""`MessageLogger`: log every message passing through agents and executors."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..types import SessionId
from .hook import Hook

if TYPE_CHECKING:
    from ..actions.action_executor import ActionExecutorCore
    from ..agents.agent import AgentCore
    from ..schema import AgentMessage

__all__ = ["MessageLogger"]


def _describe(message: object) -> str:
    sender = getattr(message, "sender", "?")
    content = getattr(message, "content", message)
    return f"{sender}: {content}"


class MessageLogger(Hook):
    """Logs messages at the four hook points through the stdlib logger `name`.

    No handler is added unless `add_handler=True`, and then only once per logger, so
    creating several loggers never duplicates lines.

    Args:
        name: Logger name (a child of ``plait`` by default).
        level: Level of the records.
        add_handler: Attach a stream handler if the logger has none yet.
    """

    def __init__(self, name: str = "plait.messages", level: int = logging.INFO, add_handler: bool = False) -> None:
        self.logger = logging.getLogger(name)
        self.level = level
        if add_handler and not self.logger.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
            self.logger.addHandler(handler)
            self.logger.setLevel(min(level, self.logger.level or level))

    def _log(self, where: str, owner: object, session_id: SessionId, message: object) -> None:
        if self.logger.isEnabledFor(self.level):
            name = getattr(owner, "name", type(owner).__name__)
            self.logger.log(self.level, "[%s %s session=%s] %s", where, name, session_id, _describe(message))

    def before_agent(self, agent: AgentCore, messages: list[AgentMessage], session_id: SessionId) -> None:
        """Log each input message."""
        for message in messages:
            self._log("agent-in", agent, session_id, message)

    def after_agent(self, agent: AgentCore, message: AgentMessage, session_id: SessionId) -> None:
        """Log the response."""
        self._log("agent-out", agent, session_id, message)

    def before_action(self, executor: ActionExecutorCore, message: AgentMessage, session_id: SessionId) -> None:
        """Log the tool call."""
        self._log("action-in", executor, session_id, message)

    def after_action(self, executor: ActionExecutorCore, message: AgentMessage, session_id: SessionId) -> None:
        """Log the tool result."""
        self._log("action-out", executor, session_id, message)
