"""`RayBackend`: an evaluation's cases answered by a pool of Ray actors (``plait eval --ray``).

Each actor is an `AgentRayActor` whose agent is a `CaseRunner` (the factory runs in the actor,
so the model clients and tools live there); the driver hands each case to the actor with the
fewest cases in flight and writes the results as they arrive, so the files and the
resumability are those of a local run (`plait.eval.runner`). With no cluster address (and
no ``$RAY_ADDRESS``) a local Ray runtime starts, with the driver's ``sys.path`` on the
workers' ``PYTHONPATH`` so they import the factory's module as the driver does; it stops
when the run ends.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any, Union

from ..distributed.ray_serve import AgentRayActor
from ..llms._optional import import_optional
from ..types import JSONValue
from .case_runner import AgentFactory, CaseRunner
from .cases import CaseId

__all__ = ["RayBackend"]


class RayBackend:
    """A pool of actors, each running a `CaseRunner` over the factory's agent.

    Args:
        factory: The agent factory (``'MODULE:FACTORY'``, or a function the workers can import).
        concurrency: Cases in flight at once (the pool is at most this big).
        address: The Ray cluster to join (None: ``$RAY_ADDRESS``, else a local runtime).
        actors: The pool's size (None: one per CPU of the cluster, at most `concurrency`).
    """

    def __init__(
        self,
        factory: Union[AgentFactory, str],
        concurrency: int = 8,
        address: str | None = None,
        actors: int | None = None,
    ) -> None:
        self._ray = import_optional("ray", extra="ray", feature="plait eval --ray")
        self._started = False
        if not self._ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
            if address is None and not os.environ.get("RAY_ADDRESS"):
                paths = [os.getcwd(), *(p for p in sys.path if p and os.path.isdir(p))]
                options["runtime_env"] = {"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}}
            self._ray.init(address=address, **options)
            self._started = True
        if actors is None:
            cpus = int(self._ray.cluster_resources().get("CPU", 1))
            actors = max(1, min(concurrency, cpus))
        config = {"type": CaseRunner, "factory": factory}
        self.pool = [AgentRayActor(config) for _ in range(actors)]
        self._load = [0] * actors

    async def describe(self) -> dict[str, JSONValue]:
        """The agent's profile, from the first actor."""
        profile: dict[str, JSONValue] = await self.pool[0].agent_actor.method.remote("describe")
        return profile

    async def run(
        self,
        case_id: CaseId,
        text: str,
        timeout: float | None,
        sample: int | None = None,
        gen: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One case's answer (`CaseRunner.run`), from the actor with the fewest cases in flight."""
        index = min(range(len(self.pool)), key=self._load.__getitem__)
        self._load[index] += 1
        try:
            answer: dict[str, Any] = await self.pool[index].agent_actor.method.remote(
                "run", case_id, text, timeout, sample, dict(gen or {})
            )
            return answer
        finally:
            self._load[index] -= 1

    def close(self) -> None:
        """End the actors, and the Ray runtime when this backend started it."""
        for actor in self.pool:
            actor.kill()
        if self._started:
            self._ray.shutdown()
