"""`Session`: everything one conversation of one agent tree holds, in one place.

A session is keyed by its id within a `plait.sessions.SessionRegistry` (one per agent tree).
It holds one `AgentPart` per agent of the tree that took part, under the agent's dotted path
(``''`` for the root, ``'writer'``, ``'team.0'``):

* its memory: the messages and the running summary (a `plait.memory.Memory`, created by the
  agent's memory config on first use, and written through to a bound store by its journal);
* its tool-loop run: the `RunState` of a run in progress or paused for approval, and a paused
  run read back from a store that the agent has not taken up yet;
* whether a call runs on it now (the busy token: one call per agent and session at a time).

The call path opens a `TurnMark` on the part when a call starts and either keeps the turn
(durable in a bound store when the call returns) or rolls it back (see `plait.agents.call_path`).
`Memory` and `MemoryManager` stay what Lagent users know: views of these parts.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import TYPE_CHECKING

from ..types import JSONValue

if TYPE_CHECKING:
    from ..agents.run_state import RunState
    from ..memory.base_memory import Memory

__all__ = ["AgentPart", "Session", "memory_keypath"]


def memory_keypath(path: str) -> str:
    """The key of an agent's memory in `state_dict` and in a store (``'memory'``, ``'writer.memory'``)."""
    return f"{path}.memory" if path else "memory"


class AgentPart:
    """One agent's part of a session.

    Attributes:
        memory: Its messages and running summary (None: none yet, or not read back from a store yet).
        run: The state of its tool-loop run in progress or paused (None: no run).
        stored_run: A paused run read back from a store (`RunState.to_dict`), until the agent takes it up.
    """

    __slots__ = ("memory", "run", "stored_run")

    def __init__(self) -> None:
        self.memory: Memory | None = None
        self.run: RunState | None = None
        self.stored_run: dict[str, JSONValue] | None = None

    def empty(self) -> bool:
        """Whether the part holds nothing."""
        return self.memory is None and self.run is None and self.stored_run is None


class Session:
    """One conversation of one agent tree: the parts of its agents and the calls running on it.

    Args:
        session_id: The session's id (what callers pass as ``session_id``).
    """

    __slots__ = ("calls", "id", "parts")

    def __init__(self, session_id: Hashable) -> None:
        self.id = session_id
        self.parts: dict[str, AgentPart] = {}
        self.calls: dict[str, object] = {}  # agent path -> the token of the call running there

    def part(self, path: str) -> AgentPart:
        """The part of the agent at `path` (created empty on first use)."""
        part = self.parts.get(path)
        if part is None:
            part = self.parts[path] = AgentPart()
        return part

    def claim(self, path: str, token: object) -> bool:
        """Mark a call of the agent at `path` as running (atomic across threads); False: one already runs."""
        return self.calls.setdefault(path, token) is token

    def release(self, path: str, token: object) -> None:
        """The call holding `token` at `path` is over."""
        if self.calls.get(path) is token:
            del self.calls[path]

    def busy(self, paths: Iterator[str] | list[str] | None = None) -> bool:
        """Whether a call runs on the session (on one of `paths`, when given)."""
        if paths is None:
            return bool(self.calls)
        return any(path in self.calls for path in paths)

    def empty(self) -> bool:
        """Whether the session holds nothing and no call runs on it."""
        return not self.calls and all(part.empty() for part in self.parts.values())

    def __repr__(self) -> str:
        return f"Session({self.id!r}, agents={sorted(self.parts)}, running={sorted(self.calls)})"
