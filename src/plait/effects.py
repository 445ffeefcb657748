"""Typed effects: what a flow asks its driver to do, and what it gets back.

plait writes every piece of logic that must behave the same in sync, async and streaming
mode (the agent call path, the tool loops, the action executor, containers) once, as a
*flow*: a generator that yields effects and receives their results::

    def ask(llm, messages) -> Flow[str]:
        reply = yield from perform(ModelCall(llm, 'chat', messages))   # typed: str
        return reply.strip()

A driver (`plait.driver`) performs the effects in the caller's mode. Flows never know which
mode runs them. Each effect class names its result type, so ``yield from perform(effect)``
is typed; a plain ``yield effect`` works too (its value is `Any`).

| effect | result | what it is |
|---|---|---|
| `Call[R]` | `R` | call a function (leaf; the base of the others) |
| `ModelCall[R]` | `R` | ``llm.chat`` / ``llm.complete`` / ``llm.stream_chat`` for one session |
| `HookCall` | `Any` | a hook method (runs inline, never in a thread) |
| `AgentCall` | `AgentMessage` | call a sub-agent (its call path runs in this driver) |
| `ToolCall` | `AgentMessage` or `ActionReturn` | an executor call (its hooks and dispatch run in this driver) |
| `ActionCall` | `ActionReturn` | one tool API (argument parsing, the call, result wrapping) |
| `Emit` | `None` | a chunk for streaming callers (others drop it) |
| `Report` | `None` | a typed stream event (`plait.events`) for callers that asked for events (others drop it) |
| `Gather[T]` | `list[T]` | several effects at once (concurrently in async mode) |

*Composite* effects (`AgentCall`, `ToolCall`, `ActionCall`) are themselves flows
(`Composite.flow`): the driver runs their steps in place, so every effect of an agent tree
meets the same interceptors (`plait.interceptors`), which see the composite first and may
answer it without running it (replay does that for tools).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Generator, Hashable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

if TYPE_CHECKING:
    from .memory.base_memory import Memory
    from .schema import ActionReturn, AgentMessage

__all__ = [
    "ActionCall",
    "AgentCall",
    "Call",
    "Composite",
    "Effect",
    "Emit",
    "Flow",
    "Gather",
    "HookCall",
    "Leaf",
    "ModelCall",
    "Report",
    "ToolCall",
    "in_place",
    "perform",
    "runs_in_place",
]

R = TypeVar("R")
T = TypeVar("T")

_EMPTY: Mapping[str, object] = MappingProxyType({})


class Effect(Generic[R]):
    """Base of every effect; `R` is the type of the value the driver sends back."""

    __slots__ = ()


class Leaf(Effect[R]):
    """An effect performed as one function call (`call`)."""

    __slots__ = ()

    def call(self) -> Call[R]:  # pragma: no cover - abstract
        """The function call that performs this effect."""
        raise NotImplementedError

    def streamed(self) -> Leaf[R]:
        """This effect as a streaming driver performs it (itself, unless it can stream)."""
        return self


Flow = Generator[Effect[Any], Any, R]
"""A generator that yields effects and returns `R`."""


def perform(effect: Effect[R]) -> Flow[R]:
    """Yield `effect` and return its result, typed.

    Example:
        ```python
        reply = yield from perform(ModelCall(llm, 'chat', messages))
        ```
    """
    return cast(R, (yield effect))


@dataclass(frozen=True, slots=True, eq=False)
class Call(Leaf[R]):
    """Call ``fn(*args, **kwargs)``.

    Attributes:
        fn: What to call (sync or async; a generator or async generator when `stream`).
        args: Positional arguments.
        kwargs: Keyword arguments.
        stream: The result is an iterator (sync or async) of chunks: streaming drivers pass
            the non-final ones (``stream_state != END``) to their caller, and the last chunk
            is the effect's result.
        offload: In async mode, a synchronous `fn` (and iterating a synchronous stream) runs
            in a worker thread so the event loop never blocks. Framework-internal calls that
            cannot block set it to False.
        each: Maps every chunk of a stream before it is passed on or returned.
    """

    fn: Callable[..., Any]
    args: tuple[object, ...] = ()
    kwargs: Mapping[str, object] = field(default_factory=lambda: _EMPTY)
    stream: bool = False
    offload: bool = True
    each: Callable[[Any], Any] | None = None

    def call(self) -> Call[R]:
        """The leaf call that performs this effect (itself)."""
        return self


F = TypeVar("F", bound=Callable[..., Any])

IN_PLACE = "__plait_call_path__"


def runs_in_place(method: F) -> F:
    """Mark a method that only drives plait's own flow, so the caller may run that flow in place.

    The one rule for running in place: a method marked here (an agent's or executor's
    ``__call__``, an agent's ``forward``) is plait's own, and its flow runs in the calling
    driver (one driver per tree, every effect meeting the same interceptors); an unmarked one
    (a user's own ``__call__`` or ``forward``) is called as it is. See `in_place`.
    """
    setattr(method, IN_PLACE, True)
    return method


def in_place(owner: object, name: str) -> bool:
    """Whether `owner`'s class method `name` is marked `runs_in_place` (its flow may run in the caller's driver)."""
    return getattr(getattr(type(owner), name, None), IN_PLACE, False) is True


@functools.lru_cache(maxsize=1024)
def _takes_session_ids(fn: Callable[..., Any]) -> bool:
    """Whether a model method gets ``session_ids=``: it names it, or it is async and takes ``**kwargs``."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    if "session_ids" in parameters:
        return True
    is_async = inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn)
    return is_async and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


@dataclass(frozen=True, slots=True, eq=False)
class ModelCall(Leaf[R]):
    """One request to a model for one session.

    Attributes:
        llm: The model.
        method: ``'chat'`` (text), ``'complete'`` (`ModelResponse`) or ``'stream_chat'``.
        messages: The chat messages.
        session_id: The session (passed as ``session_ids=`` to models whose method takes it).
        params: Generation parameters (``max_tokens``, ``tools``, ...).
        each: For ``stream_chat``: maps each ``(status, text, extra)`` item to a chunk.
        follow: The driver chooses: a streaming driver calls ``stream_chat`` instead of
            `method` (chunks mapped by `each`, the last one the result), any other `method`.
        memory: The session's memory the request was rendered from, when an agent's: a
            context policy reads pinned messages there and keeps its running summary in it.
        agent: The agent whose request this is (None: not an agent's).
    """

    llm: Any
    method: str
    messages: object
    session_id: Hashable = 0
    params: Mapping[str, object] = field(default_factory=lambda: _EMPTY)
    each: Callable[[Any], Any] | None = None
    follow: bool = False
    memory: Memory | None = None
    agent: object = None

    @property
    def stream(self) -> bool:
        """Whether the model's answer streams."""
        return self.method == "stream_chat"

    def streamed(self) -> ModelCall[R]:
        """With `follow` and a model that streams: the ``stream_chat`` call; else itself."""
        if self.follow and not self.stream and callable(getattr(self.llm, "stream_chat", None)):
            return replace(self, method="stream_chat", follow=False)
        return self

    def call(self) -> Call[R]:
        """``llm.<method>(messages, [session_ids=session_id,] **params)``."""
        fn = getattr(self.llm, self.method)
        kwargs = self.params
        if _takes_session_ids(getattr(fn, "__func__", fn)):
            kwargs = {"session_ids": self.session_id, **kwargs}
        return Call(fn, (self.messages,), kwargs, stream=self.stream, each=self.each)

    def replace(self, **changes: Any) -> ModelCall[R]:
        """A copy with `changes` (e.g. another ``llm``: a stand-in that records or replays)."""
        return replace(self, **changes)


@dataclass(frozen=True, slots=True, eq=False)
class HookCall(Leaf[Any]):
    """A hook method called with `args`; runs inline (hooks must not block)."""

    fn: Callable[..., Any]
    args: tuple[object, ...] = ()

    def call(self) -> Call[Any]:
        """The leaf call."""
        return Call(self.fn, self.args, offload=False)


class Composite(Effect[R]):
    """An effect made of other effects: `flow` runs it (in the same driver)."""

    __slots__ = ()

    @property
    def inline(self) -> bool:
        """Whether the steps can run in the calling driver (else it is performed as `call`)."""
        return True

    def flow(self) -> Flow[R]:  # pragma: no cover - abstract
        """The steps of this effect."""
        raise NotImplementedError

    def call(self) -> Call[R]:  # pragma: no cover - abstract
        """The effect as one leaf call, for when its steps cannot run in place."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True, eq=False)
class AgentCall(Composite["AgentMessage"]):
    """Call a sub-agent: ``agent(*messages, session_id=..., **kwargs)``.

    Agents whose ``__call__`` is plait's own run their call path in the calling driver
    (streamed chunks pass through; a sync agent's model call runs in a worker thread under
    an async driver); others are called as a leaf `Call`.

    Attributes:
        agent: The sub-agent.
        messages: Its inputs.
        session_id: Its session.
        kwargs: Keyword arguments of the call.
        resume: Go on with the session's paused run, its decisions already recorded
            (``agent.resume({}, session_id=...)``), instead of a new call.
        tool_call: The caller's tool call this agent answers (an agent run as a tool from a
            tool loop): the caller reports the agent's pause as its own, under this id.
    """

    agent: Any
    messages: tuple[object, ...]
    session_id: Hashable = 0
    kwargs: Mapping[str, object] = field(default_factory=lambda: _EMPTY)
    resume: bool = False
    tool_call: str | None = None

    @property
    def inline(self) -> bool:
        """Whether the agent's call path can run in the calling driver (plait's own, no interceptors of its own)."""
        return in_place(self.agent, "__call__") and not getattr(self.agent, "_interceptors", None)

    def flow(self) -> Flow[AgentMessage]:
        """The agent's call path (its resume path when `resume`)."""
        from .agents.call_path import agent_call_flow, agent_resume_flow

        if self.resume:
            return agent_resume_flow(self.agent, {}, self.session_id, self.kwargs)
        return agent_call_flow(self.agent, self.messages, self.session_id, self.kwargs)

    def call(self) -> Call[AgentMessage]:
        """The agent called as a function (its ``resume`` when `resume`)."""
        stream = bool(getattr(self.agent, "_stream_forward", False))
        if self.resume:
            return Call(self.agent.resume, ({},), {"session_id": self.session_id, **self.kwargs}, stream=stream)
        return Call(self.agent, self.messages, {"session_id": self.session_id, **self.kwargs}, stream=stream)


@dataclass(frozen=True, slots=True, eq=False)
class ToolCall(Composite[Any]):
    """An executor call: ``executor(message, session_id=...)`` (before/after-action hooks and dispatch).

    `call_id` is the model's id for the call (set by the tool loop); the tool's `ActionCall` carries it.
    """

    executor: Any
    message: object
    session_id: Hashable = 0
    call_id: str | None = None

    @property
    def inline(self) -> bool:
        """Whether the executor's steps can run in the calling driver."""
        return in_place(self.executor, "__call__")

    def flow(self) -> Flow[Any]:
        """The executor's call flow."""
        if self.call_id is None:
            return cast("Flow[Any]", self.executor.call_flow(self.message, session_id=self.session_id))
        return cast(
            "Flow[Any]", self.executor.call_flow(self.message, session_id=self.session_id, call_id=self.call_id)
        )

    def call(self) -> Call[Any]:
        """The executor called as a function."""
        return Call(self.executor, (self.message,), {"session_id": self.session_id})


@dataclass(frozen=True, slots=True, eq=False)
class ActionCall(Composite["ActionReturn"]):
    """One tool API: ``action(inputs, api, session_id)`` (parse, call, wrap) -> `ActionReturn`.

    `call_id` is the model's id for the call, when a tool loop made it (`ToolCall.call_id`).
    """

    action: Any
    inputs: object
    api: str = "run"
    session_id: Hashable | None = None
    call_id: str | None = None

    def flow(self) -> Flow[ActionReturn]:
        """The tool call's steps (`plait.actions.base_action.action_flow`)."""
        return _action_flow()(self.action, self.inputs, self.api, self.session_id, self.call_id)

    def call(self) -> Call[ActionReturn]:  # pragma: no cover - always inline
        """Not used: tool calls always run in place."""
        return Call(self.action, (self.inputs, self.api), {"session_id": self.session_id})


@functools.cache
def _action_flow() -> Callable[..., Flow[ActionReturn]]:
    """`plait.actions.base_action.action_flow`, imported once (effects are below the actions package)."""
    from .actions.base_action import action_flow

    return action_flow


@dataclass(frozen=True, slots=True, eq=False)
class Emit(Effect[None]):
    """A chunk for streaming callers (non-streaming drivers drop it)."""

    chunk: Any


@dataclass(frozen=True, slots=True, eq=False)
class Report(Effect[None]):
    """A typed stream event (`plait.events`): passed on as a chunk when the caller asked for events, else dropped.

    Unlike `Emit`, a report never reaches Lagent-style streams: only ``stream_events`` (which
    runs its own interceptor around the run) turns reports into chunks. The event is made
    only then (``make(*args)``), so a run nobody watches pays for one effect, not an event.
    """

    make: Callable[..., Any]
    args: tuple[Any, ...] = ()

    @property
    def event(self) -> Any:
        """The event (made now)."""
        return self.make(*self.args)


@dataclass(frozen=True, slots=True, eq=False)
class Gather(Effect[list[T]]):
    """Several effects whose results come back together, in order.

    Async drivers run them concurrently; sync drivers one after another. Their streams are
    drained (never passed on). Used for independent work such as parallel tool calls.
    """

    effects: tuple[Effect[T], ...]
