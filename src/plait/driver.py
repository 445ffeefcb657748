"""The drive loop: performs a flow's effects (`plait.effects`) in the caller's mode, written once.

One loop (`_drive`) owns the mode. It is an async generator parameterised by two flags:

* ``is_async``: the *async performer* awaits coroutines and runs synchronous calls (and the
  ``next()`` of synchronous streams) in worker threads, so the event loop never blocks; the
  *sync performer* calls functions directly and rejects awaitables with `ModeError`;
* ``stream``: streaming drivers pass the non-final chunks of stream effects and every
  `Emit` to their caller, then the flow's result last; the others only return the result.
  A streaming driver performs each leaf as `Leaf.streamed` says, so a model call that
  follows the driver (`ModelCall.follow`) streams exactly when the run does.

The sync entry points step that async generator by hand: with the sync performer it never
suspends, so ``send(None)`` runs it to its next value. The four entry points
(`run_sync`, `run_async`, `run_stream`, `run_astream`) are thin adapters over the one loop.

The loop is a trampoline over a stack of frames: the flow, the flows of *composite* effects
(a sub-agent's call path, an executor call, a tool API), and the `around` flows of
`Interceptor` flows. An effect yielded by a frame meets the interceptors after that frame's
own level, then is performed; a composite that reaches the bottom runs its steps as a new
frame, so a whole agent tree runs in one driver and every effect meets every interceptor.

Errors: an exception raised while performing an effect (including `asyncio.CancelledError`
and `KeyboardInterrupt`) is thrown into the frame that asked for it, so cleanup such as
rolling memory back is written once. `ModeError` (a sync driver met an async function) is
a usage error: it is raised at once, not thrown into the flow. Whatever happens, every
frame still open is closed when the loop ends (``finally``), top first.
"""

from __future__ import annotations

import asyncio
import inspect
import types
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Iterator, Sequence
from contextlib import aclosing
from typing import Any, Final, TypeVar, cast

from .effects import Call, Composite, Effect, Emit, Flow, Gather, Leaf
from .exceptions import ModeError, UserError
from .interceptors import GLOBAL_INTERCEPTORS, Interceptor
from .schema import AgentStatusCode

__all__ = ["run_astream", "run_async", "run_stream", "run_sync"]

R = TypeVar("R")

_DONE: Final = object()
_END = AgentStatusCode.END


def _single(effect: Effect[R]) -> Flow[R]:
    result: R = yield effect
    return result


def _listed(effect: Effect[R]) -> Flow[list[R]]:
    result: R = yield effect
    return [result]


def _is_final(chunk: object) -> bool:
    return getattr(chunk, "stream_state", _END) == _END


_ASYNC_FLAGS: Final = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def _is_async_callable(fn: Callable[..., object]) -> bool:
    """Whether `fn` is an ``async def`` (or async generator) function, method or callable object.

    Asked for every offloadable call: plain functions and bound methods are answered from
    their code's flags (as `inspect.iscoroutinefunction` does); other callables (partials,
    objects, functions marked with `inspect.markcoroutinefunction`) are asked in full.
    """
    function = fn.__func__ if type(fn) is types.MethodType else fn
    if type(function) is types.FunctionType and "_is_coroutine_marker" not in function.__dict__:
        return bool(function.__code__.co_flags & _ASYNC_FLAGS)
    return _asks_async(fn)


def _asks_async(fn: Callable[..., object]) -> bool:
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        return True
    call = inspect.getattr_static(type(fn), "__call__", None)
    return inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)


def _name(fn: Callable[..., object]) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__qualname__)


def _is_awaitable(value: object) -> bool:
    """`inspect.isawaitable`, answered at once for the plain values most calls return."""
    kind = type(value)
    if kind is types.CoroutineType:
        return True
    return kind not in _PLAIN and inspect.isawaitable(value)


_PLAIN: Final = frozenset({str, dict, list, tuple, int, float, bool, type(None)})


async def _call(call: Call[Any], is_async: bool) -> Any:
    """Perform one leaf call in the driver's mode."""
    fn = call.fn
    if not is_async:
        result = fn(*call.args, **call.kwargs)
        if _is_awaitable(result):
            if inspect.iscoroutine(result):
                result.close()
            raise ModeError(
                f"{_name(fn)} is async and cannot run inside a synchronous agent or executor; "
                "use the Async* variant (AsyncAgent, AsyncActionExecutor) instead"
            )
        return result
    if call.offload and not _is_async_callable(fn):
        result = await asyncio.to_thread(fn, *call.args, **call.kwargs)
    else:
        result = fn(*call.args, **call.kwargs)
    if _is_awaitable(result):
        result = await result
    return result


async def _chunks(source: Any, is_async: bool, offload: bool, fn: Callable[..., Any]) -> AsyncGenerator[Any, None]:
    """The chunks of a stream result, sync or async; a synchronous one is read in a thread when offloaded."""
    if isinstance(source, AsyncIterator):
        if not is_async:
            raise ModeError(f"{_name(fn)} returned an async stream in sync mode; use the Async* variant")
        try:
            async for chunk in source:
                yield chunk
        finally:
            close = getattr(source, "aclose", None)
            if close is not None:
                await close()
        return
    iterator: Iterator[Any] = iter(source)
    threaded = is_async and offload
    try:
        while True:
            chunk = await asyncio.to_thread(next, iterator, _DONE) if threaded else next(iterator, _DONE)
            if chunk is _DONE:
                return
            yield chunk
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


async def _gather(gather: Gather[Any], is_async: bool, interceptors: Sequence[Interceptor]) -> list[Any]:
    runs = [_value(_drive(_single(effect), is_async, False, interceptors)) for effect in gather.effects]
    if is_async and len(runs) > 1:
        return list(await asyncio.gather(*runs))
    return [await run for run in runs]


async def _value(run: AsyncGenerator[object, None]) -> object:
    try:
        return await run.__anext__()
    finally:
        await run.aclose()


async def _drive(  # noqa: C901 - the one loop; its branches are the effect kinds
    flow: Flow[Any], is_async: bool, stream: bool, interceptors: Sequence[Interceptor] = ()
) -> AsyncGenerator[Any, None]:
    """Run `flow` to its end; yields streamed chunks (when `stream`) and the flow's result last."""
    stack: list[tuple[Generator[Any, Any, Any], int]] = [(flow, 0)]
    count = len(interceptors)
    value: Any = None
    error: BaseException | None = None
    try:
        while stack:
            frame, level = stack[-1]
            try:
                effect = frame.send(value) if error is None else frame.throw(error)
            except StopIteration as stop:
                stack.pop()
                value, error = stop.value, None
                continue
            except BaseException as exc:
                stack.pop()
                if not stack:
                    raise
                value, error = None, exc
                continue
            value = error = None
            if stream and isinstance(effect, Leaf):
                effect = effect.streamed()
            while level < count and not isinstance(effect, interceptors[level].effects):
                level += 1
            if level < count:
                stack.append((interceptors[level].around(effect), level + 1))
                continue
            if isinstance(effect, Composite) and effect.inline:
                stack.append((effect.flow(), 0))
                continue
            try:
                if isinstance(effect, Emit):
                    if stream:
                        yield effect.chunk
                    continue
                if isinstance(effect, Gather):
                    if len(effect.effects) == 1:  # nothing to overlap: run it in place, no nested drive
                        stack.append((_listed(effect.effects[0]), 0))
                    else:
                        value = await _gather(effect, is_async, interceptors)
                    continue
                if not isinstance(effect, (Leaf, Composite)):
                    raise UserError(f"a flow yielded {effect!r}, which is not an effect")
                call: Call[Any] = effect.call()
                value = await _call(call, is_async)
                if not call.stream or not isinstance(value, (Iterator, AsyncIterator)):
                    continue
                last: Any = None
                async with aclosing(_chunks(value, is_async, call.offload, call.fn)) as chunks:
                    async for chunk in chunks:
                        last = call.each(chunk) if call.each is not None else chunk
                        if stream and not _is_final(last):
                            yield last
                value = last
            except (GeneratorExit, ModeError):
                raise
            except BaseException as exc:
                value, error = None, exc
        yield value
    finally:
        while stack:
            stack.pop()[0].close()


def _with_global(interceptors: Sequence[Interceptor]) -> tuple[Interceptor, ...]:
    """`interceptors` with the process-wide ones inside them (asked only while some are registered)."""
    return (*interceptors, *GLOBAL_INTERCEPTORS.values())


def _step(awaitable: Awaitable[R]) -> R:
    """Run an awaitable that never suspends (the sync performer's) to its result."""
    coroutine = awaitable.__await__()
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return cast(R, stop.value)
    coroutine.close()
    raise RuntimeError("a synchronous flow suspended: an async effect reached the sync driver")


def run_sync(flow: Flow[R], interceptors: Sequence[Interceptor] = ()) -> R:
    """Run `flow` in the calling thread; stream effects are drained to their last chunk."""
    run = _drive(flow, False, False, _with_global(interceptors) if GLOBAL_INTERCEPTORS else interceptors)
    try:
        return cast(R, _step(run.__anext__()))
    finally:
        _step(run.aclose())


async def run_async(flow: Flow[R], interceptors: Sequence[Interceptor] = ()) -> R:
    """Run `flow` on the running event loop (sync work in worker threads)."""
    return cast(
        R, await _value(_drive(flow, True, False, _with_global(interceptors) if GLOBAL_INTERCEPTORS else interceptors))
    )


def run_stream(flow: Flow[Any], interceptors: Sequence[Interceptor] = ()) -> Generator[Any, None, None]:
    """Run `flow` in the calling thread, yielding its streamed chunks, then its result last."""
    run = _drive(flow, False, True, _with_global(interceptors) if GLOBAL_INTERCEPTORS else interceptors)
    try:
        while True:
            try:
                item = _step(run.__anext__())
            except StopAsyncIteration:
                return
            yield item
    finally:
        _step(run.aclose())


async def run_astream(flow: Flow[Any], interceptors: Sequence[Interceptor] = ()) -> AsyncIterator[Any]:
    """Async twin of `run_stream`."""
    async with aclosing(
        _drive(flow, True, True, _with_global(interceptors) if GLOBAL_INTERCEPTORS else interceptors)
    ) as run:
        async for item in run:
            yield item
