"""Agents in Ray actors: each agent in its own process (optionally holding GPUs), called like a local one.

```python
from plait.distributed.ray_serve import AgentRayActor

agent = AgentRayActor({"type": "plait.agents.Agent", "llm": {...}}, num_gpus=1)
agent("hello", session_id="u1")     # runs in the actor; returns the AgentMessage
agent.state_dict("u1")
```

Needs the ``ray`` extra (``pip install 'plait[ray]'``). `ray.init` is called with its
defaults when no Ray runtime is up yet. The agent class must be importable by the Ray
workers (a module-level class, or a dotted ``type`` path). Streaming agents are served
over HTTP instead (`plait.distributed.http_serve`): an actor call returns one result.

`AgentRayActor` and `AsyncAgentRayActor` are siblings over one core (building the actor,
`reset`, `kill`); the async one awaits `__call__` and `state_dict` (Lagent's async actor
has only an async ``__call__``), and counts as an `AgentRayActor` for ``isinstance``.
"""

from __future__ import annotations

import abc
import asyncio
import importlib
import inspect
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from ..exceptions import MissingDependencyError, UserError
from ..memory.base_memory import MessageLike
from ..schema import AgentMessage
from ..types import SessionId
from ..utils.config import load_class_from_string

__all__ = ["AgentRayActor", "AsyncAgentRayActor"]


class _AgentHost:
    """What runs in the actor: builds the agent there and runs its methods.

    Each method runs in a worker thread, so concurrent sessions of a sync agent do not
    queue; what an async agent returns (a coroutine) is then awaited on the actor's loop.
    """

    def __init__(self, cls: type, kwargs: Mapping[str, object]) -> None:
        self.agent = cls(**kwargs)

    async def method(self, name: str, *args: object, **kwargs: object) -> object:
        """Call the agent's method `name` (``__call__``, ``state_dict``, ``reset``, ``get_steps``...)."""
        result = await asyncio.to_thread(getattr(self.agent, name), *args, **kwargs)
        return await result if inspect.isawaitable(result) else result


def _import_ray() -> ModuleType:
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise MissingDependencyError("ray", extra="ray", feature="AgentRayActor") from None


class _AgentRayActorCore(metaclass=abc.ABCMeta):  # noqa: B024  # ABCMeta for register(), no abstract API
    """What `AgentRayActor` and `AsyncAgentRayActor` share (the arguments are `AgentRayActor`'s)."""

    def __init__(self, config: Mapping[str, object], num_gpus: float | None = None, **remote_options: object) -> None:
        self._ray = _import_ray()
        if not isinstance(config, Mapping) or "type" not in config:
            raise UserError("AgentRayActor needs a config dict with a 'type' (the agent class or its dotted path)")
        kwargs = dict(config)
        cls = kwargs.pop("type")
        if isinstance(cls, str):
            cls = load_class_from_string(cls)
        if getattr(cls, "_stream_forward", False):
            name = cls.__name__ if isinstance(cls, type) else repr(cls)
            raise UserError(f"{name} streams its replies; serve it with plait.distributed.http_serve instead")
        options = dict(remote_options)
        if num_gpus is not None:
            options["num_gpus"] = num_gpus
        host = self._ray.remote(**options)(_AgentHost) if options else self._ray.remote(_AgentHost)
        self.agent_actor = host.remote(cls, kwargs)

    def _remote(self, name: str, *args: object, **kwargs: object) -> Any:
        """The `ray.ObjectRef` of the agent's method `name` called in the actor."""
        return self.agent_actor.method.remote(name, *args, **kwargs)

    def reset(self, session_id: SessionId = 0, keypath: str | None = None, recursive: bool = False) -> None:
        """Forget a session in the actor's agent."""
        self._ray.get(self._remote("reset", session_id, keypath, recursive))

    def kill(self) -> None:
        """End the actor (and the agent in it)."""
        self._ray.kill(self.agent_actor)


class AgentRayActor(_AgentRayActorCore):
    """An agent built from `config` inside a Ray actor.

    Args:
        config: ``{"type": AgentClass or "dotted.path", **constructor arguments}`` (the
            arguments may be config dicts themselves, such as ``llm``).
        num_gpus: GPUs the actor holds (``None``: none).
        **remote_options: Other `ray.remote` options (``num_cpus``, ``runtime_env``...).

    Attributes:
        agent_actor: The Ray actor handle; any agent method is reachable as
            ``ray.get(agent_actor.method.remote("<name>", *args, **kwargs))``.
    """

    def __call__(self, *message: MessageLike, session_id: SessionId = 0, **kwargs: object) -> AgentMessage:
        """The agent's reply, computed in the actor."""
        reply: AgentMessage = self._ray.get(self._remote("__call__", *message, session_id=session_id, **kwargs))
        return reply

    def state_dict(self, session_id: SessionId = 0) -> dict[str, object]:
        """The agent's `state_dict` of a session."""
        state: dict[str, object] = self._ray.get(self._remote("state_dict", session_id))
        return state


class AsyncAgentRayActor(_AgentRayActorCore):
    """`AgentRayActor` whose calls are awaited (for async agents, or to call from an event loop)."""

    async def __call__(self, *message: MessageLike, session_id: SessionId = 0, **kwargs: object) -> AgentMessage:
        """The agent's reply, awaited without blocking the loop."""
        reply: AgentMessage = await self._remote("__call__", *message, session_id=session_id, **kwargs)
        return reply

    async def state_dict(self, session_id: SessionId = 0) -> dict[str, object]:
        """The agent's `state_dict` of a session."""
        state: dict[str, object] = await self._remote("state_dict", session_id)
        return state


AgentRayActor.register(AsyncAgentRayActor)
