"""Sans-IO flows and their four drivers.

Logic that must behave identically in sync, async and streaming mode (the agent call
path, `Sequential`, the action executor) is written once as a generator that *yields*
`Call` effects and receives their results through ``send``. A driver performs the calls:

* `run_sync` calls them (an awaitable result is a usage error),
* `run_async` calls them and awaits awaitables (sync work marked ``offload`` goes to a
  worker thread so the event loop never blocks),
* `run_stream` / `run_astream` additionally iterate calls marked ``stream``: their
  intermediate chunks are yielded to the caller and the final chunk is sent back into the
  flow. A chunk is *final* when its ``stream_state`` is `AgentStatusCode.END`; finals are
  held back and the flow's own result is yielded last, so a streamed agent call surfaces
  exactly one END message: its own, after its hooks ran.

An exception raised by a call is thrown into the flow, so cleanup (such as rolling back
memory) is written once too.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, Union

from .exceptions import UserError
from .schema import AgentStatusCode

__all__ = ["Call", "Effect", "Flow", "Gather", "run_astream", "run_async", "run_stream", "run_sync"]

R = TypeVar("R")

_EMPTY: Mapping[str, Any] = {}


@dataclass(frozen=True)
class Call:
    """One effect requested by a flow.

    Attributes:
        fn: What to call.
        args: Positional arguments.
        kwargs: Keyword arguments.
        stream: The result is an iterator (or async iterator) of chunks; streaming drivers
            pass its non-final chunks through, the others drain it.
        offload: Async drivers run a synchronous ``fn`` in a worker thread.
    """

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    stream: bool = False
    offload: bool = False


@dataclass(frozen=True)
class Gather:
    """Several calls whose results come back together, in order.

    Async drivers run them concurrently (`asyncio.gather`); sync drivers run them one after
    another. Used for independent work such as parallel tool calls.
    """

    calls: tuple[Call, ...]
    stream: ClassVar[bool] = False  # the results are never streamed through


Effect = Union[Call, Gather]
Flow = Generator[Effect, Any, R]


def _is_final(chunk: Any) -> bool:
    return getattr(chunk, "stream_state", AgentStatusCode.END) == AgentStatusCode.END


def _drain(result: Any) -> Any:
    """Consume a sync chunk iterator and return its last chunk (the final message)."""
    if not isinstance(result, Iterator):
        return result
    last: Any = None
    for last in result:  # noqa: B007
        pass
    return last


async def _adrain(result: Any) -> Any:
    if not isinstance(result, (AsyncIterator, Iterator)):
        return result
    last: Any = None
    async for last in _chunks(result):  # noqa: B007
        pass
    return last


def _sync_call(call: Effect) -> Any:
    if isinstance(call, Gather):
        return [_drain(_sync_call(c)) if c.stream else _sync_call(c) for c in call.calls]
    result = call.fn(*call.args, **call.kwargs)
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise UserError(
            f"{getattr(call.fn, '__qualname__', call.fn)!r} is async and cannot run inside a synchronous "
            "agent or executor; use the Async* variant (AsyncAgent, AsyncActionExecutor) instead"
        )
    if isinstance(result, AsyncIterator):
        raise UserError(f"{getattr(call.fn, '__qualname__', call.fn)!r} returned an async stream in sync mode")
    return result


async def _async_call(call: Effect) -> Any:
    if isinstance(call, Gather):
        if len(call.calls) == 1:  # nothing to overlap: skip the task machinery
            return [await _async_drained(call.calls[0])]
        return list(await asyncio.gather(*(_async_drained(c) for c in call.calls)))
    if call.offload and not inspect.iscoroutinefunction(call.fn):
        result = await asyncio.to_thread(call.fn, *call.args, **call.kwargs)
    else:
        result = call.fn(*call.args, **call.kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _async_drained(call: Call) -> Any:
    result = await _async_call(call)
    return await _adrain(result) if call.stream else result


def run_sync(flow: Flow[R]) -> R:
    """Drive `flow` synchronously; stream results are drained to their final value."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            call = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        error = None
        try:
            value = _sync_call(call)
            if call.stream:
                value = _drain(value)
        except Exception as exc:
            value, error = None, exc


async def run_async(flow: Flow[R]) -> R:
    """Drive `flow` on the running event loop; stream results are drained to their final value."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            call = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        error = None
        try:
            value = await _async_call(call)
            if call.stream:
                value = await _adrain(value)
        except Exception as exc:
            value, error = None, exc


def run_stream(flow: Flow[Any]) -> Generator[Any, None, None]:
    """Drive `flow`, yielding the non-final chunks of its stream calls, then the flow's result last."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            call = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            yield stop.value
            return
        error = None
        try:
            value = _sync_call(call)
            if call.stream and isinstance(value, Iterator):
                last: Any = None
                for chunk in value:
                    last = chunk
                    if not _is_final(chunk):
                        yield chunk
                value = last
        except Exception as exc:
            value, error = None, exc


async def run_astream(flow: Flow[Any]) -> AsyncGenerator[Any, None]:
    """Async twin of `run_stream`: non-final chunks as they come, then the flow's result last."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            call = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            yield stop.value
            return
        error = None
        try:
            value = await _async_call(call)
            if call.stream and isinstance(value, (AsyncIterator, Iterator)):
                last: Any = None
                async for chunk in _chunks(value):
                    last = chunk
                    if not _is_final(chunk):
                        yield chunk
                value = last
        except Exception as exc:
            value, error = None, exc


async def _chunks(value: AsyncIterator[Any] | Iterator[Any]) -> AsyncIterator[Any]:
    if isinstance(value, AsyncIterator):
        async for chunk in value:
            yield chunk
    else:
        for chunk in value:
            yield chunk
