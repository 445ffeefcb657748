"""`ToolLoopCore`: the base of every agent that runs the tool loop (and so can pause and resume)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from ..effects import Flow
from ..schema import AgentMessage
from .agent import AgentCore
from .tool_loop import LoopProtocol, run_tool_loop

__all__ = ["ToolLoopCore"]


class ToolLoopCore(AgentCore):
    """An agent whose `forward_flow` is its paradigm's `LoopProtocol` on the tool loop.

    A subclass names its protocol (`loop_protocol`) and sets ``max_turn`` (the budget of
    model calls); a run and a paused run taken up again (`resume_flow`) both go through
    `run_tool_loop`.
    """

    max_turn: int

    def loop_budget(self) -> int:
        """Model calls a run may make: ``max_turn`` (a paradigm may count its budget otherwise)."""
        return self.max_turn

    def loop_protocol(self, inputs: Sequence[AgentMessage] = ()) -> LoopProtocol[Any]:
        """This agent's paradigm on the tool loop, for a new run (`inputs`) or a paused one."""
        raise NotImplementedError(f"{type(self).__name__} names no loop protocol")

    def forward_flow(
        self, inputs: Sequence[AgentMessage], session_id: Hashable, kwargs: Mapping[str, object]
    ) -> Flow[AgentMessage]:
        """Model calls and tool calls until the paradigm answers, within `loop_budget` model calls."""
        return (yield from run_tool_loop(self.loop_protocol(inputs), self.loop_budget(), session_id, kwargs))

    def resume_flow(self, session_id: Hashable, kwargs: Mapping[str, object]) -> Flow[AgentMessage]:
        """The session's paused run, going on where it stopped."""
        state = self.run_state(session_id)
        return (yield from run_tool_loop(self.loop_protocol(()), self.loop_budget(), session_id, kwargs, state=state))
