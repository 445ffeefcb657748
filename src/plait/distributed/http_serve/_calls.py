"""Running an agent call from a request handler, whatever kind the agent is (private)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from ...exceptions import LLMError, ParseError, UserError

__all__ = ["agent_chunks", "http_status"]


def _is_async_agent(agent: Any) -> bool:
    call = type(agent).__call__
    return inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)


async def _chunks_of(result: Any) -> AsyncIterator[Any]:
    if inspect.isasyncgen(result):
        async for chunk in result:
            yield chunk
    else:
        iterator = iter(result)
        end = object()
        while (chunk := await asyncio.to_thread(next, iterator, end)) is not end:
            yield chunk


async def agent_chunks(agent: Any, inputs: Sequence[Any], kwargs: Mapping[str, Any]) -> AsyncIterator[Any]:
    """The agent's reply as chunks: a streaming agent's own, or one final message."""
    if _is_async_agent(agent):
        result = agent(*inputs, **kwargs)
    else:
        result = await asyncio.to_thread(agent, *inputs, **kwargs)
    if inspect.isawaitable(result):
        yield await result
    elif inspect.isgenerator(result) or inspect.isasyncgen(result):
        async for chunk in _chunks_of(result):
            yield chunk
    else:
        yield result


def http_status(error: BaseException) -> int:
    """The HTTP status of a failed agent call: 502 the model backend failed, 400 a bad request or argument, else 500."""
    if isinstance(error, LLMError):
        return 502
    if isinstance(error, (UserError, ParseError, TypeError, ValueError)):
        return 400
    return 500
