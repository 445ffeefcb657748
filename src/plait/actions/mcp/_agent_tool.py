"""An agent as one tool (private): what `MCPServer([agent])` serves.

The tool takes ``message`` and returns the agent's reply text. Sync and async agents (and
streaming ones) run through the one helper the HTTP server uses
(`plait.distributed.http_serve._calls.agent_chunks`): a sync agent on a worker thread, an
async one on the serving loop. Each caller's ``session_id`` is the agent's session, so
each MCP client has its own conversation; ending the session forgets it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import cast

from ...agents.module import AgentModule
from ...distributed.http_serve._calls import agent_chunks
from ...schema import ActionReturn, ActionStatusCode, AgentMessage, AgentStatusCode
from ...untrusted import as_text
from ..base_action import AsyncActionMixin, BaseAction

__all__ = ["AgentTool"]


class AgentTool(AsyncActionMixin, BaseAction, register=False):
    """`agent` as a tool named after it, with one parameter, ``message``.

    Args:
        agent: A sync or async plait agent.
    """

    def __init__(self, agent: AgentModule) -> None:
        self.agent = agent
        name = str(getattr(agent, "name", "") or type(agent).__name__)
        description = str(getattr(agent, "description", "") or f"Send a message to the agent {name}; get its reply.")
        super().__init__(
            {
                "name": name,
                "description": description,
                "parameters": [{"name": "message", "type": "STRING", "description": "What to tell the agent."}],
                "required": ["message"],
            }
        )

    async def run(self, message: str, session_id: Hashable = 0) -> ActionReturn:
        """Send `message` to the agent in the caller's session; its reply is the result."""
        reply: AgentMessage | None = None
        agent = cast(Callable[..., object], self.agent)  # every agent is callable; AgentModule does not declare it
        async for chunk in agent_chunks(agent, [message], {"session_id": session_id}):
            reply = chunk
        if reply is None:
            return ActionReturn(errmsg=f"{self.name} did not reply", state=ActionStatusCode.API_ERROR)
        if reply.stream_state == AgentStatusCode.INTERRUPTED:
            self.agent.reset(session_id, recursive=True)  # nobody over MCP can approve: drop the paused run
            text = f"{self.name} paused for a person's approval of a tool call; that cannot be given over MCP"
            return ActionReturn(errmsg=text, state=ActionStatusCode.API_ERROR)
        return ActionReturn(result=[{"type": "text", "content": as_text(reply.content)}])

    def close_session(self, session_id: Hashable) -> None:
        """Forget the agent's conversation of `session_id` (the MCP session ended)."""
        self.agent.reset(session_id, recursive=True)
