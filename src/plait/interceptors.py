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

`register_global_interceptor` registers one for the whole process (every agent, executor
and tool call, created before or after): the drivers run it inside the interceptors of the
tree, and while any is registered each agent call is also an `AgentRun` effect, so it sees
where every agent call begins and ends (`plait.tracing` uses this). With none registered
this costs one emptiness check per run.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .effects import Call, Composite, Effect, Flow

if TYPE_CHECKING:
    from .agents.module import AgentModule
    from .hooks.hook import RemovableHandle
    from .schema import AgentMessage

__all__ = ["AgentRun", "Interceptor", "intercept", "register_global_interceptor", "register_interceptor"]

GLOBAL_INTERCEPTORS: dict[int, Interceptor] = {}
"""The process-wide interceptors by handle id (`register_global_interceptor`); the drivers read it."""

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


def register_global_interceptor(interceptor: Interceptor) -> RemovableHandle:
    """Run `interceptor` around the effects of every agent, executor and tool call of the process.

    It sits inside the interceptors registered on an agent tree (it sees what they let
    through, as it is performed) and sees each agent call as an `AgentRun`. The handle's
    `remove()` unregisters it.
    """
    from .hooks.hook import RemovableHandle

    handle = RemovableHandle(GLOBAL_INTERCEPTORS)
    GLOBAL_INTERCEPTORS[handle.id] = interceptor
    return handle


@dataclass(frozen=True, slots=True, eq=False)
class AgentRun(Composite["AgentMessage"]):
    """One agent call (or resume) from its first step to its reply, made an effect while global interceptors exist.

    Its steps always run in place; an interceptor that names it sees the call's inputs and
    its reply or error, with every effect of the call (model, tools, sub-agents) inside.

    Attributes:
        agent: The agent called.
        messages: The call's inputs as given (empty for a resume).
        session_id: The session.
        steps: Makes the call path's flow.
    """

    agent: Any
    messages: tuple[object, ...]
    session_id: Hashable
    steps: Callable[[], Flow[AgentMessage]]

    def flow(self) -> Flow[AgentMessage]:
        """The agent's call path."""
        return self.steps()

    def call(self) -> Call[AgentMessage]:  # pragma: no cover - always inline
        """Not used: an agent run always runs in place."""
        raise NotImplementedError("an AgentRun runs in place")
