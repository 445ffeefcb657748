"""Running an agent call from a request handler, whatever kind the agent is (private)."""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator, Mapping, Sequence
from typing import Any

from ...exceptions import LLMError, ParseError, SessionBusyError, UserError
from ...memory.base_memory import MessageLike
from ...schema import AgentMessage

__all__ = ["agent_chunks", "http_status"]


def _is_async_agent(agent: object) -> bool:
    call = type(agent).__call__
    return inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)


async def _chunks_of(
    result: Iterator[AgentMessage] | AsyncIterator[AgentMessage],
) -> AsyncIterator[AgentMessage]:
    if isinstance(result, AsyncIterator):
        async for chunk in result:
            yield chunk
    else:
        while step := await asyncio.to_thread(_take_one, result):  # a sync generator's step may block
            yield step[0]


def _take_one(iterator: Iterator[AgentMessage]) -> list[AgentMessage]:
    """The iterator's next chunk as a one-item list (empty at its end)."""
    return list(itertools.islice(iterator, 1))


async def agent_chunks(
    agent: Callable[..., object], inputs: Sequence[MessageLike], kwargs: Mapping[str, object]
) -> AsyncIterator[AgentMessage]:
    """The agent's reply as chunks: a streaming agent's own, or one final message."""
    result: Any  # an agent's reply: a message, an awaitable of one, or a stream of them
    if _is_async_agent(agent):
        result = agent(*inputs, **kwargs)
    else:
        result = await asyncio.to_thread(agent, *inputs, **kwargs)
    if inspect.isawaitable(result):
        yield await result
    elif isinstance(result, (Generator, AsyncGenerator)):
        async for chunk in _chunks_of(result):
            yield chunk
    else:
        yield result


def http_status(error: BaseException) -> int:
    """The HTTP status of a failed agent call.

    502 the model backend failed, 409 the session is answering another request
    (`SessionBusyError`), 400 a bad request or argument, else 500.
    """
    if isinstance(error, LLMError):
        return 502
    if isinstance(error, SessionBusyError):
        return 409
    if isinstance(error, (UserError, ParseError, TypeError, ValueError)):
        return 400
    return 500
