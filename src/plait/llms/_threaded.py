"""Run a blocking producer in a worker thread and consume its items, sync or async.

Local engines (transformers, lmdeploy's pipeline, llama.cpp) produce a reply from a
blocking call that reports progress through a callback. `Producer` is such a call written
once: ``producer(emit, cancel)`` passes each item to ``emit`` and stops early once
``cancel`` is set. `iterate_thread` and `aiterate_thread` run it on a daemon thread and
hand its items to a sync or async consumer; an exception raised by the producer is
raised to the consumer, and a consumer that stops early (or whose task is cancelled)
sets ``cancel`` so the engine stops generating. The async driver never blocks the loop.
`to_thread_cancellable` is the same for one blocking call ``fn(cancel)``.
"""

from __future__ import annotations

import abc
import asyncio
import queue
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Mapping
from typing import ClassVar, TypeAlias, TypeVar, Union

from ..types import SessionIds
from .base_llm import AsyncBaseLLM, Prompt, StreamItem, aaccumulate

__all__ = ["AsyncThreadStreamed", "Producer", "aiterate_thread", "iterate_thread", "to_thread_cancellable"]

T = TypeVar("T")

Producer: TypeAlias = Callable[[Callable[[T], None], threading.Event], None]
"""``producer(emit, cancel)``: passes each item to ``emit``; stops early once ``cancel`` is set."""


class _Done:
    """Marks the end of a producer's items."""


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


_Item: TypeAlias = Union[T, _Done, _Failed]
"""What crosses from the worker thread: the items, then `_Done` or `_Failed`."""


def _run(producer: Producer[T], emit: Callable[[_Item[T]], None], cancel: threading.Event) -> None:
    try:
        producer(emit, cancel)
    except BaseException as exc:  # handed to the consumer, which raises it
        emit(_Failed(exc))
    else:
        emit(_Done())


def _start(producer: Producer[T], emit: Callable[[_Item[T]], None], cancel: threading.Event, name: str) -> None:
    threading.Thread(target=_run, args=(producer, emit, cancel), name=name, daemon=True).start()


def _unwrap(item: _Item[T]) -> T | _Done:
    if isinstance(item, _Failed):
        raise item.error
    return item


def iterate_thread(producer: Producer[T], name: str = "plait-producer") -> Generator[T, None, None]:
    """The items `producer` emits, produced on a worker thread (closing the iterator cancels it)."""
    items: queue.SimpleQueue[_Item[T]] = queue.SimpleQueue()
    cancel = threading.Event()
    _start(producer, items.put, cancel, name)
    try:
        while not isinstance(item := _unwrap(items.get()), _Done):
            yield item
    finally:
        cancel.set()


async def aiterate_thread(producer: Producer[T], name: str = "plait-producer") -> AsyncGenerator[T, None]:
    """The items `producer` emits, awaited without blocking the event loop."""
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[_Item[T]] = asyncio.Queue()
    cancel = threading.Event()

    def emit(item: _Item[T]) -> None:
        try:
            loop.call_soon_threadsafe(items.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            cancel.set()

    _start(producer, emit, cancel, name)
    try:
        while not isinstance(item := _unwrap(await items.get()), _Done):
            yield item
    finally:
        cancel.set()


async def to_thread_cancellable(fn: Callable[[threading.Event], T]) -> T:
    """``fn(cancel)`` in a worker thread, awaited without blocking the event loop.

    ``cancel`` is set once the call is over or the awaiting task is cancelled, so an engine
    that watches it stops generating.
    """
    cancel = threading.Event()
    try:
        return await asyncio.to_thread(fn, cancel)
    finally:
        cancel.set()


class AsyncThreadStreamed(AsyncBaseLLM):
    """An async model whose replies are produced piece by piece on a worker thread (`_producer`).

    `stream_generate` runs the producer through `aiterate_thread`, so the event loop never
    blocks and a caller that stops listening (or is cancelled) stops the engine.
    """

    _stream_thread: ClassVar[str]
    """The name of the worker threads (each class sets it)."""

    async def stream_generate(
        self, inputs: Prompt, session_ids: SessionIds = None, **gen_params: object
    ) -> AsyncIterator[StreamItem]:
        """Stream one reply as cumulative ``(status, text, None)``."""
        params = self.update_gen_params(**gen_params)
        async for item in aaccumulate(
            aiterate_thread(self._producer(inputs, params), name=self._stream_thread), params
        ):
            yield item

    @abc.abstractmethod
    def _producer(self, prompt: Prompt, params: Mapping[str, object]) -> Producer[str]:
        """A producer emitting the text pieces of the reply to `prompt`."""
