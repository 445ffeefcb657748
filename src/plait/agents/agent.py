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

from collections.abc import AsyncIterator, Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import aclosing
from types import MappingProxyType
from typing import Any, ClassVar, Literal, TypeVar, Union, cast

from ..context import ContextPolicy, PolicyName
from ..driver import run_astream, run_async, run_stream, run_sync
from ..effects import Flow, ModelCall, runs_in_place
from ..events import StreamEvent, aevents_of, events_of
from ..exceptions import OutputValidationError, ParseError, UserError
from ..hooks.hook import Hook, RemovableHandle
from ..llms.response import ModelResponse, ToolCallsSoFar, reasoning_so_far
from ..memory import Memory, MemoryManager
from ..memory.base_memory import MessageLike
from ..outputs import OutputInvalid, OutputType, output_type_of
from ..schema import AgentMessage, AgentStatusCode, Reasoning, ToolOutput
from ..types import Aggregator
from ..untrusted import as_text, clean_text
from ..utils.config import create_object
from ..utils.names import check_keywords, init_parameters
from ._reply_info import CUT_SHORT, cut_note, finish_reason_of, reply_info
from .aggregator.default_aggregator import DefaultAggregator
from .call_path import agent_call_flow, agent_resume_flow
from .module import AgentModule

__all__ = ["Agent", "AgentCore", "AsyncAgent", "AsyncStreamingAgent", "StreamingAgent", "flow_forward"]

F = TypeVar("F", bound=Callable[..., Any])


def flow_forward(method: F) -> F:
    """Mark a ``forward`` that only drives `forward_flow`, so the call path runs the flow in place (`runs_in_place`)."""
    return runs_in_place(method)


Guardrail = Callable[[str], Any]
"""``fn(text) -> str | None`` (or a coroutine function): a string is the reason to refuse."""

Decision = Union[bool, str, Mapping[str, Any], ToolOutput]
"""A person's decision on a paused tool call: True (run it), False (refuse), the reason to tell the model, or a
`ToolOutput` (the call's result, given instead of running it: how an external tool's call is answered).

For a call that asks a question (`PendingCall.question`), the answer: ``{'action': 'accept', 'content': {...}}``,
``'decline'`` or ``'cancel'``.
"""

_DEFAULT_MEMORY: Mapping[str, object] = MappingProxyType({"type": Memory})
_DEFAULT_AGGREGATOR: Mapping[str, object] = MappingProxyType({"type": DefaultAggregator})


def _token_limit(params: Mapping[str, object], llm: object) -> object:
    """The longest reply `params` asked `llm` for (None: not known)."""
    for key in ("max_new_tokens", "max_tokens"):
        if params.get(key) is not None:
            return params[key]
    gen_params = getattr(llm, "gen_params", None)
    return gen_params.get("max_new_tokens") if isinstance(gen_params, Mapping) else None


def parse_error(message: AgentMessage) -> str | None:
    """Why the agent's parser rejected this reply (``extra_info['parse_error']``, see `AgentCore.make_response`)."""
    extra = message.extra_info
    if isinstance(extra, Mapping) and extra.get("parse_error"):
        return str(extra["parse_error"])
    return None


class AgentCore(AgentModule):
    """Everything an agent is except how it is called: the base of `Agent` and its mode siblings.

    `Agent`, `AsyncAgent`, `StreamingAgent` and `AsyncStreamingAgent` add ``__call__`` and
    ``forward`` in their mode over this one core, so no async method overrides a sync one;
    the three are registered as virtual subclasses of `Agent`, so ``isinstance(x, Agent)``
    holds for every agent as users expect. A paradigm writes its logic once on a core
    (`forward_flow`) and gets one class per mode from it. The arguments are `Agent`'s.
    """

    _stream_forward: ClassVar[bool] = False
    forward: Callable[..., Any]
    """What the agent does with its inputs; each mode class defines it (driving `forward_flow`)."""

    def __init__(
        self,
        llm: object = None,
        template: object = None,
        memory: Mapping[str, object] | type[Memory] | None = _DEFAULT_MEMORY,
        output_format: object = None,
        aggregator: object = _DEFAULT_AGGREGATOR,
        name: str | None = None,
        description: str | None = None,
        hooks: list[Any] | None = None,
        *,
        context_policy: PolicyName | Literal["auto"] | ContextPolicy | Mapping[str, object] | None = "auto",
        input_guardrails: Sequence[Guardrail] = (),
        output_guardrails: Sequence[Guardrail] = (),
        output_type: object = None,
        output_retries: int = 2,
        **unknown: object,
    ) -> None:
        # a paradigm forwards its **kwargs here: a misspelt argument is named with the closest valid one
        check_keywords(type(self).__name__, unknown, (), init_parameters(type(self)))
        super().__init__()
        self.name = name or type(self).__name__
        self.llm = create_object(llm)
        self.template = template
        self._memory: MemoryManager | None = MemoryManager(memory) if memory is not None else None
        self.output_format = create_object(output_format)
        self.aggregator: Aggregator = create_object(aggregator)
        self.description = description
        for hook in hooks or []:
            self.register_hook(create_object(hook))
        self.context_policy = _context_policy(context_policy)
        self.input_guardrails: list[Guardrail] = list(input_guardrails)
        self.output_guardrails: list[Guardrail] = list(output_guardrails)
        self.output_type: OutputType[Any] | None = output_type_of(output_type)
        if isinstance(output_retries, bool) or not isinstance(output_retries, int) or output_retries < 0:
            raise UserError(f"output_retries must be an int >= 0, got {output_retries!r}")
        self.output_retries = output_retries

    @property
    def memory(self) -> MemoryManager:
        """The memory of this agent's sessions (a `MemoryManager`).

        Raises:
            AttributeError: The agent was built with ``memory=None`` and keeps no history
                (``getattr(agent, 'memory', None)`` is then None).
        """
        if self._memory is None:
            raise AttributeError(f"{self.name} was built with memory=None: it keeps no history")
        return self._memory

    @memory.setter
    def memory(self, value: MemoryManager | None) -> None:
        self._memory = value

    # -- what the agent does --

    def forward_flow(
        self, inputs: Sequence[AgentMessage], session_id: Hashable, kwargs: Mapping[str, object]
    ) -> Flow[AgentMessage]:
        """`forward` as a flow, the same in every mode: aggregate memory into a prompt, ask the LLM, parse.

        Streaming agents stream the reply (``stream_chat``); the final chunk is the result.
        The others ask with ``chat``, unless the run is streamed (an agent inside a streaming
        container, the turns of `Internlm2Agent.stream_chat`): then the driver streams the
        reply too. Subclasses override this (not `forward`) to define what the agent does.
        """
        return (yield from self._chat_flow(self.get_prompt(session_id), session_id, self.answer_params(kwargs)))

    def _chat_flow(
        self, prompt: list[dict[str, object]], session_id: Hashable, params: Mapping[str, object]
    ) -> Flow[AgentMessage]:
        """One chat turn of the model on `prompt`: streamed when the agent or the run streams."""
        if self._stream_forward:
            final: AgentMessage = yield self.model_call("stream_chat", prompt, session_id, params, self._stream_chunk)
            return final
        llm = self._require_llm()
        # ``complete`` where the model has it and its ``chat`` is that reply's text: the reasoning is kept;
        # a typed answer (or its correction, maybe an inner agent's) also says why it ended (`reply_info`)
        typed = self.output_type is not None or "response_format" in params
        whole = typed or getattr(llm, "chat_is_complete_text", False)
        method = "complete" if whole and callable(getattr(llm, "complete", None)) else "chat"
        call: ModelCall[str | AgentMessage | ModelResponse] = ModelCall(
            llm, method, prompt, session_id, params, self._stream_chunk, True, *self._owner(session_id)
        )
        reply = yield call
        if isinstance(reply, ModelResponse):
            info = reply_info(reply) if typed else None
            return self.make_response(reply.content, extra_info=info, reasoning=reply.reasoning)
        return reply if isinstance(reply, AgentMessage) else self.make_response(reply)

    # -- typed outputs --

    def correction_flow(
        self, corrections: list[dict[str, object]], session_id: Hashable, params: Mapping[str, object]
    ) -> Flow[AgentMessage]:
        """Ask the model again after an invalid typed answer: the session's prompt, then `corrections` (not stored)."""
        return (yield from self._chat_flow(self.get_prompt(session_id) + corrections, session_id, params))

    def answer_params(self, kwargs: Mapping[str, object]) -> Mapping[str, object]:
        """`kwargs` for a model call whose reply is the answer: with the output type's ``response_format``."""
        if self.output_type is None or "response_format" in kwargs:
            return kwargs
        return {**kwargs, "response_format": self.output_type.response_format()}

    def output_flow(
        self, reply: AgentMessage, session_id: Hashable, kwargs: Mapping[str, object]
    ) -> Flow[AgentMessage]:
        """The reply as the agent's `output_type`: validated, and re-asked for while it does not match.

        An invalid reply goes back to the model with what was wrong (field paths and
        messages), up to ``output_retries`` times. The correction turns are sent, never
        stored: the session's memory keeps the valid answer only. Without an output type the
        reply is returned as it is.

        Raises:
            OutputValidationError: No reply matched (the call rolls back).
        """
        spec = self.output_type
        if spec is None:
            return reply
        text, answer = as_text(reply.content), reply
        corrections: list[dict[str, object]] = []
        llm = self.answer_llm()
        params = {k: v for k, v in self.answer_params(kwargs).items() if k not in ("tools", "tool_choice")}
        asked = dict(kwargs)  # what the last answer was asked with (its token limit)
        errors: list[str] = []
        finish: str | None = None
        for attempt in range(1 + self.output_retries):
            if attempt:
                resample = getattr(llm, "retry_params", None)  # the embedded engine: not the same reply again
                params = resample(params, finish) if callable(resample) else params
                answer = yield from self.correction_flow(corrections, session_id, params)
                text, asked = as_text(answer.content), params
            try:
                value = spec.validate(text)
            except OutputInvalid as invalid:
                finish = finish_reason_of(answer)
                errors = invalid.errors
                if finish in CUT_SHORT:  # the JSON did not end because the generation was stopped: say so first
                    errors = [cut_note(finish, _token_limit(asked, llm)), *errors]
                corrections += [
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": spec.correction(errors)},
                ]
                continue
            return reply.model_copy(update={"content": text, "formatted": value})
        raise OutputValidationError(text, errors, 1 + self.output_retries, finish if finish in CUT_SHORT else None)

    def answer_llm(self) -> Any:
        """The model that answers this agent's typed-answer corrections (`correction_flow`)."""
        return self.llm

    def resume_flow(self, session_id: Hashable, kwargs: Mapping[str, object]) -> Flow[AgentMessage]:
        """The session's paused run, going on where it stopped (the tool-using agents: `ToolLoopCore`).

        Raises:
            UserError: This agent does not run a tool loop, so it never pauses.
        """
        raise UserError(f"{type(self).__name__} runs no tool loop: it never pauses, so it has nothing to resume")

    def model_call(
        self,
        method: str,
        prompt: Any,
        session_id: Hashable,
        kwargs: Mapping[str, object],
        each: Callable[[Any], Any] | None = None,
    ) -> ModelCall[Any]:
        """The effect of calling ``llm.<method>(prompt, **kwargs)`` for this session."""
        return ModelCall(self._require_llm(), method, prompt, session_id, kwargs, each, False, *self._owner(session_id))

    def _owner(self, session_id: Hashable) -> tuple[Memory | None, AgentCore]:
        """A model call's `memory` and `agent` fields."""
        return (self._memory.held(session_id) if self._memory is not None else None), self

    def _stream_chunk(self, item: Any) -> AgentMessage:
        status, text, extra = item
        if isinstance(extra, (Reasoning, ToolCallsSoFar)):  # the reasoning (and tool calls) so far of a streaming reply
            return self.make_response(text, AgentStatusCode(status), reasoning=reasoning_so_far(extra))
        response = extra.get("response") if isinstance(extra, dict) else extra
        reasoning = getattr(response, "reasoning", None)  # the END item's reply carries the model's reasoning
        return self.make_response(
            text, AgentStatusCode(status), extra if extra else None, reasoning=reasoning if reasoning else None
        )

    def get_prompt(self, session_id: Hashable = 0) -> list[dict[str, object]]:
        """The messages the LLM would receive for this session now."""
        if self._memory is None:
            raise UserError(f"{self.name} was built with memory=None, so it has no history to prompt with")
        memory = self._memory.get(session_id) or Memory()
        return self.aggregator.aggregate(memory, self.name, self.output_format, self.template)

    def make_response(
        self,
        raw: Any,
        stream_state: AgentStatusCode = AgentStatusCode.END,
        extra_info: Any = None,
        reasoning: Reasoning | None = None,
    ) -> AgentMessage:
        """Wrap raw model text as this agent's message, parsing it with `output_format`.

        A reply the parser rejects is still returned (errors are data): `formatted` is None
        and ``extra_info['parse_error']`` says why, so the caller can ask the model again.
        The model's `reasoning` is kept beside the text; the parser never sees it.
        """
        formatted = None
        if isinstance(raw, str):
            raw = clean_text(raw)  # model text enters plait here: no lone surrogate is ever stored
        if self.output_format is not None and isinstance(raw, str):
            try:
                formatted = self.output_format.parse_response(raw)
            except ParseError as exc:
                extra_info = {**(extra_info or {}), "parse_error": exc.err_msg}
        return AgentMessage(
            sender=self.name,
            content=raw,
            formatted=formatted,
            extra_info=extra_info,
            stream_state=stream_state,
            reasoning=reasoning,
        )

    def _require_llm(self) -> Any:
        if self.llm is None:
            raise UserError(f"{type(self).__name__} has no llm; pass one, or override forward()")
        return self.llm

    # -- memory and hooks --

    def update_memory(self, message: MessageLike | Sequence[MessageLike] | None, session_id: Hashable = 0) -> None:
        """Add messages to a session's memory (no-op for memory-less agents)."""
        if self._memory is not None:
            self._memory.add(message, session_id=session_id)

    def register_hook(self, hook: Hook) -> RemovableHandle:
        """Register a hook to run around every call; the handle's `remove()` unregisters it."""
        handle = RemovableHandle(self._hooks)
        self._hooks[handle.id] = hook
        return handle


def _context_policy(choice: object) -> ContextPolicy | None:
    """An agent's `ContextPolicy` from its ``context_policy`` argument (a name, a config dict, a policy or None)."""
    if choice == "auto":  # trim for models that know their size; leave the others alone
        policy = ContextPolicy("trim", default_window=None)
        policy.auto = True
    elif isinstance(choice, str):
        policy = ContextPolicy(cast(PolicyName, choice))
    else:
        policy = create_object(choice)
    if policy is not None and not isinstance(policy, ContextPolicy):
        raise UserError(f"context_policy must be a policy name, a ContextPolicy or its config dict, not {choice!r}")
    if policy is not None:
        policy.owned = True
    return policy


class _Events(AgentCore):
    """``stream_events`` / ``resume_events`` for agents called in the calling thread (`plait.events`)."""

    def stream_events(self, *message: MessageLike, session_id: Hashable = 0, **kwargs: object) -> Iterator[StreamEvent]:
        """Run the agent like a call and yield typed events (`plait.events`), the reply last as `Final`.

        Works for every agent of this mode, streaming or not; the Lagent-style stream is unchanged.
        """
        return events_of(agent_call_flow(self, message, session_id, kwargs), self, self.interceptors())

    def resume_events(
        self, decisions: Mapping[str, Decision], session_id: Hashable = 0, **kwargs: object
    ) -> Iterator[StreamEvent]:
        """`Agent.resume` as typed events (see `stream_events`)."""
        return events_of(agent_resume_flow(self, decisions, session_id, kwargs), self, self.interceptors())


class _AsyncEvents(AgentCore):
    """``stream_events`` / ``resume_events`` for agents run on the event loop (`plait.events`)."""

    def stream_events(
        self, *message: MessageLike, session_id: Hashable = 0, **kwargs: object
    ) -> AsyncIterator[StreamEvent]:
        """Run the agent on the event loop and yield typed events: ``async for event in agent.stream_events(...)``."""
        return aevents_of(agent_call_flow(self, message, session_id, kwargs), self, self.interceptors())

    def resume_events(
        self, decisions: Mapping[str, Decision], session_id: Hashable = 0, **kwargs: object
    ) -> AsyncIterator[StreamEvent]:
        """`AsyncAgent.resume` as typed events (see `stream_events`)."""
        return aevents_of(agent_resume_flow(self, decisions, session_id, kwargs), self, self.interceptors())


class Agent(_Events):
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
        context_policy: Keep every request within the model's context window (`plait.context`):
            ``"trim"``, ``"summarise"``, ``"error"``, a `ContextPolicy` or its config dict
            (``dict(type=ContextPolicy, policy='summarise', summariser=...)``). ``"auto"`` (the
            default): trim for a model that tells its context size (the embedded model, HF
            models, servers that report it), with a logged notice the first time; leave the
            requests to a model of unknown size alone. None: always send the whole history.
        input_guardrails: Functions ``fn(text) -> str | None`` (sync, or async on async
            agents) run on every call's input before it reaches memory or the model; a
            returned string is the reason to refuse: `GuardrailTripped` is raised.
        output_guardrails: The same, run on the reply before it is stored; a refused reply
            is not kept (the turn rolls back) and `GuardrailTripped` is raised. (A streaming
            agent's chunks have been shown by then; its final message is what is refused.)
        output_type: The type of the answer (`plait.outputs`): a pydantic model, a dataclass,
            a `TypedDict` or a type such as ``list[str]``. The model is asked for JSON of its
            schema (``response_format``; a grammar on the embedded model), the reply's
            ``formatted`` holds the validated object and ``content`` the JSON text.
        output_retries: How many times an answer that does not validate is sent back to the
            model with the errors before `OutputValidationError` is raised (the correction
            turns are not stored in memory).

    Example:
        ```python
        agent = Agent(llm, 'Answer in one word.')
        reply = agent('What colour is the sky?')  # AgentMessage(sender='Agent', ...)
        agent.state_dict()['memory']              # both messages, as dicts
        ```
    """

    @runs_in_place
    def __call__(self, *message: MessageLike, session_id: Hashable = 0, **kwargs: object) -> AgentMessage:
        """Run the call path; keyword arguments (e.g. ``stop_words=``) reach `forward` and the LLM."""
        return run_sync(agent_call_flow(self, message, session_id, kwargs), self.interceptors())

    @flow_forward
    def forward(self, *message: AgentMessage, session_id: Hashable = 0, **kwargs: object) -> AgentMessage:
        """What the agent does with its inputs (they are already in memory): `forward_flow`, driven."""
        return run_sync(self.forward_flow(message, session_id, kwargs), self.interceptors())

    def resume(self, decisions: Mapping[str, Decision], session_id: Hashable = 0, **kwargs: object) -> AgentMessage:
        """Go on with a paused run: `decisions` maps call ids to True, False, a reason or a `ToolOutput`.

        Returns the reply (or, while calls still wait, another ``INTERRUPTED`` message).

        Raises:
            ResumeError: Nothing waits in the session, or a decision does not fit.
        """
        return run_sync(agent_resume_flow(self, decisions, session_id, kwargs), self.interceptors())


class AsyncAgent(_AsyncEvents):
    """`Agent` whose call is awaited; hooks may be sync or async; sync LLMs run in a worker thread."""

    @runs_in_place
    async def __call__(self, *message: MessageLike, session_id: Hashable = 0, **kwargs: object) -> AgentMessage:
        """Run the call path on the event loop."""
        return await run_async(agent_call_flow(self, message, session_id, kwargs), self.interceptors())

    @flow_forward
    async def forward(self, *message: AgentMessage, session_id: Hashable = 0, **kwargs: object) -> AgentMessage:
        """`forward_flow`, driven on the event loop."""
        return await run_async(self.forward_flow(message, session_id, kwargs), self.interceptors())

    async def resume(
        self, decisions: Mapping[str, Decision], session_id: Hashable = 0, **kwargs: object
    ) -> AgentMessage:
        """`Agent.resume`, awaited."""
        return await run_async(agent_resume_flow(self, decisions, session_id, kwargs), self.interceptors())


class StreamingAgent(_Events):
    """`Agent` whose call yields `AgentMessage` chunks (cumulative text) and then the final END message."""

    _stream_forward: ClassVar[bool] = True

    @runs_in_place
    def __call__(self, *message: MessageLike, session_id: Hashable = 0, **kwargs: object) -> Iterator[AgentMessage]:
        """Run the call path, yielding the reply's chunks and then the final END message."""
        yield from run_stream(agent_call_flow(self, message, session_id, kwargs), self.interceptors())

    @flow_forward
    def forward(self, *message: AgentMessage, session_id: Hashable = 0, **kwargs: object) -> Iterator[AgentMessage]:
        """Stream `forward_flow`: chunks, then the final message (``stream_state`` END)."""
        yield from run_stream(self.forward_flow(message, session_id, kwargs), self.interceptors())

    def resume(
        self, decisions: Mapping[str, Decision], session_id: Hashable = 0, **kwargs: object
    ) -> Iterator[AgentMessage]:
        """`Agent.resume`, streamed: chunks, then the final message."""
        yield from run_stream(agent_resume_flow(self, decisions, session_id, kwargs), self.interceptors())


class AsyncStreamingAgent(_AsyncEvents):
    """Async twin of `StreamingAgent`: ``async for chunk in agent(...)``."""

    _stream_forward: ClassVar[bool] = True

    @runs_in_place
    async def __call__(
        self, *message: MessageLike, session_id: Hashable = 0, **kwargs: object
    ) -> AsyncIterator[AgentMessage]:
        """Run the call path on the event loop, yielding chunks and then the final END message."""
        async with aclosing(
            run_astream(agent_call_flow(self, message, session_id, kwargs), self.interceptors())
        ) as run:
            async for chunk in run:  # left early: the run (its model stream, its memory) is closed now, not at GC
                yield chunk

    @flow_forward
    async def forward(
        self, *message: AgentMessage, session_id: Hashable = 0, **kwargs: object
    ) -> AsyncIterator[AgentMessage]:
        """Stream `forward_flow` on the event loop."""
        async with aclosing(run_astream(self.forward_flow(message, session_id, kwargs), self.interceptors())) as run:
            async for chunk in run:
                yield chunk

    async def resume(
        self, decisions: Mapping[str, Decision], session_id: Hashable = 0, **kwargs: object
    ) -> AsyncIterator[AgentMessage]:
        """`Agent.resume`, streamed on the event loop."""
        async with aclosing(
            run_astream(agent_resume_flow(self, decisions, session_id, kwargs), self.interceptors())
        ) as run:
            async for chunk in run:
                yield chunk


for _sibling in (AsyncAgent, StreamingAgent, AsyncStreamingAgent):
    Agent.register(_sibling)  # isinstance(x, Agent) holds for agents of every mode, as before the split
