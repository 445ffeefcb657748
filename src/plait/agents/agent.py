"""`Agent` and its async / streaming variants.

An agent is a layer: it owns an LLM, a prompt template, an output parser and a per-session
memory; sub-agents assigned as attributes are registered like `torch.nn.Module` children.
Calling an agent runs the call path of `plait.agents.call_path` through the class's driver:

| class | `agent(...)` returns | default `forward` |
|---|---|---|
| `Agent` | `AgentMessage` | `llm.chat` |
| `AsyncAgent` | awaitable `AgentMessage` | `await llm.chat` |
| `StreamingAgent` | iterator of chunks, final END message last | `llm.stream_chat` |
| `AsyncStreamingAgent` | async iterator of the same | `async for ... llm.stream_chat` |
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Hashable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

from .._flow import Call, Flow, run_astream, run_async, run_stream, run_sync
from ..exceptions import ParseError, UserError
from ..hooks.hook import Hook, RemovableHandle
from ..memory import Memory, MemoryManager
from ..memory.base_memory import MessageLike
from ..schema import AgentMessage, AgentStatusCode
from ..utils.config import create_object
from .aggregator.default_aggregator import DefaultAggregator
from .call_path import agent_call_flow
from .module import AgentModule

__all__ = ["Agent", "AsyncAgent", "AsyncStreamingAgent", "StreamingAgent"]

_DEFAULT_MEMORY: Mapping[str, Any] = MappingProxyType({"type": Memory})
_DEFAULT_AGGREGATOR: Mapping[str, Any] = MappingProxyType({"type": DefaultAggregator})


class Agent(AgentModule):
    """A synchronous agent: messages in, a message out, memory updated in between.

    Args:
        llm: The model (an instance or a config dict). Needed by the default `forward`.
        template: The system instruction: a str, a ``{'role', 'content'}`` dict, a list
            of such dicts, or a `PromptTemplate`.
        memory: Config of the per-session memory (``dict(type=Memory, recent_n=...)``),
            or None for an agent that keeps no history (containers).
        output_format: A parser (e.g. `ToolParser`) whose `parse_response` fills
            `AgentMessage.formatted` and whose instructions reach the prompt.
        aggregator: Turns memory into the model's messages (`DefaultAggregator`).
        name: Sender name of replies; defaults to the class name.
        description: What the agent does, for other agents and UIs.
        hooks: `Hook` instances (or config dicts) registered in order.

    Example:
        ```python
        agent = Agent(llm, 'Answer in one word.')
        reply = agent('What colour is the sky?')  # AgentMessage(sender='Agent', ...)
        agent.state_dict()['memory']              # both messages, as dicts
        ```
    """

    _stream_forward: ClassVar[bool] = False

    @staticmethod
    def _driver(flow: Flow[Any]) -> Any:
        """Runs this class's flows (the call path, `forward`): synchronously here."""
        return run_sync(flow)

    def __init__(
        self,
        llm: Any = None,
        template: Any = None,
        memory: Mapping[str, Any] | type[Memory] | None = _DEFAULT_MEMORY,
        output_format: Any = None,
        aggregator: Any = _DEFAULT_AGGREGATOR,
        name: str | None = None,
        description: str | None = None,
        hooks: list[Any] | None = None,
    ) -> None:
        super().__init__()
        self.name = name or type(self).__name__
        self.llm = create_object(llm)
        self.template = template
        self.memory: MemoryManager | None = MemoryManager(memory) if memory is not None else None
        self.output_format = create_object(output_format)
        self.aggregator = create_object(aggregator)
        self.description = description
        for hook in hooks or []:
            self.register_hook(create_object(hook))

    # -- the call path --

    def __call__(self, *message: MessageLike, session_id: Hashable = 0, **kwargs: Any) -> Any:
        """Run the call path; keyword arguments (e.g. ``stop_words=``) reach `forward` and the LLM."""
        return self._driver(agent_call_flow(self, message, session_id, kwargs))

    def forward(self, *message: AgentMessage, session_id: Hashable = 0, **kwargs: Any) -> Any:
        """Aggregate the session's memory into a prompt, ask the LLM, parse the reply."""
        return self._driver(self._chat_flow(session_id, kwargs))

    def _chat_flow(self, session_id: Hashable, kwargs: Mapping[str, Any]) -> Flow[AgentMessage]:
        raw = yield self.llm_call("chat", self.get_prompt(session_id), session_id, kwargs)
        return self.make_response(raw)

    def llm_call(self, method: str, prompt: Any, session_id: Hashable, kwargs: Mapping[str, Any]) -> Call:
        """The effect of calling ``llm.<method>(prompt, **kwargs)`` for this session.

        Async models also get the session id (``session_ids=``); sync models run in a worker
        thread when an async agent drives the call, so the event loop never blocks.
        """
        fn = getattr(self._require_llm(), method)
        if inspect.iscoroutinefunction(fn):
            return Call(fn, (prompt,), {"session_ids": session_id, **kwargs})
        return Call(fn, (prompt,), kwargs, offload=True)

    def get_prompt(self, session_id: Hashable = 0) -> list[dict[str, Any]]:
        """The messages the LLM would receive for this session now."""
        if self.memory is None:
            raise UserError(f"{self.name} was built with memory=None, so it has no history to prompt with")
        memory = self.memory.get(session_id) or Memory()
        return self.aggregator.aggregate(memory, self.name, self.output_format, self.template)  # type: ignore[no-any-return]

    def make_response(
        self, raw: Any, stream_state: AgentStatusCode = AgentStatusCode.END, extra_info: Any = None
    ) -> AgentMessage:
        """Wrap raw model text as this agent's message, parsing it with `output_format`.

        A reply the parser rejects is still returned (errors are data): `formatted` is None
        and ``extra_info['parse_error']`` says why, so the caller can ask the model again.
        """
        formatted = None
        if self.output_format is not None and isinstance(raw, str):
            try:
                formatted = self.output_format.parse_response(raw)
            except ParseError as exc:
                extra_info = {**(extra_info or {}), "parse_error": exc.err_msg}
        return AgentMessage(
            sender=self.name, content=raw, formatted=formatted, extra_info=extra_info, stream_state=stream_state
        )

    def _require_llm(self) -> Any:
        if self.llm is None:
            raise UserError(f"{type(self).__name__} has no llm; pass one, or override forward()")
        return self.llm

    # -- memory and hooks --

    def update_memory(self, message: MessageLike | Sequence[MessageLike] | None, session_id: Hashable = 0) -> None:
        """Add messages to a session's memory (no-op for memory-less agents)."""
        if self.memory is not None:
            self.memory.add(message, session_id=session_id)

    def register_hook(self, hook: Hook) -> RemovableHandle:
        """Register a hook to run around every call; the handle's `remove()` unregisters it."""
        handle = RemovableHandle(self._hooks)
        self._hooks[handle.id] = hook
        return handle


class AsyncAgent(Agent):
    """`Agent` whose call is awaited; hooks may be sync or async; sync LLMs run in a worker thread."""

    @staticmethod
    def _driver(flow: Flow[Any]) -> Any:
        """Flows run on the event loop: calls return awaitables."""
        return run_async(flow)


class StreamingAgent(Agent):
    """`Agent` whose call yields `AgentMessage` chunks (cumulative text) and then the final END message."""

    _stream_forward: ClassVar[bool] = True

    @staticmethod
    def _driver(flow: Flow[Any]) -> Any:
        """Flows stream: calls return iterators of chunks."""
        return run_stream(flow)

    def forward(self, *message: AgentMessage, session_id: Hashable = 0, **kwargs: Any) -> Iterator[AgentMessage]:
        """Stream the LLM's reply as messages; the last one carries `AgentStatusCode.END`."""
        llm = self._require_llm()
        for status, text, extra in llm.stream_chat(self.get_prompt(session_id), **kwargs):
            yield self.make_response(text, AgentStatusCode(status), _extra(extra))


class AsyncStreamingAgent(Agent):
    """Async twin of `StreamingAgent`: ``async for chunk in agent(...)``."""

    _stream_forward: ClassVar[bool] = True

    @staticmethod
    def _driver(flow: Flow[Any]) -> Any:
        """Flows stream asynchronously: calls return async iterators of chunks."""
        return run_astream(flow)

    async def forward(
        self, *message: AgentMessage, session_id: Hashable = 0, **kwargs: Any
    ) -> AsyncIterator[AgentMessage]:
        """Stream the LLM's reply as messages; the last one carries `AgentStatusCode.END`."""
        llm = self._require_llm()
        prompt = self.get_prompt(session_id)
        if inspect.isasyncgenfunction(llm.stream_chat):
            stream = llm.stream_chat(prompt, session_ids=session_id, **kwargs)
        else:
            stream = _thread_stream(llm.stream_chat(prompt, **kwargs))
        async for status, text, extra in stream:
            yield self.make_response(text, AgentStatusCode(status), _extra(extra))


def _extra(extra: Any) -> Any:
    return extra if extra else None


async def _thread_stream(items: Iterator[Any]) -> AsyncIterator[Any]:
    """Iterate a blocking iterator from a worker thread, one item at a time."""
    done = object()
    while True:
        item = await asyncio.to_thread(next, items, done)
        if item is done:
            return
        yield item
