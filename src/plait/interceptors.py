"""Interceptors: middleware around effects, registered on an agent tree.

Cross-cutting features (record/replay, tracing, fault injection, and later approval and
budgets) are written as interceptors instead of patching attributes. An interceptor's
`Interceptor.around` is a flow (see `plait.effects`): it receives every effect of the
kinds it names and decides what happens::

    class NoNetwork(Interceptor):
        effects = (ModelCall,)

        def around(self, effect):
            if effect.params.get("tools"):
                raise UserError("tools are off today")
            return (yield effect)          # perform it as asked

    with intercept(agent, NoNetwork()):
        agent("hi")

Because `around` is a flow, one interceptor works in sync, async and streaming mode.
Interceptors registered on an agent see the effects of its whole tree that run in its
driver (sub-agents, executors, tools); `intercept` registers them on every agent of a tree
so that sub-agents called on their own are covered too. The first registered is the
outermost.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from .effects import Effect, Flow

if TYPE_CHECKING:
    from .agents.module import AgentModule
    from .hooks.hook import RemovableHandle

__all__ = ["Interceptor", "intercept", "register_interceptor"]

R = TypeVar("R")


class Interceptor:
    """Middleware around effects: ``around(effect)`` is a flow that decides what the effect yields.

    ``return (yield effect)`` performs the effect as asked (the default); an interceptor may
    instead return a value without yielding (replay), yield a changed effect (a recording
    stand-in for the model), yield other effects first, or catch and translate errors.

    Attributes:
        effects: The effect classes this interceptor sees; others pass by at no cost.
    """

    effects: tuple[type[Effect[Any]], ...] = (Effect,)

    def around(self, effect: Effect[R]) -> Flow[R]:
        """Perform `effect` (override to change what happens)."""
        result: R = yield effect
        return result

    def reset(self, session_id: Hashable) -> None:
        """Forget what this interceptor keeps for a session (called by `AgentModule.reset`)."""


def register_interceptor(agent: AgentModule, interceptor: Interceptor) -> RemovableHandle:
    """Register `interceptor` on `agent` and every sub-agent; the handle's `remove()` unregisters it."""
    from .hooks.hook import RemovableHandle

    registries = [module._interceptors for module in agent.agents()]
    handle = RemovableHandle(*registries)
    for registry in registries:
        registry[handle.id] = interceptor
    return handle


@contextmanager
def intercept(agent: AgentModule, *interceptors: Interceptor) -> Iterator[None]:
    """Register `interceptors` on `agent`'s tree while the block runs."""
    handles = [register_interceptor(agent, interceptor) for interceptor in interceptors]
    try:
        yield
    finally:
        for handle in reversed(handles):
            handle.remove()
