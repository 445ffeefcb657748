"""Async IO plumbing shared by the API backends (`plait.llms`) and the web tools (`plait.actions.web`).

* `PerLoop`: one resource (a connection pool) per event loop, created lazily and closed
  with its loop (`plait.utils._session_pool.SessionPool` is the one of aiohttp sessions).
* `close_with_loop`: close any async resource when the loop it lives on shuts down.
* `closing_stream`: an async stream read in a block, closed when the block ends (a reader
  that leaves early, or is cancelled, frees the stream's connection now, not when it is
  collected).
* `LoopThread`: a private event loop on a daemon thread. Sync clients run the async code
  there: one IO path for both, and sync calls work even inside a running event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from typing import Generic, Protocol, TypeVar

from ..exceptions import UserError

__all__ = ["AsyncClosable", "LoopResource", "LoopThread", "PerLoop", "close_with_loop", "closing_stream"]

T = TypeVar("T")


class AsyncClosable(Protocol):
    """Anything with an ``async close()`` (an aiohttp session, an SDK's async client)."""

    async def close(self) -> object:
        """Release the resource."""


async def _close_with_loop(resource: AsyncClosable) -> AsyncGenerator[None, None]:
    """Parked async generator: the loop finalizes it at shutdown, which closes `resource`."""
    try:
        yield
    finally:
        await resource.close()


async def close_with_loop(resource: AsyncClosable) -> AsyncGenerator[None, None]:
    """Have the running loop close `resource` when it shuts down its async generators.

    ``asyncio.run`` does that on exit. Returns the keeper: hold a reference to it as long
    as `resource` lives (loops hold async generators only weakly); ``await keeper.aclose()``
    closes `resource` early.
    """
    keeper = _close_with_loop(resource)
    await keeper.__anext__()  # registers it with the loop's async-generator finalizer
    return keeper


@asynccontextmanager
async def closing_stream(stream: AsyncIterator[T]) -> AsyncGenerator[AsyncIterator[T], None]:
    """`stream` for an ``async for``, closed (its ``aclose()``, where it has one) when the block ends.

    An ``async for`` that stops early leaves an async generator open until it is garbage
    collected; a stream read through this is closed at once, its cleanup awaited.
    """
    try:
        yield stream
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


class LoopResource(AsyncClosable, Protocol):
    """What `PerLoop` keeps per event loop: closable, and able to say it was closed."""

    @property
    def closed(self) -> bool:
        """Whether it was closed (a closed one is replaced on the next `PerLoop.get`)."""


R = TypeVar("R", bound=LoopResource)


class PerLoop(Generic[R]):
    """One resource (a connection pool) per event loop, made on first use, closed with its loop.

    A client used from several loops (tests calling ``asyncio.run`` repeatedly, threads with
    their own loops) gets one resource per loop, and a loop's resource is closed when that
    loop shuts down its async generators (``asyncio.run`` does), so nothing leaks.

    Args:
        factory: Makes the resource; called on the loop that will use it.
    """

    def __init__(self, factory: Callable[[], R]) -> None:
        self._factory = factory
        self._sessions: dict[asyncio.AbstractEventLoop, tuple[R, AsyncGenerator[None, None]]] = {}
        self._lock = threading.Lock()

    async def get(self) -> R:
        """The resource of the running loop (made on first use)."""
        return self.current() or await self._create(asyncio.get_running_loop())

    def current(self) -> R | None:
        """The running loop's resource if it has one, open (None: `get` makes one)."""
        entry = self._sessions.get(asyncio.get_running_loop())
        return entry[0] if entry is not None and not entry[0].closed else None

    async def _create(self, loop: asyncio.AbstractEventLoop) -> R:
        resource = self._factory()
        keeper = await close_with_loop(resource)
        with self._lock:
            for other in [other for other in self._sessions if other.is_closed()]:
                del self._sessions[other]
            self._sessions[loop] = (resource, keeper)
        return resource

    async def aclose(self) -> None:
        """Close the running loop's resource; ask other live loops to close theirs."""
        current = asyncio.get_running_loop()
        with self._lock:
            entries = list(self._sessions.items())
            self._sessions.clear()
        for loop, (resource, keeper) in entries:
            if loop is current:
                await keeper.aclose()
                await resource.close()
            elif loop.is_running() and not loop.is_closed():
                asyncio.run_coroutine_threadsafe(resource.close(), loop)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(loops={len(self._sessions)})"


class _End:
    pass


_END = _End()


async def _next_item(agen: AsyncIterator[T]) -> T | _End:
    try:
        return await agen.__anext__()
    except StopAsyncIteration:
        return _END


class LoopThread:
    """An event loop on a private daemon thread, started on first use.

    Args:
        name: Thread name (shows up in debuggers and thread dumps).
    """

    def __init__(self, name: str = "plait-io") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running private loop (started now if needed)."""
        loop = self._loop
        if loop is not None:
            return loop
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(target=self._serve, args=(loop, ready), name=self.name, daemon=True)
                thread.start()
                ready.wait()
                self._thread, self._loop = thread, loop
            return self._loop

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    def run(self, coro: Coroutine[object, object, T]) -> T:
        """Run `coro` on the private loop and block until it is done."""
        loop = self.loop
        if threading.current_thread() is self._thread:
            coro.close()
            raise UserError("a sync client was called from its own IO thread; use the async client there")
        handle = _Handle()
        try:
            return asyncio.run_coroutine_threadsafe(handle.run(coro), loop).result()
        except BaseException:  # Ctrl-C (at any point of the above), for one: stop the coroutine first
            handle.stop(loop)  # so what it was iterating can be closed next (not "already running")
            raise

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        """Drive the async iterator `agen` on the private loop, one item per step."""
        try:
            while True:
                item = self.run(_next_item(agen))
                if isinstance(item, _End):
                    return
                yield item
        finally:
            aclose: Callable[[], Awaitable[None]] | None = getattr(agen, "aclose", None)
            if aclose is not None and self._loop is not None and not self._loop.is_closed():
                self.run(_await(aclose()))

    def close(self, final: Callable[[], Coroutine[object, object, None]] | None = None) -> None:
        """Run `final` (cleanup) on the loop, finalize its async generators, then stop it and join the thread.

        Finalizing the async generators closes what `close_with_loop` tied to this loop (the
        HTTP sessions of clients that lived on it), as ``asyncio.run`` does on exit.
        """
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        try:
            if threading.current_thread() is not thread:
                if final is not None:
                    asyncio.run_coroutine_threadsafe(final(), loop).result(timeout=10)
                asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            if threading.current_thread() is not thread:
                thread.join(timeout=10)
                loop.close()

    def __repr__(self) -> str:
        return f"LoopThread(name={self.name!r}, running={self._loop is not None})"


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


_STOP_WAIT_S = 2.0
"""How long a sync caller that gave up waits for the loop's coroutine to stop."""


class _Handle:
    """One coroutine a sync caller runs on the loop, which that caller can stop whenever it gives up.

    A ``KeyboardInterrupt`` can arrive anywhere in the caller, even while the coroutine is
    being handed to the loop; `stop` works in every case: it cancels the task if it runs, or
    makes it end at once if it has yet to start, and waits until it has ended.
    """

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.cancelled = False
        self.task: asyncio.Task[object] | None = None

    async def run(self, coro: Coroutine[object, object, T]) -> T:
        """Run `coro` unless stopped already; mark the end, however it ends."""
        try:
            self.task = asyncio.current_task()
            if self.cancelled:
                coro.close()
                raise asyncio.CancelledError
            return await coro
        finally:
            self.stopped.set()

    def stop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Cancel the coroutine and wait (up to `_STOP_WAIT_S`) until it has ended."""
        self.cancelled = True
        task = self.task
        if task is not None and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)
        self.stopped.wait(_STOP_WAIT_S)
