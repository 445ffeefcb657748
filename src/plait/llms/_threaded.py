"""Run a blocking producer in a worker thread and consume its items, sync or async.

Local engines (transformers, lmdeploy's pipeline, llama.cpp) produce a reply from a
blocking call that reports progress through a callback. `Producer` is such a call written
once: ``producer(emit, cancel)`` passes each item to ``emit`` and stops early once
``cancel`` is set. `iterate_thread` and `aiterate_thread` run it on a daemon thread and
hand its items to a sync or async consumer; `call_in_thread` and `to_thread_cancellable`
do the same for one blocking call ``fn(cancel)``. An exception raised by the producer is
raised to the consumer. The async drivers never block the event loop.

Stopping is written here once for every engine:

* the consumer never blocks uninterruptibly: the sync drivers wait on their queue in short
  slices, so Ctrl-C (``KeyboardInterrupt``) is raised in the calling thread at once, on
  every platform, however long the engine's call takes;
* a consumer that leaves early, for whatever reason (``KeyboardInterrupt``, task
  cancellation, an error, a closed generator, ``break``), sets ``cancel`` and then waits
  up to `SETTLE_S` for the producer to return, so the engine has stopped and is free for the
  next call when the consumer's exception reaches the caller;
* at interpreter exit every producer still running is cancelled and awaited (`stop_workers`),
  so no worker thread is inside a native engine when the interpreter is torn down (a thread
  that re-enters Python then would be killed inside C++ code: ``FATAL: exception not
  rethrown``, ``Aborted``).

A producer never sees the consumer's exception: signals are delivered to the main thread,
and the worker only ever learns about a stop through ``cancel``. Stops nest: a producer that
itself waits on another one (an agent call on a worker thread, whose model generates on its
own) passes its ``cancel`` on, so cancelling the outer call stops the inner generation too.
"""

from __future__ import annotations

import abc
import asyncio
import atexit
import contextlib
import contextvars
import queue
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Mapping
from typing import ClassVar, TypeAlias, TypeVar, Union

from ..types import SessionIds
from .base_llm import AsyncBaseLLM, Prompt, StreamItem, aaccumulate
from .profiles import ThinkTags

__all__ = [
    "SETTLE_S",
    "AsyncThreadStreamed",
    "Producer",
    "aiterate_thread",
    "call_in_thread",
    "iterate_thread",
    "stop_workers",
    "to_thread_cancellable",
]

T = TypeVar("T")

Producer: TypeAlias = Callable[[Callable[[T], None], threading.Event], None]
"""``producer(emit, cancel)``: passes each item to ``emit``; stops early once ``cancel`` is set."""

SETTLE_S = 1.0
"""How long a consumer that leaves early waits for its producer to return (seconds).

A llama.cpp or transformers producer returns at its next token, a few milliseconds; one that
is still reading a long prompt may take longer, and then finishes on its own (its ``cancel``
is set) after the consumer has gone.
"""

_EXIT_SETTLE_S = 5.0
"""How long interpreter exit waits, in all, for the producers still running."""

_POLL_S = 0.1
"""The slice a sync consumer waits on its queue for: the longest a pending signal waits."""

_CANCEL: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("plait_cancel", default=None)
"""In a worker thread: its producer's ``cancel`` (what nested waits pass on)."""


class _Done:
    """Marks the end of a producer's items."""


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


_Item: TypeAlias = Union[T, _Done, _Failed]
"""What crosses from the worker thread: the items, then `_Done` or `_Failed`."""


class _Worker:
    """One producer running on a daemon thread (in a copy of the starter's context)."""

    def __init__(self, producer: Producer[T], emit: Callable[[_Item[T]], None], name: str) -> None:
        self.cancel = threading.Event()
        self.ended = threading.Event()
        """Set once the producer has returned (after its `_Done` or `_Failed` was emitted)."""
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(self._run, producer, emit), name=name, daemon=True)
        with _LIVE_LOCK:
            _LIVE.add(self)
        try:
            thread.start()
        except BaseException:
            self._forget()
            raise

    def _run(self, producer: Producer[T], emit: Callable[[_Item[T]], None]) -> None:
        _CANCEL.set(self.cancel)  # this thread's context is a copy: the setting stays here
        try:
            try:
                producer(emit, self.cancel)
            except BaseException as exc:  # handed to the consumer, which raises it
                emit(_Failed(exc))
            else:
                emit(_Done())
        finally:
            self._forget()

    def _forget(self) -> None:
        with _LIVE_LOCK:
            _LIVE.discard(self)
        self.ended.set()

    def stop(self, timeout: float = SETTLE_S) -> None:
        """Cancel the producer and wait up to `timeout` seconds for it to return."""
        self.cancel.set()
        self.ended.wait(timeout)


_LIVE: set[_Worker] = set()
_LIVE_LOCK = threading.Lock()


@atexit.register
def stop_workers(timeout: float = _EXIT_SETTLE_S) -> None:
    """Cancel every producer still running and wait up to `timeout` seconds, in all, for them.

    Runs at interpreter exit (while threads may still run Python), and first thing when the
    llama.cpp engines are stopped, so no engine is freed while a worker is inside it.
    """
    with _LIVE_LOCK:
        workers = list(_LIVE)
    for worker in workers:
        worker.cancel.set()
    deadline = time.monotonic() + timeout
    for worker in workers:
        worker.ended.wait(max(0.0, deadline - time.monotonic()))


def _unwrap(item: _Item[T]) -> T | _Done:
    if isinstance(item, _Failed):
        raise item.error
    return item


def _get(items: queue.SimpleQueue[_Item[T]], worker: _Worker, parent: threading.Event | None) -> _Item[T]:
    """The next item, waited for in `_POLL_S` slices so a pending signal is raised promptly.

    A waiting worker thread whose own producer was cancelled (`parent`) cancels `worker`.
    """
    while True:
        try:
            return items.get(timeout=_POLL_S)
        except queue.Empty:
            if parent is not None and parent.is_set():
                worker.cancel.set()


def _single(fn: Callable[[threading.Event], T]) -> Producer[T]:
    """``fn(cancel)`` as a producer emitting its one result."""

    def produce(emit: Callable[[T], None], cancel: threading.Event) -> None:
        emit(fn(cancel))

    return produce


def iterate_thread(producer: Producer[T], name: str = "plait-producer") -> Generator[T, None, None]:
    """The items `producer` emits, produced on a worker thread.

    Leaving early (closing the iterator, or an exception such as ``KeyboardInterrupt`` while
    waiting for an item) cancels the producer and waits up to `SETTLE_S` for it to return.
    """
    items: queue.SimpleQueue[_Item[T]] = queue.SimpleQueue()
    parent = _CANCEL.get()
    worker = _Worker(producer, items.put, name)
    try:
        while not isinstance(item := _unwrap(_get(items, worker, parent)), _Done):
            yield item
    finally:
        worker.stop()


def call_in_thread(fn: Callable[[threading.Event], T], name: str = "plait-producer") -> T:
    """``fn(cancel)`` on a worker thread, waited for so that Ctrl-C interrupts the wait.

    On ``KeyboardInterrupt`` (or any exception in the waiting thread) ``cancel`` is set and
    the call is given up to `SETTLE_S` to return before the exception propagates.
    """
    with contextlib.closing(iterate_thread(_single(fn), name)) as results:
        return next(results)


async def aiterate_thread(producer: Producer[T], name: str = "plait-producer") -> AsyncGenerator[T, None]:
    """The items `producer` emits, awaited without blocking the event loop.

    Leaving early (``aclose()``, a cancelled task) cancels the producer and waits up to
    `SETTLE_S`, without blocking the loop, for it to return.
    """
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[_Item[T]] = asyncio.Queue()
    worker: _Worker | None = None

    def emit(item: _Item[T]) -> None:
        try:
            loop.call_soon_threadsafe(items.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            if worker is not None:
                worker.cancel.set()

    worker = _Worker(producer, emit, name)
    ended = False
    try:
        while True:
            item = await items.get()
            ended = isinstance(item, (_Done, _Failed))
            if isinstance(item := _unwrap(item), _Done):
                return
            yield item
    finally:
        worker.cancel.set()
        if not ended:
            await _settle(items)


async def _settle(items: asyncio.Queue[_Item[T]]) -> None:
    """Wait up to `SETTLE_S` for the producer feeding `items` to return (its items are dropped)."""

    async def drain() -> None:
        while not isinstance(await items.get(), (_Done, _Failed)):
            pass

    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(drain(), SETTLE_S)


async def to_thread_cancellable(fn: Callable[[threading.Event], T], name: str = "plait-producer") -> T:
    """``fn(cancel)`` in a worker thread, awaited without blocking the event loop.

    ``cancel`` is set once the call is over or the awaiting task is cancelled, so an engine
    that watches it stops generating; a cancelled task waits up to `SETTLE_S` for that.
    """
    async with contextlib.aclosing(aiterate_thread(_single(fn), name)) as results:
        return await anext(results)


class AsyncThreadStreamed(AsyncBaseLLM):
    """An async model whose replies are produced piece by piece on a worker thread (`_producer`).

    `stream_generate` runs the producer through `aiterate_thread`, so the event loop never
    blocks and a caller that stops listening (or is cancelled) stops the engine.
    """

    _stream_thread: ClassVar[str]
    """The name of the worker threads (each class sets it)."""

    think_tags: ThinkTags = "off"
    """How inline ``<think>`` blocks are split off the reply (a thinking model's profile sets it)."""

    async def stream_generate(
        self, inputs: Prompt, session_ids: SessionIds = None, **gen_params: object
    ) -> AsyncIterator[StreamItem]:
        """Stream one reply as cumulative ``(status, text, reasoning so far or None)``."""
        params = self.update_gen_params(**gen_params)
        async for item in aaccumulate(
            aiterate_thread(self._producer(inputs, params), name=self._stream_thread), params, self.think_tags
        ):
            yield item

    @abc.abstractmethod
    def _producer(self, prompt: Prompt, params: Mapping[str, object]) -> Producer[str]:
        """A producer emitting the text pieces of the reply to `prompt`."""
