"""Sans-IO operations and their two drivers.

Everything the sandbox does while a call runs (send the code, read output, notice a
timeout, interrupt, kill) is written once as a generator (an *op*) that yields two kinds
of effects:

* `Wait(fds, timeout)`: resume when one of the file descriptors is readable, or after
  `timeout` seconds; the op receives the set of ready fds (empty on timeout);
* `Sleep(seconds)`.

The op itself only does non-blocking work (non-blocking reads, signals). `drive` performs
the effects with ``select.poll``; `adrive` with the event loop's ``add_reader`` and
``asyncio.sleep``, so an async caller never blocks its loop. When the caller stops
driving (an exception or a cancelled task), the op is closed, so its ``finally`` blocks
(such as killing a half-finished call) run in both worlds.

Why not `plait.driver`: that driver performs *calls* (functions, models, tools) and owns the
agent-level concerns (streamed chunks, interceptors, worker threads for blocking work).
The sandbox needs the one thing it does not do: wait on raw file descriptors without a
thread, with ``poll`` in the caller's thread or ``add_reader`` on the loop. The two effect
sets do not mix (an op never calls a tool; a flow never waits on an fd), so they keep
separate drivers, written the same way (an op is closed whatever ends the drive).
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Generic, TypeVar, Union

__all__ = ["Op", "Sleep", "Wait", "adrive", "drive"]

R = TypeVar("R")


@dataclass(frozen=True)
class Wait:
    """Resume when one of `fds` is readable or `timeout` seconds have passed (None: no limit)."""

    fds: tuple[int, ...]
    timeout: float | None


@dataclass(frozen=True)
class Sleep:
    """Resume after `seconds`."""

    seconds: float


Effect = Union[Wait, Sleep]
Op = Generator[Effect, set[int], R]
"""An op: yields effects, is sent the ready fds after each (empty after a `Sleep` or a timeout)."""

_READABLE = select.POLLIN | select.POLLHUP | select.POLLERR | select.POLLNVAL


@dataclass(frozen=True)
class _Done(Generic[R]):
    """What an op returned."""

    value: R


def _advance(op: Op[R], ready: set[int] | None) -> Effect | _Done[R]:
    """Start `op` (`ready` None) or resume it with `ready`: its next effect, or what it returned."""
    try:
        return next(op) if ready is None else op.send(ready)
    except StopIteration as stop:
        return _Done(stop.value)


def _perform(effect: Effect) -> set[int]:
    if isinstance(effect, Sleep):
        time.sleep(max(0.0, effect.seconds))
        return set()
    poller = select.poll()
    for fd in effect.fds:
        poller.register(fd, select.POLLIN)
    timeout_ms = None if effect.timeout is None else max(0, int(effect.timeout * 1000 + 0.999))
    events = poller.poll(timeout_ms)
    return {fd for fd, event in events if event & _READABLE}


def drive(op: Op[R]) -> R:
    """Run `op` in the calling thread."""
    with contextlib.closing(op):
        step = _advance(op, None)
        while not isinstance(step, _Done):
            step = _advance(op, _perform(step))
        return step.value


async def _aperform(effect: Effect) -> set[int]:
    if isinstance(effect, Sleep):
        await asyncio.sleep(max(0.0, effect.seconds))
        return set()
    loop = asyncio.get_running_loop()
    future: asyncio.Future[set[int]] = loop.create_future()

    def ready(fd: int) -> None:
        if not future.done():
            future.set_result({fd})

    added = []
    try:
        for fd in effect.fds:
            loop.add_reader(fd, ready, fd)
            added.append(fd)
        if effect.timeout is None:
            return await future
        try:
            return await asyncio.wait_for(future, max(0.0, effect.timeout))
        except asyncio.TimeoutError:
            return set()
    finally:
        for fd in added:
            loop.remove_reader(fd)


async def adrive(op: Op[R]) -> R:
    """Run `op` on the running event loop without blocking it."""
    with contextlib.closing(op):
        step = _advance(op, None)
        while not isinstance(step, _Done):
            step = _advance(op, await _aperform(step))
        return step.value
