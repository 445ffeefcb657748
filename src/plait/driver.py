"""The drive loop: performs a flow's effects (`plait.effects`) in the caller's mode, written once.

One loop (`_drive`) owns the mode. It is a coroutine parameterised by two flags:

* ``is_async``: the *async performer* awaits coroutines and runs synchronous calls (and the
  ``next()`` of synchronous streams) in worker threads, so the event loop never blocks; the
  *sync performer* calls functions directly and rejects awaitables with `ModeError`;
* ``stream``: streaming drivers pass the non-final chunks of stream effects and every
  `Emit` to their caller (each awaited as a `_Chunk`, which suspends the loop up to the
  entry point), then return the flow's result; the others only return the result.
  A streaming driver performs each leaf as `Leaf.streamed` says, so a model call that
  follows the driver (`ModelCall.follow`) streams exactly when the run does.

The entry points are thin adapters over the one loop: `run_async` awaits it; `run_sync`
steps it by hand (with the sync performer it never suspends, so ``send(None)`` runs it to
its end); `run_stream` and `run_astream` step it and hand each `_Chunk` it suspends on to
their caller (`run_astream` passes every other suspension, the event loop's futures, on to
its task, as ``await`` would).

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
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Generator, Iterator, Sequence
from contextlib import aclosing
from typing import Any, Final, TypeVar, cast

from .effects import Call, Composite, Effect, Emit, Flow, Gather, Leaf, Report
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
    """`inspect.isawaitable`, answered once per type (it depends on the type alone, but for generators)."""
    kind = type(value)
    known = _AWAITABLE.get(kind)
    if known is not None:
        return known
    answer = inspect.isawaitable(value)
    if kind is not types.GeneratorType and len(_AWAITABLE) < 4096:  # a generator may be a coroutine: ask each
        _AWAITABLE[kind] = answer
    return answer


_AWAITABLE: Final[dict[type, bool]] = dict.fromkeys((str, dict, list, tuple, int, float, bool, type(None)), False)
_AWAITABLE[types.CoroutineType] = True


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
    runs = [_drive(_single(effect), is_async, False, interceptors) for effect in gather.effects]
    if is_async and len(runs) > 1:
        return list(await asyncio.gather(*runs))
    return [await run for run in runs]


class _Chunk:
    """A streamed chunk on its way out: awaiting it suspends the loop up to the streaming entry point."""

    __slots__ = ("chunk",)

    def __init__(self, chunk: object) -> None:
        self.chunk = chunk

    def __await__(self) -> Generator[_Chunk, None, None]:
        yield self


async def _drive(  # noqa: C901 - the one loop; its branches are the effect kinds
    flow: Flow[Any], is_async: bool, stream: bool, interceptors: Sequence[Interceptor] = ()
) -> Any:
    """Run `flow` to its end and return its result; a streaming loop awaits each chunk as a `_Chunk` first."""
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
            leaf = isinstance(effect, Leaf)  # most effects: asked first
            if not leaf and isinstance(effect, Composite) and effect.inline:
                stack.append((effect.flow(), 0))
                continue
            try:
                if not leaf:
                    if isinstance(effect, Emit):
                        if stream:
                            await _Chunk(effect.chunk)
                        continue
                    if isinstance(effect, Report):  # nobody asked for events
                        continue
                    if isinstance(effect, Gather):
                        if len(effect.effects) == 1:  # nothing to overlap: run it in place, no nested drive
                            stack.append((_listed(effect.effects[0]), 0))
                        else:
                            value = await _gather(effect, is_async, interceptors)
                        continue
                    if not isinstance(effect, Composite):
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
                            await _Chunk(last)
                value = last
            except (GeneratorExit, ModeError):
                raise
            except BaseException as exc:
                value, error = None, exc
        return value
    finally:
        while stack:
            stack.pop()[0].close()


def _with_global(interceptors: Sequence[Interceptor]) -> tuple[Interceptor, ...]:
    """`interceptors` with the process-wide ones inside them (asked only while some are registered)."""
    return (*interceptors, *GLOBAL_INTERCEPTORS.values())


def _step(run: Coroutine[Any, None, Any]) -> tuple[bool, Any]:
    """One step of a loop under the sync performer: ``(True, result)`` at its end, else ``(False, chunk)``.

    Raises:
        RuntimeError: The loop suspended on something other than a chunk (an async
            effect reached the sync performer).
    """
    try:
        suspended = run.send(None)
    except StopIteration as stop:
        return True, stop.value
    if type(suspended) is _Chunk:
        return False, suspended.chunk
    raise RuntimeError("a synchronous flow suspended: an async effect reached the sync driver")


def run_sync(flow: Flow[R], interceptors: Sequence[Interceptor] = ()) -> R:
    """Run `flow` in the calling thread; stream effects are drained to their last chunk."""
    run = _drive(flow, False, False, _with_global(interceptors) if GLOBAL_INTERCEPTORS else interceptors)
    try:
        return cast(R, _step(run)[1])  # a loop that does not stream never suspends on a chunk
    finally:
        run.close()


async def run_async(flow: Flow[R], interceptors: Sequence[Interceptor] = ()) -> R:
    """Run `flow` on the running event loop (sync work in worker threads)."""
    return cast(R, await _drive(flow, True, False, _with_global(interceptors) if GLOBAL_INTERCEPTORS else interceptors))


def run_stream(flow: Flow[Any], interceptors: Sequence[Interceptor] = ()) -> Generator[Any, None, None]:
    """Run `flow` in the calling thread, yielding its streamed chunks, then its result last."""
    run = _drive(flow, False, True, _with_global(interceptors) if GLOBAL_INTERCEPTORS else interceptors)
    try:
        while True:
            done, item = _step(run)
            yield item
            if done:
                return
    finally:
        run.close()


class _Pump:
    """Awaits a streaming loop up to its next chunk: ``(False, chunk)``, or ``(True, result)`` at its end.

    The loop's other suspensions (the event loop's futures) pass through to the awaiting
    task, and what the task sends or throws back (a cancellation) goes into the loop, as a
    plain ``await`` would do. `over` turns true once the loop has returned or raised.
    """

    __slots__ = ("over", "run", "throw")

    def __init__(self, run: Coroutine[Any, Any, Any]) -> None:
        self.run = run
        self.over = False
        self.throw: BaseException | None = None  # thrown into the loop first on the next await (its closing)

    def __await__(self) -> Generator[Any, Any, tuple[bool, Any]]:
        sent: Any = None
        error, self.throw = self.throw, None
        while True:
            try:
                suspended = self.run.send(sent) if error is None else self.run.throw(error)
            except StopIteration as stop:
                self.over = True
                return True, stop.value
            except BaseException:
                self.over = True
                raise
            if type(suspended) is _Chunk:
                return False, suspended.chunk
            try:
                sent, error = (yield suspended), None
            except BaseException as exc:  # whatever the task throws goes into the loop
                sent, error = None, exc


async def run_astream(flow: Flow[Any], interceptors: Sequence[Interceptor] = ()) -> AsyncGenerator[Any, None]:
    """Async twin of `run_stream`."""
    pump = _Pump(_drive(flow, True, True, _with_global(interceptors) if GLOBAL_INTERCEPTORS else interceptors))
    try:
        while True:
            done, item = await pump
            yield item
            if done:
                return
    finally:
        if not pump.over:  # stopped at a chunk: its consumer left early, or was cancelled
            await _close(pump)


async def _close(pump: _Pump) -> None:
    """Close a loop stopped at a chunk, letting its cleanup await (as an async generator's ``aclose`` does)."""
    pump.throw = GeneratorExit()
    try:
        await pump
    except GeneratorExit:
        return
    raise RuntimeError("a streaming flow went on after it was closed")
