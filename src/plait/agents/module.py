"""`AgentModule`: registration of sub-agents, traversal, state and repr (the `nn.Module` part of an agent).

Assigning an agent to an attribute registers it under that name; reassigning something
else or deleting the attribute unregisters it. Traversal (`named_agents`) drives
`state_dict`, `load_state_dict`, `reset` and `repr`, so containers and user-defined agents
get all of them for free.

State is plain JSON-ready data: ``{'memory': [...], 'writer.memory': [...], 'lst.0.memory': [...]}``
where each list holds `AgentMessage.model_dump()` dicts. `save_state` / `load_state` write
it to disk inside a versioned envelope.
"""

from __future__ import annotations

import json
import os
import threading
from abc import ABCMeta
from collections.abc import Hashable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, cast

from ..exceptions import StateDictError, UserError
from ..interceptors import Interceptor
from ..memory.base_memory import ContextSummary
from ..memory.manager import MemoryManager
from ..sessions import SessionRegistry
from ..utils._json import json_default
from .run_state import RunState

if TYPE_CHECKING:
    from .agent_tool import AgentTool, History

__all__ = ["STATE_FORMAT", "STATE_VERSION", "AgentModule", "IncompatibleKeys", "check_name"]

STATE_FORMAT = "plait.state"
STATE_VERSION = 1


_changes = 0  # how often any agent tree changed shape (children, interceptors, attributes): keys `interceptors`' caches
_changes_lock = threading.Lock()


def _changed() -> None:
    """Note that some agent tree changed (after the change, so a cache built meanwhile is not kept)."""
    global _changes
    with _changes_lock:  # serialised: the count only grows, and no change is lost between threads
        _changes += 1


class _Registry(dict[Any, Any]):
    """A dict of sub-agents or interceptors whose every change is noted (`interceptors` caches what it finds).

    The sub-agents' registry has its `owner`: an agent put in it joins the owner's sessions (`AgentModule._join`).
    """

    __slots__ = ("owner",)

    def __init__(self, owner: AgentModule | None = None) -> None:
        super().__init__()
        self.owner = owner

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        owner = self.owner
        if owner is not None and isinstance(value, AgentModule):
            path = owner._session_path
            value._join(owner._session_registry, f"{path}.{key}" if path else str(key))
        _changed()

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        _changed()

    def pop(self, *args: Any) -> Any:
        """`dict.pop`, noted."""
        try:
            return super().pop(*args)
        finally:
            _changed()

    def popitem(self) -> tuple[Any, Any]:
        """`dict.popitem`, noted."""
        try:
            return super().popitem()
        finally:
            _changed()

    def clear(self) -> None:
        """`dict.clear`, noted."""
        super().clear()
        _changed()

    def update(self, *args: Any, **kwargs: Any) -> None:
        """`dict.update`, noted (each item set as by `__setitem__`)."""
        for key, value in dict(*args, **kwargs).items():
            self[key] = value
        _changed()

    def setdefault(self, key: Any, default: Any = None) -> Any:
        """`dict.setdefault`, noted."""
        if key not in self:
            self[key] = default
        return self[key]


class IncompatibleKeys(NamedTuple):
    """What `load_state_dict` could not match."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class AgentModule(metaclass=ABCMeta):
    """Base of every agent: a tree of named sub-agents with per-session state.

    Its metaclass is `abc.ABCMeta`, so a class can stand for its mode siblings
    (``Agent.register(AsyncAgent)``) without one overriding the other's methods.
    """

    memory: Any
    name: str
    _agents: dict[str, AgentModule]
    _hooks: dict[int, Any]
    _interceptors: dict[int, Interceptor]
    _session_registry: SessionRegistry
    _session_path: str
    _stream_forward: ClassVar[bool] = False

    def __init__(self) -> None:
        object.__setattr__(self, "_agents", _Registry(self))
        object.__setattr__(self, "_hooks", {})
        object.__setattr__(self, "_interceptors", _Registry())
        object.__setattr__(self, "_session_registry", SessionRegistry())  # the tree's: see `_join`
        object.__setattr__(self, "_session_path", "")

    def interceptors(self) -> tuple[Interceptor, ...]:
        """The interceptors around this agent's effects, outermost first (see `plait.interceptors`).

        Those registered on it, then the context policies of the agents in its tree (each
        shapes its own agent's requests, wherever that agent runs). Asked once per call: the
        answer is kept until an agent tree changes (a sub-agent, an interceptor or an
        attribute set or removed anywhere).
        """
        changes = _changes
        cached = self.__dict__.get("_interceptors_found")
        if cached is not None and cached[0] == changes:
            return cast("tuple[Interceptor, ...]", cached[1])
        found = list(self._interceptors.values()) if self._interceptors else []
        for agent in self.agents() if self._agents else (self,):
            policy = getattr(agent, "context_policy", None)
            if isinstance(policy, Interceptor) and policy not in found:
                found.append(policy)
        answer = tuple(found)
        object.__setattr__(self, "_interceptors_found", (changes, answer))
        return answer

    # -- registration --

    def __setattr__(self, name: str, value: Any) -> None:
        agents: dict[str, AgentModule] | None = self.__dict__.get("_agents")
        if isinstance(value, AgentModule):
            if agents is None:
                raise UserError(
                    f"call super().__init__() in {type(self).__name__}.__init__ before assigning sub-agents"
                )
            check_name(name)
            agents[name] = value  # it joins this agent's sessions
        elif agents is not None:
            agents.pop(name, None)
            if name == "_memory" and isinstance(value, MemoryManager):  # the view of this agent's memories
                registry: SessionRegistry = self.__dict__["_session_registry"]
                for session in registry.sessions.values():  # a new manager replaces the memories held
                    part = session.parts.get(self._session_path)
                    if part is not None:
                        part.memory = None
                value._attach(registry, self._session_path)
        object.__setattr__(self, name, value)
        _changed()  # a context policy, or anything a subclass derives one from

    def _join(self, registry: SessionRegistry, path: str) -> None:
        """Keep this subtree's sessions in `registry` (a parent's tree) from `path` down, moving those held."""
        for sub_path, agent in self.named_agents(path):
            old, old_path = agent._session_registry, agent._session_path
            old.move(old_path, registry, sub_path)
            object.__setattr__(agent, "_session_registry", registry)
            object.__setattr__(agent, "_session_path", sub_path)
            manager = agent.__dict__.get("_memory")
            if isinstance(manager, MemoryManager):
                manager._attach(registry, sub_path, move=False)

    def __delattr__(self, name: str) -> None:
        agents: dict[str, AgentModule] | None = self.__dict__.get("_agents")
        if agents is not None:
            agents.pop(name, None)
        object.__delattr__(self, name)
        _changed()

    def add_agent(self, name: str, agent: AgentModule) -> None:
        """Register `agent` under `name` (for names chosen at run time)."""
        if not isinstance(agent, AgentModule):
            raise UserError(f"add_agent takes an Agent, not {type(agent).__name__}")
        setattr(self, name, agent)

    # -- traversal --

    def named_children(self) -> Iterator[tuple[str, AgentModule]]:
        """Direct sub-agents with their attribute names, in registration order."""
        yield from self._agents.items()

    def children(self) -> Iterator[AgentModule]:
        """Direct sub-agents."""
        for _, agent in self.named_children():
            yield agent

    def named_agents(self, prefix: str = "", memo: set[int] | None = None) -> Iterator[tuple[str, AgentModule]]:
        """This agent (name ``prefix``) and every sub-agent below it with dotted paths, each once."""
        return self._walk(prefix, set() if memo is None else memo, named=True)

    def agents(self) -> Iterator[AgentModule]:
        """This agent and every sub-agent, each once, in `named_agents`' order."""
        if not self._agents:  # a leaf: most agents
            return iter((self,))
        return (agent for _, agent in self._walk("", set(), named=False))

    def _walk(self, prefix: str, memo: set[int], *, named: bool) -> Iterator[tuple[str, AgentModule]]:
        """The tree depth first, registration order, each agent once; paths built only when `named`."""
        stack: list[tuple[str, AgentModule]] = [(prefix, self)]
        while stack:
            path, agent = stack.pop()
            if id(agent) in memo:
                continue
            memo.add(id(agent))
            yield path, agent
            children = [
                ((f"{path}.{name}" if path else name) if named else "", child) for name, child in agent.named_children()
            ]
            stack.extend(reversed(children))

    def get_agent(self, path: str) -> AgentModule:
        """The sub-agent at dotted `path` (``'writer'``, ``'team.0.critic'``)."""
        agent: AgentModule = self
        for part in path.split(".") if path else []:
            children = dict(agent.named_children())
            if part not in children:
                raise UserError(
                    f"{type(agent).__name__} has no sub-agent {part!r} (path {path!r}); has {sorted(children)}"
                )
            agent = children[part]
        return agent

    # -- state --

    def get_extra_state(self, session_id: Hashable = 0) -> Any:
        """Extra JSON-ready state of this agent for a session (None: nothing); override with `set_extra_state`."""
        return None

    def set_extra_state(self, state: Any, session_id: Hashable = 0) -> None:  # noqa: B027 - optional, not abstract
        """Restore what `get_extra_state` returned."""

    def run_state(self, session_id: Hashable = 0) -> RunState | None:
        """The state of this agent's unfinished tool-loop run in a session (None: no run).

        A run paused for approval in a session kept by a `SessionStore` is read back from it.
        """
        registry, path = self._session_registry, self._session_path
        part = registry.part(session_id, path)
        run = None if part is None else part.run
        if run is None and registry.store is not None:
            manager = self.__dict__.get("_memory")
            if manager is not None:
                manager.get(session_id)  # reads the session back from the store
                part = registry.part(session_id, path)
                if part is not None and part.stored_run is not None:
                    data, part.stored_run = part.stored_run, None
                    run = part.run = RunState.from_dict(data)
        return run

    def set_run_state(self, state: RunState | None, session_id: Hashable = 0) -> None:
        """Register (or with None, drop) the state of a session's tool-loop run."""
        registry, path = self._session_registry, self._session_path
        if state is None:
            part = registry.part(session_id, path)
            ended = None if part is None else part.run
            if part is not None:
                part.run = None
                registry.prune(session_id)
            if ended is not None and ended.turn_start is not None:  # a paused run is over: forget it on disk too
                self.keep_paused_run(None, session_id)
        else:
            registry.session(session_id).part(path).run = state

    def keep_paused_run(self, state: RunState | None, session_id: Hashable = 0, wait: bool = False) -> None:
        """Store a run paused for approval with the session, where a `SessionStore` keeps it (None: it is over)."""
        manager = self.__dict__.get("_memory")
        if manager is not None:
            data = None if state is None else state.to_dict()
            self._session_registry.pause(session_id, self._session_path, manager.make, data, wait)

    @property
    def _calls(self) -> dict[Hashable, object]:
        """The sessions a call of this agent runs on now, with the call's token (a snapshot)."""
        path = self._session_path
        return {
            session_id: session.calls[path]
            for session_id, session in self._session_registry.sessions.items()
            if path in session.calls
        }

    def state_dict(self, session_id: Hashable = 0) -> dict[str, Any]:
        """A session's state of the whole tree: ``{'<path>.memory': [message dicts], ...}``.

        An agent in the middle of a tool-loop run adds ``'<path>.run_state'`` (`RunState.to_dict`),
        a memory with a running summary of its older messages ``'<path>.summary'``
        (`ContextSummary.to_dict`).
        """
        state: dict[str, Any] = {}
        for path, agent in self.named_agents():
            prefix = f"{path}." if path else ""
            if getattr(agent, "memory", None) is not None:
                state[prefix + "memory"] = [m.model_dump() for m in agent.memory.get_memory(session_id)]
                memory = agent.memory.get(session_id)
                if memory is not None and memory.summary is not None:
                    state[prefix + "summary"] = memory.summary.to_dict()
            extra = agent.get_extra_state(session_id)
            if extra is not None:
                state[prefix + "extra_state"] = extra
            part = agent._session_registry.part(session_id, agent._session_path)
            if part is not None and part.run is not None:
                state[prefix + "run_state"] = part.run.to_dict()
        return state

    def load_state_dict(
        self, state_dict: Mapping[str, Any], session_id: Hashable = 0, strict: bool = True
    ) -> IncompatibleKeys:
        """Load a session's state from `state_dict` (or a `save_state` envelope).

        Args:
            state_dict: What `state_dict` returned.
            session_id: The session to overwrite.
            strict: Raise `StateDictError` when keys do not match exactly.

        Returns:
            The keys that did not match (empty lists when everything matched).
        """
        state = _unwrap(state_dict)
        owners: dict[str, tuple[AgentModule, str]] = {}
        for path, agent in self.named_agents():
            prefix = f"{path}." if path else ""
            if getattr(agent, "memory", None) is not None:
                owners[prefix + "memory"] = (agent, "memory")
                owners[prefix + "summary"] = (agent, "summary")
            owners[prefix + "extra_state"] = (agent, "extra_state")
            owners[prefix + "run_state"] = (agent, "run_state")
        required = {k for k, (_, kind) in owners.items() if kind == "memory"}
        missing = sorted(required - state.keys())
        unexpected = sorted(state.keys() - owners.keys())
        if strict and (missing or unexpected):
            raise StateDictError(
                f"state does not fit {type(self).__name__}: missing keys {missing}, unexpected keys {unexpected}",
                missing,
                unexpected,
            )
        # memories first: loading one replaces the session's memory, and a summary belongs to it
        for key, value in sorted(state.items(), key=lambda item: owners.get(item[0], (self, ""))[1] != "memory"):
            if key not in owners:
                continue
            agent, kind = owners[key]
            if kind == "memory":
                agent.memory.create_instance(session_id).load(value)
            elif kind == "summary":
                agent.memory.set_summary(ContextSummary.from_dict(value), session_id)
            elif kind == "run_state":
                agent.set_run_state(RunState.from_dict(value), session_id)
            else:
                agent.set_extra_state(value, session_id)
        return IncompatibleKeys(missing, unexpected)

    def save_state(self, path: str | os.PathLike[str], session_id: Hashable = 0) -> None:
        """Write a session's state to a JSON file (versioned envelope)."""
        envelope = {"format": STATE_FORMAT, "version": STATE_VERSION, "state": self.state_dict(session_id)}
        Path(path).write_text(json.dumps(envelope, ensure_ascii=False, indent=2, default=json_default), "utf-8")

    def load_state(
        self, path: str | os.PathLike[str], session_id: Hashable = 0, strict: bool = True
    ) -> IncompatibleKeys:
        """Read a file written by `save_state` into a session."""
        return self.load_state_dict(json.loads(Path(path).read_text("utf-8")), session_id, strict)

    def reset(self, session_id: Hashable = 0, keypath: str | None = None, recursive: bool = False) -> None:
        """Forget a session: this agent's memory, the sub-agent at `keypath`, or (`recursive`) the whole subtree."""
        target = self.get_agent(keypath) if keypath else self
        target._drop(session_id, list(target.agents()) if recursive else [target], stored=False)

    def evict(self, session_id: Hashable = 0) -> bool:
        """Drop a session of the whole tree from this process, keeping it where a `SessionStore` holds it.

        Its memories, a run paused for approval and what interceptors keep for it leave this
        process; a bound store keeps its messages, summary and paused run, and the session is
        read back from there on its next use. Without a store the session is forgotten. A
        server drops idle sessions this way (`ServerLimits.session_ttl`).

        Returns:
            False, with nothing dropped, while a call runs on the session.
        """
        agents = list(self.agents())
        for agent in agents:
            session = agent._session_registry.sessions.get(session_id)
            if session is not None and agent._session_path in session.calls:
                return False
        self._drop(session_id, agents, stored=True)
        return True

    def refresh(self, session_id: Hashable = 0) -> None:
        """Read a session back where a shared store holds a newer one than this process (another worker's turns).

        Each agent of the tree that no call runs on asks its session's journal whether it is
        current (`plait.sessions.SessionRegistry.refresh`); a call does the same by itself when it
        starts. Without a ``shared=True`` store, nothing is asked.
        """
        for agent in self.agents():
            session = agent._session_registry.sessions.get(session_id)
            if session is not None and agent._session_path not in session.calls:
                agent._refresh_part(session_id)

    def _refresh_part(self, session_id: Hashable) -> None:
        """This agent's part of a session is read back when a shared store holds a newer one (the call path's check)."""
        if self._session_registry.refresh(session_id, self._session_path):
            for interceptor in self.interceptors():  # what they kept of it (a context policy's cut) is old
                interceptor.reset(session_id)

    def _drop(self, session_id: Hashable, agents: list[AgentModule], *, stored: bool) -> None:
        """Drop a session from `agents` (memories, runs) and this agent's interceptors; `stored`: a store keeps it."""
        for agent in agents:
            memory = getattr(agent, "memory", None)
            if memory is not None:
                drop = getattr(memory, "evict", None) if stored else memory.reset
                if drop is not None:
                    drop(session_id)
            part = agent._session_registry.part(session_id, agent._session_path)
            if part is not None:
                part.run = part.stored_run = None
                agent._session_registry.prune(session_id)
        for interceptor in self.interceptors():  # what they keep per session (a context policy's cut)
            interceptor.reset(session_id)

    # -- as a tool --

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        input_type: Any = None,
        history: str = "per_call",
    ) -> AgentTool:
        """This agent as a tool another agent can hold (`plait.agents.agent_tool.AgentTool`).

        Args:
            name: The tool name (default: the agent's name).
            description: What the tool does, for the model (default: the agent's description).
            input_type: The arguments' type, whose fields become the parameters (default: one
                ``message`` string).
            history: ``"per_call"`` (a fresh session ``"<session>/<name>/<n>"`` per call) or
                ``"per_conversation"`` (``"<session>/<name>"``, kept across calls).

        Raises:
            UserError: An unknown `history`, or an `input_type` without fields.
        """
        from .agent_tool import AgentTool

        return AgentTool(self, name, description, input_type, cast("History", history))

    # -- repr --

    def extra_repr(self) -> str:
        """The text inside this agent's parentheses in `repr`."""
        name = getattr(self, "name", None)
        return f"name={name!r}" if name else ""

    def __repr__(self) -> str:
        """Lagent's tree: ``Class(extra)`` and, when it has sub-agents, ``(`` one line per child ``)``.

        E.g. ``Sequential(name='Sequential')(`` / ``  (0): Agent(name='a')`` / ``)``; a container
        without an `extra_repr` prints ``AgentList(`` / ... / ``)``.
        """
        extra = self.extra_repr()
        head = f"{type(self).__name__}({extra})" if extra else type(self).__name__
        children = list(self.named_children())
        if not children:
            return head if extra else head + "()"
        lines = [head + "("]
        for name, child in children:
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        return "\n".join(lines) + "\n)"


def check_name(name: str) -> None:
    """Reject sub-agent names that would break dotted state keys."""
    if not name or "." in name:
        raise UserError(f"sub-agent names must be non-empty and contain no '.', got {name!r}")


def _unwrap(state: Mapping[str, Any]) -> Mapping[str, Any]:
    if state.get("format") == STATE_FORMAT and "state" in state:
        version = state.get("version")
        if version != STATE_VERSION:
            raise StateDictError(f"state version {version!r} is not supported (this plait reads {STATE_VERSION})")
        inner: Mapping[str, Any] = state["state"]
        return inner
    return state
