"""``POST /v1/chat/completions`` for a served agent: any OpenAI client can talk to it.

plait's own `GPTAPI`, the openai SDK or a chat UI point their base URL at the
`AgentAPIServer` and get the agent's answers (tools, memory and all) as chat completions,
streamed as ``chat.completion.chunk`` events when they ask for ``stream``.

Sessions:

* With a session (the ``X-Session-Id`` header, or the body's ``metadata.session_id``, which
  the openai SDK sends as a standard argument: ``metadata={"session_id": ...}``) the agent
  keeps the conversation itself: only the request's last message (and any ``system``
  messages) is passed to it.
* Without one the request is self-contained, as OpenAI clients expect: its earlier messages
  are loaded into a fresh session, the last message (a ``user`` one) is answered, and the
  session is dropped. The body's ``user`` field is metadata (logged), never a session: two
  conversations of one end user stay apart.

A client's ``system`` and ``developer`` messages reach the agent as messages from ``system``
(its own system prompt stays first). Every body field is honoured or refused with a 400 naming
it (see `openai_request`): ``temperature``, ``top_p``, ``max_tokens`` /
``max_completion_tokens``, ``stop``, ``seed`` and the penalties go to the agent's model within
the server's caps. ``GET /v1/models`` lists the agent under the operator's name
(``plait serve --model-name``, default ``'plait-agent'``), and every reply names it. The
agent's tool calls travel in an extension field, ``plait_tool_calls`` (a list of
``{"tool", "arguments", "result", "ok"}``): on the reply's message, or on their own chunks
(empty ``delta``) as they happen. ``finish_reason`` and ``usage`` are the agent's model
calls' own (a `UsageMeter`): ``'length'`` when the last generation hit its token limit, usage
summed over every call (``null`` when the model reports none). With
``stream_options.include_usage`` the stream ends with a usage chunk, as OpenAI's does. Each
request is logged with its session, status and time.

Approval: when the agent pauses before tools that need a person's approval, the reply is an
assistant message with ``tool_calls`` (the waiting calls) and ``finish_reason`` ``'tool_calls'``,
as a model's would be; the client answers each with a ``tool`` message in the same session:
``approve`` (or yes / y / ok / true) runs the call, ``reject`` (or no / n / false / empty)
refuses it, any other text refuses it and is told to the model as the reason. A pause for approval
needs a session (``X-Session-Id``): without one the request is answered 409. ``tool`` messages that
answer no waiting call are refused (400, naming the message's ``tool_call_id``).

Client tools: a request's ``tools`` are the agent's external tools (`plait.agents.external_tools`),
offered to its model beside its own, with the client's ``tool_choice``. A call to one pauses the run
and the reply hands it to the client the same way (``tool_calls``, ``finish_reason`` ``'tool_calls'``);
the client's ``tool`` message for it is its result (`ToolOutput`). With a session the run waits
there and is resumed. Without one (LangChain, litellm) the client sends the whole conversation
back: the run is parked under that conversation (`ParkedRuns`) and the request that extends it with
the tool results takes it up; a request that matches no parked run (another worker, a restart) is
answered from its history, loaded with its ``tool_calls`` and results into a fresh session.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from aiohttp import web

from ...agents.decisions import EXTERNAL, call_id
from ...agents.external_tools import EXTERNAL_TOOLS_KEY, ExternalToolError, check_external_tools
from ...exceptions import PlaitError, ResumeError, UserError
from ...hooks.tool_log import ToolLog
from ...hooks.usage import Metered, UsageMeter
from ...memory.base_memory import MessageLike
from ...schema import AgentMessage, AgentStatusCode, PendingCall, ToolOutput
from ...types import JSONValue, SessionId
from ...untrusted import loads
from ._calls import agent_chunks, http_status
from .openai_request import OpenAIRequest, OpenAIRequestError, Turn, check_openai_request
from .parked_runs import ParkedRuns
from .requests import ServerLimits, session_of

__all__ = ["DEFAULT_MODEL_NAME", "Answer", "openai_routes"]

DEFAULT_MODEL_NAME = "plait-agent"
"""The name ``/v1/models`` lists a served agent under unless the operator sets one."""

logger = logging.getLogger("plait.serve")

_LOGGED = web.RequestKey("plait_logged", str)  # "session=... user=..." for the request's log line


def _reply_text(message: object) -> str:
    from ...agents.aggregator.default_aggregator import content_to_text

    content = getattr(message, "content", message)
    return content if isinstance(content, str) else content_to_text(content)


def _reasoning_text(message: object) -> str:
    """The model's reasoning on a reply or chunk (its `Reasoning` text), else ``''``."""
    reasoning = getattr(message, "reasoning", None)
    text = getattr(reasoning, "text", None)
    return text if isinstance(text, str) else ""


Parse = Callable[[object, ServerLimits], OpenAIRequest]
"""Reads a request body of the route's API into the checked chat request the agent is asked with."""


def _error(status: int, message: str, kind: str, param: str | None = None, code: str | None = None) -> web.Response:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    error = {"message": message, "type": kind, "param": param, "code": code}
    return web.json_response({"error": error}, status=status)


class Answer(Protocol):
    """One request's answer in its API's shapes (a chat completion; a Responses API response)."""

    def whole(self, reply: object, metered: Metered, tool_calls: list[dict[str, JSONValue]]) -> dict[str, JSONValue]:
        """The answer to a request that is not streamed: the agent's last reply, its usage and tool calls."""
        ...

    async def stream(
        self,
        request: web.Request,
        call: Any,
        inputs: Sequence[MessageLike],
        kwargs: Mapping[str, object],
        observers: tuple[UsageMeter, ToolLog],
        with_usage: bool,
        ephemeral: bool,
    ) -> web.StreamResponse:
        """The answer streamed as the agent's chunks arrive."""
        ...


class _Completion:
    """The chat-completion objects of one request (ids and timestamps shared by its chunks)."""

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model

    def whole(self, reply: object, metered: Metered, tool_calls: list[dict[str, JSONValue]]) -> dict[str, JSONValue]:
        waiting = _waiting(reply)
        message: dict[str, JSONValue] = {"role": "assistant", "content": None if waiting else _reply_text(reply)}
        reasoning = _reasoning_text(reply)
        if reasoning and not waiting:  # where OpenAI-compatible clients read a reasoning model's thinking
            message["reasoning_content"] = reasoning
        if waiting:
            message["tool_calls"] = _openai_calls(waiting)
        if tool_calls:
            message["plait_tool_calls"] = list(tool_calls)
        finish = "tool_calls" if waiting else _finish_reason(metered)
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": _usage(metered),
        }

    async def stream(
        self,
        request: web.Request,
        call: Any,
        inputs: Sequence[MessageLike],
        kwargs: Mapping[str, object],
        observers: tuple[UsageMeter, ToolLog],
        with_usage: bool,
        ephemeral: bool,
    ) -> web.StreamResponse:
        """``chat.completion.chunk`` events (`_stream`)."""
        return await _stream(request, call, inputs, kwargs, self, observers, with_usage, ephemeral)

    def usage_chunk(self, metered: Metered) -> bytes:
        body = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": _usage(metered),
        }
        return f"data: {json.dumps(body)}\n\n".encode()

    def chunk(
        self,
        delta: Mapping[str, JSONValue],
        finish_reason: str | None = None,
        tool_calls: list[dict[str, JSONValue]] | None = None,
    ) -> bytes:
        body: dict[str, JSONValue] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish_reason}],
        }
        if tool_calls:
            body["plait_tool_calls"] = list(tool_calls)
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()


def _waiting(reply: object) -> list[PendingCall]:
    """The calls an interrupted reply waits on (empty for any other reply)."""
    if getattr(reply, "stream_state", None) != AgentStatusCode.INTERRUPTED:
        return []
    content = getattr(reply, "content", None)
    return [call for call in content if isinstance(call, PendingCall)] if isinstance(content, list) else []


def _openai_calls(calls: Sequence[PendingCall]) -> list[JSONValue]:
    return [
        {
            "index": i,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
        }
        for i, call in enumerate(calls)
    ]


_APPROVE = frozenset({"approve", "approved", "yes", "y", "ok", "true"})
_REFUSE = frozenset({"", "reject", "rejected", "refuse", "refused", "no", "n", "false", "deny", "denied"})


def _answers(turns: Sequence[Turn]) -> int:
    """How many ``tool`` messages end the request (the client's answers to waiting calls)."""
    count = 0
    while count < len(turns) and turns[-1 - count].role == "tool":
        count += 1
    return count


def _decisions(turns: Sequence[Turn], external: set[str]) -> dict[str, bool | str | ToolOutput]:
    """The client's answers to waiting calls: the ``tool`` messages that end the request.

    A call to one of the client's tools gets the message as its output (`ToolOutput`); a call
    waiting for approval gets the client's word on it.
    """
    decisions: dict[str, bool | str | ToolOutput] = {}
    for turn in turns[len(turns) - _answers(turns) :]:
        if turn.tool_call_id in external:
            decisions[str(turn.tool_call_id)] = ToolOutput(turn.text)
            continue
        text = turn.text.strip()
        word = text.lower().rstrip(".!")
        decisions[str(turn.tool_call_id)] = True if word in _APPROVE else False if word in _REFUSE else text
    return decisions


def _check_answers(turns: Sequence[Turn]) -> None:
    """A self-contained request: every ``tool`` message answers a call of an earlier assistant message.

    Raises:
        OpenAIRequestError: One answers a call no earlier message made (naming its ``tool_call_id``).
    """
    made: set[str] = set()
    for i, turn in enumerate(turns):
        made.update(call["id"] for call in turn.tool_calls)
        if turn.role == "tool" and turn.tool_call_id not in made:
            raise OpenAIRequestError(
                f"'messages[{i}]' answers tool call {turn.tool_call_id!r}, which no earlier assistant message made",
                f"messages[{i}].tool_call_id",
            )


def _target(
    agent: Any, session: SessionId, ephemeral: bool, turns: Sequence[Turn], inputs: list[Any]
) -> tuple[Any, list[Any]]:
    """What answers the request: the agent with `inputs`, or, on a paused session, its ``resume`` with the decisions.

    Raises:
        OpenAIRequestError: The request ends with ``tool`` messages that answer no waiting call,
            or with neither a ``user`` nor a ``tool`` message.
    """
    paused = agent.run_state(session) if not ephemeral and callable(getattr(agent, "run_state", None)) else None
    waiting = set(paused.waiting) if paused is not None else set()
    answers = _answers(turns)
    if answers and ephemeral:  # a self-contained conversation that goes on from the client's tool results
        return agent, inputs
    for i in range(len(turns) - answers, len(turns)):
        if turns[i].tool_call_id not in waiting:
            raise OpenAIRequestError(
                f"'messages[{i}]' answers tool call {turns[i].tool_call_id!r}, which no paused run of this "
                "session waits on",
                f"messages[{i}].tool_call_id",
            )
    if answers and paused is not None:
        external = {call_id(call, i) for i, call in enumerate(paused.pending) if call.get("kind") == EXTERNAL}
        return agent.resume, [_decisions(turns, external)]
    if turns[-1].role != "user":
        last = len(turns) - 1
        raise OpenAIRequestError(
            f"the last message must be from 'user' (or 'tool' messages answering waiting calls), "
            f"not {turns[-1].role!r}",
            f"messages[{last}].role",
        )
    return agent, inputs


def _check_pause(reply: object, ephemeral: bool, session: SessionId) -> None:
    """A pause for approval without a session cannot be answered: say so (the session is dropped with the request).

    Calls to the client's own tools can: the client sends the conversation back with their results.
    """
    if ephemeral and any(not call.external for call in _waiting(reply)):
        raise ResumeError(
            "the agent paused for approval of a tool call: send an X-Session-Id header so the pause "
            "can be answered with tool messages",
            session,
        )


def _finish_reason(metered: Metered) -> str:
    return "length" if metered.finish_reason == "length" else "stop"


def _usage(metered: Metered) -> dict[str, JSONValue] | None:
    if not metered.reported:
        return None
    tokens = (metered.prompt_tokens, metered.completion_tokens, metered.total_tokens)
    return dict(zip(("prompt_tokens", "completion_tokens", "total_tokens"), tokens, strict=True))


def _history(turns: Sequence[Turn], agent_name: str) -> list[AgentMessage]:
    """A self-contained request's turns as memory messages: the assistant's tool calls and their results too."""
    history = []
    names: dict[str, str] = {}
    for turn in turns:
        if turn.role in ("user", "system"):
            history.append(AgentMessage(sender=turn.role, content=turn.text))
        elif turn.role == "assistant" and turn.tool_calls:
            names.update((call["id"], call["name"]) for call in turn.tool_calls)
            calls = [dict(call) for call in turn.tool_calls]
            history.append(AgentMessage(sender=agent_name, content=turn.text, formatted={"tool_calls": calls}))
        elif turn.role == "assistant" and turn.text:
            history.append(AgentMessage(sender=agent_name, content=turn.text))
        elif turn.role == "tool":
            extra = {"tool_call_id": turn.tool_call_id, "name": names.get(str(turn.tool_call_id), "")}
            history.append(AgentMessage(sender="ActionExecutor", content=turn.text, extra_info=extra))
    return history


def _opening(agent: Any, turns: Sequence[Turn], session: SessionId | None) -> tuple[SessionId, list[MessageLike]]:
    """The session a request is answered in, and the agent's inputs.

    With a session: the last message, after the client's system messages. Without one (a
    self-contained request) the earlier messages are loaded into a new session; one that ends
    with the client's tool results is loaded whole and goes on from them (no new input).

    Raises:
        OpenAIRequestError: A self-contained request's ``tool`` message answers no earlier call.
    """
    if session is not None:  # the client's system messages go with the question
        inputs: list[MessageLike] = [
            AgentMessage(sender="system", content=t.text) for t in turns[:-1] if t.role == "system"
        ]
        return session, [*inputs, turns[-1].text]
    _check_answers(turns)
    session = f"openai-{uuid.uuid4().hex}"
    rebuilt = _answers(turns) > 0
    if getattr(agent, "memory", None) is not None:
        name = str(getattr(agent, "name", None) or type(agent).__name__)
        agent.memory.create_instance(session).load(_history(turns if rebuilt else turns[:-1], name))
    return session, [] if rebuilt else [turns[-1].text]


def _client_calls(agent: Any, session: SessionId) -> list[str]:
    """The calls the session's run waits on when they are all calls to the client's tools, else none."""
    run = agent.run_state(session) if callable(getattr(agent, "run_state", None)) else None
    if run is None or not run.waiting:
        return []
    external = {call_id(call, i) for i, call in enumerate(run.pending) if call.get("kind") == EXTERNAL}
    return list(run.waiting) if set(run.waiting) <= external else []


def _client_tools(agent: Any, body: OpenAIRequest) -> dict[str, object]:
    """The keywords that offer the client's tools to the agent (``external_tools``, ``tool_choice``).

    Raises:
        OpenAIRequestError: The request has tools and the served agent takes none, or one is
            named as one of the agent's own.
    """
    if body.tools is None:
        return {}
    if not getattr(agent, "takes_external_tools", False):
        raise OpenAIRequestError(
            f"'tools' is not supported: the served agent ({type(agent).__name__}) does not take client tools "
            "(a function-calling agent does)",
            "tools",
            "unsupported_parameter",
        )
    own = [str(tool["function"]["name"]) for tool in agent.executor.openai_tools()]
    try:
        check_external_tools(body.tools, own, field="tools")
    except ExternalToolError as exc:
        raise OpenAIRequestError(str(exc), exc.where) from None
    kwargs: dict[str, object] = {EXTERNAL_TOOLS_KEY: body.tools}
    if body.tool_choice is not None:
        kwargs["tool_choice"] = body.tool_choice
    return kwargs


def _release(
    agent: Any, parked: ParkedRuns, tenant: str, turns: Sequence[Turn], session: SessionId, ephemeral: bool
) -> None:
    """After a request without a session: its run parked when it waits on the client's tools, else dropped."""
    if not ephemeral:
        return
    waiting = _client_calls(agent, session)
    if waiting:  # paused on the client's tools: kept for the conversation that answers them
        parked.park(tenant, turns, waiting, session)
    else:
        agent.reset(session, recursive=True)


def openai_routes(
    get_agent: Callable[[], Any],
    limits: ServerLimits | None = None,
    scope: Callable[[web.Request, SessionId], SessionId] | None = None,
    meter: UsageMeter | None = None,
    tool_log: ToolLog | None = None,
    using: Callable[[web.Request, SessionId], contextlib.AbstractContextManager[None]] | None = None,
    model_name: str = DEFAULT_MODEL_NAME,
) -> list[web.RouteDef]:
    """The routes: ``POST /v1/chat/completions``, ``POST /v1/responses``, ``GET /v1/models`` (the agent as a model).

    Both POST routes answer the same way (this module); `responses_route` reads and writes the
    Responses API's shapes.

    Args:
        get_agent: The served agent.
        limits: The server's caps on generation parameters.
        scope: A client's session id in its tenant's namespace (see `AccessControl.scope`).
        meter: The `UsageMeter` registered on the agent (None: usage and finish reasons unknown).
        tool_log: The `ToolLog` registered on the agent (None: tool calls not reported).
        using: A request's use of a session while it is answered (the server's `SessionTable`
            keeps a session in use in memory); None: not noted.
        model_name: The name the agent is listed under (``GET /v1/models``) and every reply names.
    """
    caps = limits or ServerLimits()
    usage = meter or UsageMeter()  # unregistered: it counts nothing, and every answer says so
    tools = tool_log or ToolLog()
    parked = ParkedRuns(lambda session: get_agent().reset(session, recursive=True), ttl=caps.session_ttl or math.inf)

    async def models(request: web.Request) -> web.Response:
        model = {"id": model_name, "object": "model", "created": 0, "owned_by": "plait"}
        return web.json_response({"object": "list", "data": [model]})

    from .response_store import ResponseStore
    from .responses_route import ResponseAnswer, check_responses_request  # it builds on this module

    stored = ResponseStore(get_agent, caps.max_stored_responses)
    scoped = scope or (lambda request, session: session)

    def route(path: str, parse: Parse, make: Callable[[str], Answer]) -> web.RouteDef:
        async def handle(request: web.Request) -> web.StreamResponse:
            started = time.perf_counter()
            response = await answer(request, parse, make)
            elapsed = (time.perf_counter() - started) * 1000
            logger.info("POST %s %s -> %d (%.0f ms)", path, request.get(_LOGGED, "-"), response.status, elapsed)
            return response

        return web.post(path, handle)

    async def answer(request: web.Request, parse: Parse, make: Callable[[str], Answer]) -> web.StreamResponse:
        agent = get_agent()
        try:
            body = parse(loads(await request.read()), caps)
            header = request.headers.get("X-Session-Id")
            session = body.session if header is None else session_of(header)
        except (ValueError, UserError) as exc:  # ParseError is a ValueError
            return _error(
                400, str(exc), "invalid_request_error", getattr(exc, "param", None), getattr(exc, "code", None)
            )
        completion = make(model_name)
        turns = body.turns
        if session is not None:
            session = scoped(request, session)
        tenant = str(scoped(request, "openai"))
        kept = body.store and stored.limit > 0 and session is None  # its session stays, for previous_response_id
        if isinstance(completion, ResponseAnswer):
            completion.stored, completion.previous = kept, body.previous_response
        try:
            offered = _client_tools(agent, body)
            session = stored.start(tenant, body, session)  # a stored response's session if it continues one
            ephemeral = session is None
            resumed = parked.take(tenant, turns) if ephemeral else None  # a stateless client's tool results
            session, inputs = (resumed, []) if resumed is not None else _opening(agent, turns, session)
        except OpenAIRequestError as exc:
            return _error(400, body.said(str(exc)), "invalid_request_error", body.param(exc.param), exc.code)
        request[_LOGGED] = f"session={'(none)' if ephemeral else session} user={body.user or '-'}"
        usage.take(session)  # nothing counted before this call belongs to it
        tools.take(session)
        answered: dict[str, JSONValue] | None = None
        continued = body.previous_response is not None
        own = ephemeral or continued  # the store's sessions are not the table's
        use = contextlib.nullcontext() if own or using is None else using(request, session)
        try:
            with use:
                call, inputs = _target(agent, session, ephemeral and resumed is None, turns, inputs)
                kwargs = {"session_id": session, **body.overrides, **(offered if call is agent else {})}
                if body.stream:
                    observers = (usage, tools)
                    streamed = await completion.stream(
                        request, call, inputs, kwargs, observers, body.include_usage, ephemeral and not kept
                    )
                    answered = getattr(completion, "final", None)
                    return streamed
                last = None
                async for chunk in agent_chunks(call, inputs, kwargs):
                    last = chunk
                _check_pause(last, ephemeral and not kept, session)
                answered = completion.whole(last, usage.take(session), tools.take(session))
                return web.json_response(answered)
        except OpenAIRequestError as exc:
            return _error(400, body.said(str(exc)), "invalid_request_error", body.param(exc.param), exc.code)
        except PlaitError as exc:
            return _error(http_status(exc), str(exc), type(exc).__name__)
        finally:
            if not stored.finish(tenant, body, session, answered, keep=kept and resumed is None, continued=continued):
                _release(agent, parked, tenant, turns, session, ephemeral)
            usage.take(session)  # what a failed call counted (nothing once answered)
            tools.take(session)

    return [
        route("/v1/chat/completions", check_openai_request, _Completion),
        route("/v1/responses", check_responses_request, ResponseAnswer),
        *stored.routes(lambda request: str(scoped(request, "openai"))),
        web.get("/v1/models", models),
    ]


async def _stream(
    request: web.Request,
    agent: Any,
    inputs: Sequence[MessageLike],
    kwargs: Mapping[str, object],
    completion: _Completion,
    observers: tuple[UsageMeter, ToolLog],
    with_usage: bool,
    ephemeral: bool = False,
) -> web.StreamResponse:
    meter, tool_log = observers
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    await response.write(completion.chunk({"role": "assistant", "content": ""}))
    sent = thought_sent = ""
    session = kwargs["session_id"]
    try:
        waiting: list[PendingCall] = []
        async for chunk in agent_chunks(agent, inputs, kwargs):
            ran = tool_log.take(session)
            if ran:  # tool calls since the last chunk, as they happened (an extension field)
                await response.write(completion.chunk({}, tool_calls=ran))
            waiting = _waiting(chunk)
            if waiting:
                _check_pause(chunk, ephemeral, session)
                await response.write(completion.chunk({"tool_calls": _openai_calls(waiting)}))
                continue
            thought = _reasoning_text(chunk)
            if thought and thought != thought_sent:  # reasoning_content deltas, as reasoning servers stream them
                extra = thought[len(thought_sent) :] if thought.startswith(thought_sent) else thought
                await response.write(completion.chunk({"reasoning_content": extra}))
                thought_sent = thought
            text = _reply_text(chunk)
            # a text that does not extend the last is a new reply (after a tool round): what was sent stays
            delta = text[len(sent) :] if text.startswith(sent) else f"\n\n{text}"
            if delta:
                await response.write(completion.chunk({"content": delta}))
            sent = text
        metered = meter.take(session)
        finish = "tool_calls" if waiting else _finish_reason(metered)
    except PlaitError as exc:  # the status line is gone: say it in the stream
        await response.write(completion.chunk({"content": f"\n[error: {type(exc).__name__}: {exc}]"}))
        metered, finish = meter.take(session), "error"
    await response.write(completion.chunk({}, finish, tool_calls=tool_log.take(session)))
    if with_usage:
        await response.write(completion.usage_chunk(metered))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response
