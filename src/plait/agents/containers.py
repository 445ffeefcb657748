"""Containers: `Sequential` (and its async/streaming twins), `AgentList`, `AgentDict`.

`Sequential` pipes each member's output into the next. Its loop is one flow
(`sequential_flow`) driven by the class's driver, like the agent call path; members run
as `AgentCall` effects, so a sync member of an async pipeline never blocks the event loop.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from ..effects import AgentCall, Flow
from ..exceptions import UserError
from ..schema import AgentMessage
from .agent import Agent, AgentCore, AsyncAgent, AsyncStreamingAgent, StreamingAgent
from .module import AgentModule, check_name

__all__ = [
    "AgentDict",
    "AgentList",
    "AsyncSequential",
    "AsyncStreamingSequential",
    "Sequential",
    "StreamingSequential",
]


def _named(agents: tuple[Any, ...]) -> list[tuple[str, AgentModule]]:
    if len(agents) == 1 and isinstance(agents[0], Mapping):
        return [(str(k), v) for k, v in agents[0].items()]
    if len(agents) == 1 and not isinstance(agents[0], AgentModule) and isinstance(agents[0], Iterable):
        agents = tuple(agents[0])
    named: list[tuple[str, AgentModule]] = []
    for index, item in enumerate(agents):
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            named.append((item[0], item[1]))
        else:
            named.append((str(index), item))
    return named


def sequential_flow(
    members: list[Any], messages: tuple[Any, ...], session_id: Hashable, exit_at: int | None, kwargs: Any
) -> Flow[Any]:
    """Run `members` in order (cycling when `exit_at` >= their number), each on the previous output."""
    if not members:
        raise UserError("Sequential has no agents to run")
    steps = len(members) if exit_at is None else exit_at + 1
    if steps < 1:
        raise UserError(f"exit_at must be >= 0, got {exit_at}")
    result: Any = None
    current: tuple[Any, ...] = messages
    for step in range(steps):
        agent = members[step % len(members)]
        result = yield AgentCall(agent, current, session_id, kwargs)
        current = (result,)
    return result


class SequentialCore(AgentCore):
    """Runs its agents one after another; keeps its own memory of inputs and final outputs.

    `Sequential` and its async / streaming siblings call it in their mode.

    Args:
        *agents: Agents as positional arguments, one iterable, a ``{name: agent}`` mapping,
            or ``(name, agent)`` pairs.
        **kwargs: `Agent` arguments for the container itself (``name``, ``hooks``, ``memory``).

    Example:
        ```python
        pipeline = Sequential(writer, critic)
        reply = pipeline('Write a haiku about rain')
        pipeline[0] is writer, pipeline['1'] is critic, len(pipeline) == 2
        ```
    """

    def __init__(self, *agents: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for name, agent in _named(agents):
            self.add_agent(name, agent)

    def forward_flow(
        self, inputs: Sequence[AgentMessage], session_id: Hashable, kwargs: Mapping[str, object]
    ) -> Flow[AgentMessage]:
        """Pipe the inputs through the members; ``exit_at=k`` stops after k+1 steps."""
        params = dict(kwargs)
        exit_at = params.pop("exit_at", None)
        if exit_at is not None and (not isinstance(exit_at, int) or isinstance(exit_at, bool)):
            raise UserError(f"exit_at must be an int step index, not {exit_at!r}")
        result: AgentMessage = yield from sequential_flow(
            list(self.children()), tuple(inputs), session_id, exit_at, params
        )
        return result

    @overload
    def __getitem__(self, key: int) -> AgentModule: ...
    @overload
    def __getitem__(self, key: str) -> AgentModule: ...
    def __getitem__(self, key: int | str) -> AgentModule:
        if isinstance(key, int):
            members = list(self.children())
            return members[key]
        return self.get_agent(key)

    def __len__(self) -> int:
        return len(self._agents)


class Sequential(SequentialCore, Agent):
    """`SequentialCore`, called synchronously: ``pipeline(...)``."""


class AsyncSequential(SequentialCore, AsyncAgent):
    """`Sequential` of async agents: ``await pipeline(...)``."""


class StreamingSequential(SequentialCore, StreamingAgent):
    """`Sequential` of streaming agents: yields every member's chunks, then one final END message."""


class AsyncStreamingSequential(SequentialCore, AsyncStreamingAgent):
    """`Sequential` of async streaming agents: ``async for chunk in pipeline(...)``."""


class AgentList(Agent):
    """A list of agents registered as sub-agents ``'0'``, ``'1'``, ... (memory-less, not callable)."""

    def __init__(self, agents: Iterable[AgentModule] | None = None) -> None:
        super().__init__(memory=None)
        self._items: list[AgentModule] = []
        for agent in agents or []:
            self.append(agent)

    def _sync(self) -> None:
        self._agents.clear()
        for index, agent in enumerate(self._items):
            if not isinstance(agent, AgentModule):
                raise UserError(f"AgentList holds agents only, got {type(agent).__name__}")
            self._agents[str(index)] = agent

    def _mutate(self, change: Any) -> None:
        before = list(self._items)
        try:
            change()
            self._sync()
        except BaseException:
            self._items = before
            self._sync()
            raise

    def append(self, agent: AgentModule) -> None:
        """Add an agent at the end."""
        self._mutate(lambda: self._items.append(agent))

    def extend(self, agents: Iterable[AgentModule]) -> None:
        """Add several agents at the end."""
        items = list(agents)
        self._mutate(lambda: self._items.extend(items))

    def insert(self, index: int, agent: AgentModule) -> None:
        """Insert an agent before `index`."""
        self._mutate(lambda: self._items.insert(index, agent))

    def pop(self, index: int = -1) -> AgentModule:
        """Remove and return the agent at `index`."""
        agent = self._items[index]
        self._mutate(lambda: self._items.pop(index))
        return agent

    def remove(self, agent: AgentModule) -> None:
        """Remove the first occurrence of `agent`."""
        self._mutate(lambda: self._items.remove(agent))

    def __getitem__(self, index: int) -> AgentModule:
        return self._items[index]

    def __setitem__(self, index: int, agent: AgentModule) -> None:
        self._mutate(lambda: self._items.__setitem__(index, agent))

    def __delitem__(self, index: int) -> None:
        self._mutate(lambda: self._items.__delitem__(index))

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[AgentModule]:
        return iter(list(self._items))

    def extra_repr(self) -> str:
        """Containers show only their members."""
        return ""


class AgentDict(Agent):
    """A mapping of names (no dots) to agents, registered under those names (memory-less, not callable)."""

    def __init__(self, agents: Mapping[str, AgentModule] | None = None) -> None:
        super().__init__(memory=None)
        for key, agent in (agents or {}).items():
            self[key] = agent

    def __getitem__(self, key: str) -> AgentModule:
        return self._agents[key]

    def __setitem__(self, key: str, agent: AgentModule) -> None:
        if not isinstance(key, str):
            raise UserError(f"AgentDict keys must be str, got {type(key).__name__}")
        if not isinstance(agent, AgentModule):
            raise UserError(f"AgentDict holds agents only, got {type(agent).__name__}")
        check_name(key)
        self._agents[key] = agent

    def __delitem__(self, key: str) -> None:
        del self._agents[key]

    def __contains__(self, key: object) -> bool:
        return key in self._agents

    def __len__(self) -> int:
        return len(self._agents)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._agents))

    def keys(self) -> list[str]:
        """The names, in insertion order."""
        return list(self._agents)

    def values(self) -> list[AgentModule]:
        """The agents, in insertion order."""
        return list(self._agents.values())

    def items(self) -> list[tuple[str, AgentModule]]:
        """``(name, agent)`` pairs, in insertion order."""
        return list(self._agents.items())

    def extra_repr(self) -> str:
        """Containers show only their members."""
        return ""


for _sibling in (AsyncSequential, StreamingSequential, AsyncStreamingSequential):
    Sequential.register(_sibling)
