"""An agent as one tool (private): what `MCPServer([agent])` serves.

The tool is `plait.agents.agent_tool.AgentTool` (what ``agent.as_tool()`` builds) with one
``message`` parameter and ``history="caller"``: each MCP client's ``session_id`` is the
agent's own session, so each client has its own conversation; ending the session forgets
it. Its call is awaited (the server's executor is async): the agent's call path runs in
that driver, a sync agent's model calls in worker threads. A tool call that needs a
person's approval cannot be approved over MCP: the paused run is dropped and the client
gets an error.
"""

from __future__ import annotations

from collections.abc import Hashable

from ...agents.agent_tool import AgentTool as _AgentAsTool
from ...agents.module import AgentModule
from ..base_action import AsyncActionMixin

__all__ = ["AgentTool"]


class AgentTool(AsyncActionMixin, _AgentAsTool, register=False):
    """`agent` as an awaited tool named after it, with one parameter, ``message``.

    Args:
        agent: A sync or async plait agent.
    """

    def __init__(self, agent: AgentModule) -> None:
        super().__init__(agent, history="caller")

    def close_session(self, session_id: Hashable) -> None:
        """Forget the agent's conversation of `session_id` (the MCP session ended)."""
        self.agent.reset(session_id, recursive=True)
