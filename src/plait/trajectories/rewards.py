"""Rewards: a number for a trajectory, from a user function or from an environment agent in the loop.

A trajectory's reward comes from one of three places:

* ``plait eval``'s scorer: the case's ``score`` (`plait.trajectories.from_eval`), unless
* a reward function is given: ``reward(trajectory) -> float`` (sync or async), called with the
  finished `Trajectory` (its messages, tools, per-step outcomes, and in ``metadata`` the case's
  ``input``, ``expected`` and the scorer's ``score``) — ``plait eval --reward MODULE:FN`` or
  ``evaluate(..., reward=fn)``; or
* an environment agent (`EnvironmentReward`): a plait agent that is shown the conversation
  and whose reply is the reward (the first number in it).

Per-step outcomes are the trajectory's `StepOutcome` list: a tool call that failed is marked
``"tool_error"`` by the source. A reward function that raises, or returns something that is not
a finite number, makes the case's ``error`` (the run goes on), as a scorer's failure does.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import re
from collections.abc import Awaitable, Callable
from typing import Any, Union

from ..exceptions import UserError
from ..utils.loading import load_object
from .record import Trajectory

__all__ = ["EnvironmentReward", "RewardFn", "load_reward", "reward_of"]

RewardFn = Callable[[Trajectory], Union[float, Awaitable[float]]]
"""``fn(trajectory) -> float`` (or an awaitable of one)."""

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def load_reward(reward: Union[str, RewardFn]) -> RewardFn:
    """A reward function: itself, or the one ``MODULE:FN`` names.

    Raises:
        UserError: ``MODULE:FN`` does not name a callable.
    """
    if callable(reward):
        return reward
    found = load_object(reward, "--reward")
    if not callable(found):
        raise UserError(f"--reward {reward!r} is not a function")
    fn: RewardFn = found
    return fn


async def reward_of(fn: RewardFn, trajectory: Trajectory) -> float:
    """`fn`'s reward for `trajectory`, awaited when `fn` is async.

    Raises:
        UserError: `fn` returned something that is not a finite number.
    """
    value: Any = fn(trajectory)
    if inspect.isawaitable(value):
        value = await value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UserError(f"a reward function returns a finite number, not {value!r}"[:200])
    return float(value)


class EnvironmentReward:
    """A plait agent in the loop as the reward: it is shown the conversation, its reply's first number is the reward.

    Args:
        agent: A plait agent (sync or async, e.g. ``Agent(llm, "Rate the answer from 0 to 1...")``).
            Each trajectory is judged in its own session (the trajectory's id), forgotten afterwards.
        instruction: What the agent is asked, before the conversation (JSON of its messages).

    Example:
        ```python
        judge = EnvironmentReward(Agent(llm, "You grade answers. Reply with a number from 0 to 1."))
        evaluate(factory, "cases.jsonl", "runs/x", reward=judge)
        ```
    """

    def __init__(self, agent: Any, instruction: str = "Rate how well the assistant did, from 0 to 1.") -> None:
        if not callable(agent):
            raise UserError(f"EnvironmentReward needs an agent, not {type(agent).__name__}")
        self.agent = agent
        self.instruction = instruction

    async def __call__(self, trajectory: Trajectory) -> float:
        """The agent's reward for `trajectory`.

        Raises:
            UserError: The agent's reply holds no number.
        """
        text = f"{self.instruction}\n\n{json.dumps(trajectory.messages, ensure_ascii=False)}"
        if trajectory.metadata.get("expected") is not None:
            text += f"\n\nExpected answer: {json.dumps(trajectory.metadata['expected'], ensure_ascii=False)}"
        session = f"reward-{trajectory.id}"
        if inspect.iscoroutinefunction(getattr(self.agent, "forward", None)):
            reply = await self.agent(text, session_id=session)
        else:
            reply = await asyncio.to_thread(self.agent, text, session_id=session)
        if callable(getattr(self.agent, "reset", None)):
            self.agent.reset(session)
        content = getattr(reply, "content", reply)
        found = _NUMBER.search(str(content))
        if found is None:
            raise UserError(f"the environment agent's reply has no number: {str(content)[:100]!r}")
        return float(found.group())
