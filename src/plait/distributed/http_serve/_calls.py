"""Running an agent call from a request handler, whatever kind the agent is (private)."""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Mapping, Sequence
from typing import Any, cast

from ...exceptions import (
    LLMError,
    ParseError,
    ResumeError,
    SessionBusyError,
    SessionConflictError,
    SessionStoreError,
    UserError,
)
from ...llms._threaded import Producer, aiterate_thread
from ...memory.base_memory import MessageLike

__all__ = ["agent_chunks", "events_call", "http_status"]


def _is_async_agent(agent: object) -> bool:
    if inspect.iscoroutinefunction(agent) or inspect.isasyncgenfunction(agent):  # a function (`events_call`'s)
        return True
    call = getattr(agent, "__func__", None) or type(agent).__call__  # an agent, or one of its methods
    return inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)


def _run_sync(
    agent: Callable[..., object], inputs: Sequence[MessageLike], kwargs: Mapping[str, object]
) -> Producer[Any]:
    """A sync agent's call as a producer: its reply, or each chunk of its stream, until cancelled."""

    def produce(emit: Callable[[Any], None], cancel: threading.Event) -> None:
        result = agent(*inputs, **kwargs)
        if not isinstance(result, Generator):
            emit(result)
            return
        with contextlib.closing(result):  # a request that went away stops the agent (its turn rolled back)
            for chunk in result:
                if cancel.is_set():
                    return
                emit(chunk)

    return produce


def events_call(agent: Any, resume: bool = False) -> Callable[..., object]:
    """The agent's ``stream_events`` (``resume_events``) as `agent_chunks` runs it (async agents: an async gen)."""
    method = getattr(agent, "resume_events" if resume else "stream_events", None)
    if method is None:
        raise UserError(f'{type(agent).__name__} gives no typed events: ask with "stream": true instead')
    if not _is_async_agent(agent):
        return cast("Callable[..., object]", method)

    async def events(*inputs: object, **kwargs: object) -> AsyncIterator[object]:
        async with contextlib.aclosing(method(*inputs, **kwargs)) as run:
            async for event in run:
                yield event

    return events


async def agent_chunks(
    agent: Callable[..., object], inputs: Sequence[MessageLike], kwargs: Mapping[str, object]
) -> AsyncIterator[Any]:
    """The agent's reply as chunks: a streaming agent's own, or one final message (typed events for `events_call`).

    `agent` is the agent, or one of its calling methods (``agent.resume``).

    A sync agent runs on a worker thread (`plait.llms._threaded`): a request that is
    cancelled (the client left, the server shuts down) stops it at its next chunk, and its
    model at the next token, and the thread never holds up the process's exit.
    """
    if not _is_async_agent(agent):
        async with contextlib.aclosing(aiterate_thread(_run_sync(agent, inputs, kwargs), "plait-agent-call")) as items:
            async for item in items:
                yield item
        return
    result: Any = agent(*inputs, **kwargs)  # an agent's reply: a message, an awaitable of one, or a stream
    if inspect.isawaitable(result):
        yield await result
    elif isinstance(result, AsyncGenerator):
        async with contextlib.aclosing(result) as chunks:
            async for chunk in chunks:
                yield chunk
    else:
        yield result


def http_status(error: BaseException) -> int:
    """The HTTP status of a failed agent call.

    502 the model backend failed, 409 the session is answering another request
    (`SessionBusyError`, or in another worker: `SessionConflictError`; the turn was rolled
    back, so a retry is safe) or its run waits for decisions / has none to take
    (`ResumeError`), 503 the session store failed, 400 a bad request or argument, else 500.
    """
    if isinstance(error, LLMError):
        return 502
    if isinstance(error, (SessionBusyError, SessionConflictError, ResumeError)):
        return 409
    if isinstance(error, SessionStoreError):
        return 503
    if isinstance(error, (UserError, ParseError, TypeError, ValueError)):
        return 400
    return 500
