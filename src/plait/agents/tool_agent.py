"""`ToolLoopCore`: the base of every agent that runs the tool loop (and so can pause and resume)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from ..effects import Flow
from ..exceptions import UserError
from ..schema import AgentMessage
from .agent import AgentCore
from .tool_loop import REPEAT_CALLS, LoopProtocol, RepeatCalls, run_tool_loop

__all__ = ["ToolLoopCore"]


class ToolLoopCore(AgentCore):
    """An agent whose `forward_flow` is its paradigm's `LoopProtocol` on the tool loop.

    A subclass names its protocol (`loop_protocol`) and sets ``max_turn`` (the budget of
    model calls); a run and a paused run taken up again (`resume_flow`) both go through
    `run_tool_loop`.
    """

    max_turn: int
    repeat_calls: RepeatCalls

    def __init__(self, *args: Any, repeat_calls: RepeatCalls = "reuse", **kwargs: Any) -> None:
        """Takes the loop's own setting; the rest goes to the agent (`AgentCore`).

        Args:
            *args: The agent's arguments.
            repeat_calls: A call identical to one this run already made (same tool, same
                arguments): ``'reuse'`` answers it with the earlier result and a note, without
                running it (and when a reply only repeats calls, the final answer is asked
                for next); ``'error'`` answers it with an error saying so; ``'run'`` runs it again.
            **kwargs: The agent's keyword arguments.

        Raises:
            UserError: `repeat_calls` is none of these.
        """
        if repeat_calls not in REPEAT_CALLS:
            raise UserError(f"repeat_calls must be one of {list(REPEAT_CALLS)}, got {repeat_calls!r}")
        super().__init__(*args, **kwargs)
        self.repeat_calls = repeat_calls

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
