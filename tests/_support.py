"""Helpers that let one test body drive sync and async components alike."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Iterator
from typing import Any


def resolve(value: Any) -> Any:
    """Return `value`, running it to completion first if it is awaitable (async mode)."""
    if inspect.isawaitable(value):
        return asyncio.run(_await(value))
    return value


async def _await(value: Any) -> Any:
    return await value


def collect(stream: Iterator[Any] | AsyncIterator[Any]) -> list[Any]:
    """All items of a sync or async iterator."""
    if isinstance(stream, AsyncIterator):

        async def _all() -> list[Any]:
            return [item async for item in stream]

        return asyncio.run(_all())
    return list(stream)
