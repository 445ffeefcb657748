r"""Typed stream events: one vocabulary for every agent and every consumer.

``agent.stream_events(...)`` runs an agent and yields what happens, as it happens::

    for event in agent.stream_events('What is 3 * 1122?'):
        match event:
            case TextDelta(delta=delta):
                print(delta, end='')
            case ToolCallDelta(delta=delta):
                print(delta, end='')  # the arguments' JSON as the model writes it
            case ToolCallStarted(name=name, arguments=arguments):
                print(f'\n-> {name}({arguments})')
            case ToolResult(name=name, output=output):
                print(f'<- {name}: {output}')
            case Final(message=message):
                print('\nanswer:', message.content)

| event | when |
|---|---|
| `TextDelta` | the model wrote more of its reply (``delta``; ``text`` is the reply so far) |
| `ReasoningDelta` | the model's reasoning grew (kept apart from the answer) |
| `ToolCallDelta` | the model is writing a native tool call (its place, id, name, the arguments text so far) |
| `ToolCallStarted` | a tool call is about to run (id, tool name, decoded arguments) |
| `ToolResult` | a tool call ended: ``"ok"``, ``"error"``, ``"refused"`` or ``"repeated"``, with its output |
| `ApprovalNeeded` | the run paused: these calls wait for a person's decision (`resume_events` goes on) |
| `SubAgentStarted` / `SubAgentEnded` | a sub-agent of the tree took over / gave its answer back |
| `Final` | the run's reply (``paused`` when it stopped for approval); always the last event |

Every event names the ``agent`` it comes from, so a consumer can tell a sub-agent's text
from the top-level answer (an inner agent that carries its owner's name, as
`AgentForInternLM`'s does, is reported as its owner). Events are produced once, where
things happen: the tool loop reports calls, results and pauses (`plait.effects.Report`), and an interceptor that only
``stream_events`` installs reports model replies and sub-agents. Agents of every paradigm
(native tool calls, ReAct, the InternLM2 protocol, containers) and every mode give the same
sequence. A non-streaming agent's model calls are made streamed when the model can
stream (its text then arrives as it is written; the agent gets the same reply).

The Lagent-style stream (``for chunk in agent(...)`` on a streaming agent: `AgentMessage`
chunks with cumulative ``content`` and a ``stream_state``) is unchanged: events are an
opt-in view, never mixed into it.

A sub-agent run as a tool (``agent.as_tool()``) that pauses for approval pauses its caller: only
the top-level `ApprovalNeeded` is reported, its calls named ``'<call id>/<the sub-agent's call id>'``.

Why this shape: like the OpenAI Agents SDK and pydantic-ai, events are small typed objects
matched by type (``match``/``isinstance``), with text as deltas, and the run's result as
the last event rather than a separate object; unlike them, one call gives both sync and
async (the agent's own mode), and each event carries the agent it came from instead of a
separate "agent updated" event, because plait's trees nest agents freely. Each event has
`to_dict` for wires (SSE, the web page).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from .driver import run_astream, run_stream
from .effects import AgentCall, Effect, Emit, Flow, ModelCall, Report
from .interceptors import Interceptor
from .llms.response import ModelResponse, ToolCall, ToolCallsSoFar
from .schema import ActionReturn, ActionStatusCode, AgentMessage, AgentStatusCode, PendingCall

__all__ = [
    "ApprovalNeeded",
    "Final",
    "ReasoningDelta",
    "StreamEvent",
    "SubAgentEnded",
    "SubAgentStarted",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallStarted",
    "ToolResult",
    "aevents_of",
    "agent_name",
    "events_of",
    "tool_result_event",
]


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """Something that happened in a run (see the module docstring); `agent` is who did it."""

    agent: str
    type: ClassVar[str] = "event"

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-able data: ``{"type": ..., field: value, ...}``."""
        data: dict[str, Any] = {"type": self.type}
        for item in fields(self):
            data[item.name] = _jsonable(getattr(self, item.name))
        return data


def _jsonable(value: object) -> object:
    if isinstance(value, AgentMessage):
        return value.model_dump(mode="json")
    if isinstance(value, PendingCall):
        asked = {"question": value.question} if value.question is not None else {}
        return {"id": value.id, "name": value.name, "arguments": value.arguments, **asked}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


@dataclass(frozen=True, slots=True)
class TextDelta(StreamEvent):
    """The model wrote more of its reply.

    Attributes:
        delta: The new text.
        text: The reply so far (what a Lagent stream's ``content`` holds).
    """

    delta: str = ""
    text: str = ""
    type: ClassVar[str] = "text_delta"


@dataclass(frozen=True, slots=True)
class ReasoningDelta(StreamEvent):
    """The model's reasoning grew (never part of the answer).

    Attributes:
        delta: The new reasoning text.
        text: The reasoning so far in this reply.
    """

    delta: str = ""
    text: str = ""
    type: ClassVar[str] = "reasoning_delta"


@dataclass(frozen=True, slots=True)
class ToolCallDelta(StreamEvent):
    """The model wrote more of a native tool call (streamed by the model, before the call's `ToolCallStarted`).

    The deltas of one call, joined, are its arguments text (`ToolCallStarted.arguments` is
    that text decoded). The first delta of a call may be empty: it says the call began.
    A call the run does not make (the model called a tool on the last turn, which must
    answer) has deltas but no `ToolCallStarted`.

    Attributes:
        index: The call's place in the model's turn (0 for the first).
        id: The call's id, once the model gave it (``''`` before).
        name: The tool, once known (``''`` before).
        delta: The new arguments text (JSON being written: not for showing as the answer).
        arguments: The arguments text so far.
    """

    index: int = 0
    id: str = ""
    name: str = ""
    delta: str = ""
    arguments: str = ""
    type: ClassVar[str] = "tool_call_delta"


@dataclass(frozen=True, slots=True)
class ToolCallStarted(StreamEvent):
    """A tool call is about to run.

    Attributes:
        id: The call's id (the model's, else its place in the turn).
        name: The tool (``Tool`` or ``Tool.api``).
        arguments: The decoded arguments (a dict; a string the model wrote that is not JSON stays a string).
    """

    id: str = ""
    name: str = ""
    arguments: object = None
    type: ClassVar[str] = "tool_call_started"


@dataclass(frozen=True, slots=True)
class ToolResult(StreamEvent):
    """A tool call ended.

    Attributes:
        id: The call's id (as in its `ToolCallStarted`; a refused call has none before).
        name: The tool.
        status: ``"ok"``, ``"error"`` (the tool failed or its arguments were wrong),
            ``"refused"`` (a person or a rule said no; it did not run) or ``"repeated"``
            (the same call was made before in this run; it did not run again).
        output: The result as text (the error's text when it failed).
        result: The tool's `ActionReturn`, when it gave one (files, images, structured data).
    """

    id: str = ""
    name: str = ""
    status: str = "ok"
    output: str = ""
    result: ActionReturn | None = field(default=None, repr=False)
    type: ClassVar[str] = "tool_result"

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-able data (without the `ActionReturn` object)."""
        return {"type": self.type, "agent": self.agent, "id": self.id, "name": self.name,
                "status": self.status, "output": self.output}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ApprovalNeeded(StreamEvent):
    """The run paused: `calls` wait for a person's decision (``resume``/``resume_events`` goes on)."""

    calls: tuple[PendingCall, ...] = ()
    type: ClassVar[str] = "approval_needed"


@dataclass(frozen=True, slots=True)
class SubAgentStarted(StreamEvent):
    """A sub-agent took over (`agent`), called by `parent`."""

    parent: str = ""
    type: ClassVar[str] = "sub_agent_started"


@dataclass(frozen=True, slots=True)
class SubAgentEnded(StreamEvent):
    """A sub-agent gave its answer back to `parent` (`error`: it raised instead)."""

    parent: str = ""
    error: str | None = None
    type: ClassVar[str] = "sub_agent_ended"


@dataclass(frozen=True, slots=True)
class Final(StreamEvent):
    """The run's reply; the last event.

    Attributes:
        message: The reply (``stream_state`` ``INTERRUPTED`` and the waiting `PendingCall`s as
            its content when the run paused for approval).
    """

    message: AgentMessage = field(default_factory=lambda: AgentMessage(sender="", content=""))
    type: ClassVar[str] = "final"

    @property
    def paused(self) -> bool:
        """Whether the run paused for approval rather than answering."""
        return self.message.stream_state == AgentStatusCode.INTERRUPTED

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON-able data, with ``paused``."""
        return {"type": self.type, "agent": self.agent, "paused": self.paused, "message": _jsonable(self.message)}


def agent_name(agent: object) -> str:
    """The name an agent's events carry: its ``name``, else its class name."""
    name = getattr(agent, "name", None)
    return name if isinstance(name, str) and name else type(agent).__name__


def _text_of(output: object) -> str:
    from .agents.aggregator.default_aggregator import content_to_text

    return content_to_text(output)


def tool_result_event(agent: str, call_id: str, name: str, result: object, status: str | None = None) -> ToolResult:
    """The `ToolResult` event of a call's result (an executor's `AgentMessage`, an `ActionReturn` or text)."""
    content = result.content if isinstance(result, AgentMessage) else result
    action = content if isinstance(content, ActionReturn) else None
    if status is None:
        status = "ok" if action is None or action.state == ActionStatusCode.SUCCESS else "error"
    output = _text_of(content)
    return ToolResult(agent, call_id, name, status, output, action)


# -- producing events: an interceptor only stream_events installs ------------------------------


@dataclass(frozen=True, slots=True)
class _ReplyStarted:
    agent: str


@dataclass(frozen=True, slots=True)
class _ReplyEnded:
    agent: str
    result: object


class _Tap(Interceptor):
    """Turns reports into chunks and marks where each model reply and sub-agent call begins and ends."""

    effects = (Report, ModelCall, AgentCall)

    def around(self, effect: Effect[Any]) -> Flow[Any]:
        if isinstance(effect, Report):
            if effect.make is ApprovalNeeded and self.relayed[-1]:
                return None  # a sub-agent run as a tool paused: its caller reports the pause, with ids it can resume
            yield Emit(effect.event)
            return None
        if isinstance(effect, ModelCall):
            name = agent_name(effect.agent) if effect.agent is not None else agent_name(effect.llm)
            yield Emit(_ReplyStarted(name))
            result = yield _streamed(effect)
            yield Emit(_ReplyEnded(name, result))
            return result
        assert isinstance(effect, AgentCall)
        name, parent = agent_name(effect.agent), self.parent
        if name == parent:  # an agent's own inner agent (AgentForInternLM's): the same agent to a reader
            return (yield effect)
        self.stack.append(name)
        self.relayed.append(effect.tool_call is not None)
        yield Emit(SubAgentStarted(name, parent))
        try:
            result = yield effect
        except Exception as exc:
            self.stack.pop()
            self.relayed.pop()
            yield Emit(SubAgentEnded(name, parent, f"{type(exc).__name__}: {exc}"))
            raise
        self.stack.pop()
        self.relayed.pop()
        yield Emit(SubAgentEnded(name, parent))
        return result

    def __init__(self, top: str) -> None:
        self.stack = [top]
        self.relayed = [False]  # per level: whether the agent's caller reports its pause (`AgentCall.tool_call`)

    @property
    def parent(self) -> str:
        return self.stack[-1]


def _streamed(effect: ModelCall[Any]) -> ModelCall[Any]:
    """The call made as ``stream_chat`` where the model can stream it, so that its text arrives as it is written.

    A ``chat`` call streams with any model that has ``stream_chat`` (the result is the text,
    as ``chat`` gives it); a ``complete`` call (tools) streams when its agent maps the chunks
    (`ModelCall.each`) and the model streams tool calls (``stream_tools``).
    """
    if effect.method == "stream_chat" or not callable(getattr(effect.llm, "stream_chat", None)):
        return _with_calls(effect)
    if effect.method == "chat":
        return effect.replace(method="stream_chat", follow=False, each=effect.each or _chat_item)
    if effect.method == "complete" and effect.each is not None and getattr(effect.llm, "stream_tools", False):
        return _with_calls(effect.replace(method="stream_chat", follow=False))
    return effect


def _with_calls(effect: ModelCall[Any]) -> ModelCall[Any]:
    """A streamed call with tools whose chunks also carry the tool calls being written (`_CallsSoFar`)."""
    each = effect.each
    if not effect.stream or each is None or not effect.params.get("tools"):
        return effect

    def each_with_calls(item: Any) -> object:
        chunk = each(item)
        extra = item[2] if isinstance(item, tuple) and len(item) == 3 else None
        if isinstance(extra, ToolCallsSoFar) and item[0] != AgentStatusCode.END:
            return _CallsSoFar(chunk, extra.tool_calls)
        return chunk

    return effect.replace(each=each_with_calls)


@dataclass(frozen=True, slots=True)
class _CallsSoFar:
    """A chunk of a streamed model call (None: the agent showed nothing new) and the tool calls written so far."""

    chunk: object
    calls: tuple[ToolCall, ...]
    stream_state: ClassVar[AgentStatusCode] = AgentStatusCode.STREAM_ING  # a chunk on the way, for the driver


def _chat_item(item: Any) -> object:
    """A ``stream_chat`` item of a call made for ``chat``: a chunk on the way, the text at the end."""
    status, text, _ = item
    if status == AgentStatusCode.END:
        return str(text)
    return AgentMessage(sender="", content=text, stream_state=AgentStatusCode.STREAM_ING)


def _reply_text(result: object) -> tuple[str, str]:
    """A finished model call's answer text and reasoning text, whatever the method returned."""
    content = getattr(result, "content", result)
    reasoning = getattr(result, "reasoning", None)
    if reasoning is None and isinstance(result, AgentMessage) and isinstance(result.extra_info, Mapping):
        reasoning = getattr(result.extra_info.get("response"), "reasoning", None)  # a stream's last chunk
    text = content if isinstance(content, str) else ""
    return text, str(getattr(reasoning, "text", "") or "") if reasoning is not None else ""


class _Reply:
    """A model reply being streamed: whose, its text, reasoning and tool calls (name, arguments) so far."""

    __slots__ = ("agent", "calls", "reasoning", "text")

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.text = self.reasoning = ""
        self.calls: list[tuple[str, str, str]] = []  # (id, name, arguments) per call index


def _reply_calls(result: object) -> list[ToolCall]:
    """A finished model call's native tool calls, whatever the method returned."""
    if isinstance(result, AgentMessage) and isinstance(result.extra_info, Mapping):
        result = result.extra_info.get("response")  # a stream's last chunk
    return result.tool_calls if isinstance(result, ModelResponse) else []


class _Translator:
    """Reads a streaming run's items (chunks, then the result) and gives the events they mean."""

    def __init__(self, top: str) -> None:
        self.top = top
        self.replies: list[_Reply] = []  # the open model calls

    def feed(self, item: object) -> list[StreamEvent]:
        if isinstance(item, StreamEvent):
            return [item]
        if isinstance(item, _ReplyStarted):
            self.replies.append(_Reply(item.agent))
            return []
        if isinstance(item, _ReplyEnded):
            if not self.replies:
                return []
            text, reasoning = _reply_text(item.result)
            reply = self.replies[-1]
            events = self._grow(reply, text if not reply.text else reply.text, reasoning or reply.reasoning)
            if reply.calls:  # the last of the arguments (a call streamed without any ends as "{}")
                events += self._calls(reply, _reply_calls(item.result)[: len(reply.calls)])
            self.replies.pop()
            return events
        if isinstance(item, _CallsSoFar):
            events = self.feed(item.chunk) if item.chunk is not None else []
            return events + self._calls(self.replies[-1], item.calls) if self.replies else events
        if self.replies and isinstance(item, AgentMessage):
            reply = self.replies[-1]
            content = item.content if isinstance(item.content, str) else reply.text
            reasoning = item.reasoning.text if item.reasoning is not None else reply.reasoning
            return self._grow(reply, content, reasoning)
        return []  # a protocol's own chunk (Lagent's stream states): the events already say it

    @staticmethod
    def _grow(reply: _Reply, text: str, reasoning: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        name = reply.agent
        if reasoning != reply.reasoning:
            delta = reasoning[len(reply.reasoning) :] if reasoning.startswith(reply.reasoning) else reasoning
            reply.reasoning = reasoning
            if delta:
                events.append(ReasoningDelta(name, delta, reasoning))
        if text != reply.text:
            delta = text[len(reply.text) :] if text.startswith(reply.text) else text
            reply.text = text
            if delta:
                events.append(TextDelta(name, delta, text))
        return events

    @staticmethod
    def _calls(reply: _Reply, calls: Sequence[ToolCall]) -> list[StreamEvent]:
        """A `ToolCallDelta` for each call that is new or grew (the model's stream never takes text back)."""
        events: list[StreamEvent] = []
        for index, call in enumerate(calls):
            now = (call.id, call.name, call.arguments)
            before = reply.calls[index] if index < len(reply.calls) else None
            if now == before:
                continue
            seen = before[2] if before is not None and call.arguments.startswith(before[2]) else ""
            if before is None:
                reply.calls.append(now)
            else:
                reply.calls[index] = now
            delta = call.arguments[len(seen) :]
            events.append(ToolCallDelta(reply.agent, index, call.id, call.name, delta, call.arguments))
        return events

    def final(self, result: object) -> Final:
        message = result if isinstance(result, AgentMessage) else AgentMessage(sender=self.top, content=result)
        return Final(self.top, message)


def events_of(flow: Flow[Any], agent: object, interceptors: Sequence[Interceptor]) -> Iterator[StreamEvent]:
    """Run `flow` (an agent's call path) in this thread and yield its events (see the module docstring)."""
    top = agent_name(agent)
    translator = _Translator(top)
    run = run_stream(flow, (_Tap(top), *interceptors))
    result: object = None
    try:
        for item in run:
            result = item
            yield from translator.feed(item)
    finally:
        run.close()
    yield translator.final(result)


async def aevents_of(flow: Flow[Any], agent: object, interceptors: Sequence[Interceptor]) -> AsyncIterator[StreamEvent]:
    """Async twin of `events_of`: runs `flow` on the event loop."""
    top = agent_name(agent)
    translator = _Translator(top)
    result: object = None
    async with aclosing(run_astream(flow, (_Tap(top), *interceptors))) as run:
        async for item in run:
            result = item
            for event in translator.feed(item):
                yield event
    yield translator.final(result)
