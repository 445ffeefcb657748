"""Retry policy and a small TTL cache for the web tools."""

from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["RetryConfig", "TTLCache"]

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class RetryConfig:
    """Bounded retries with exponential backoff and jitter.

    Args:
        max_attempts: Total attempts, the first included.
        backoff: The first wait, in seconds; it doubles every attempt.
        backoff_max: The longest wait (also caps a server's ``Retry-After``).
    """

    max_attempts: int = 3
    backoff: float = 0.5
    backoff_max: float = 8.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        if retry_after is not None:
            return min(max(0.0, retry_after), self.backoff_max)
        ceiling = min(self.backoff_max, self.backoff * (2 ** (attempt - 1)))
        return random.uniform(ceiling / 2, ceiling)


class TTLCache(Generic[K, V]):
    """A small thread-safe LRU cache whose entries expire after `ttl` seconds.

    Args:
        maxsize: Most entries kept (the least recently used goes first).
        ttl: Seconds an entry stays valid.
        clock: The time source (monotonic seconds).
    """

    def __init__(self, maxsize: int = 100, ttl: float = 600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.maxsize = maxsize
        self.ttl = ttl
        self._clock = clock
        self._data: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The live value for `key`, or None."""
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return None
            expires, value = entry
            if expires <= self._clock():
                del self._data[key]
                return None
            self._data.move_to_end(key)
            return value

    def set(self, key: K, value: V) -> None:
        """Store `value` for `key` (evicting the oldest entries beyond `maxsize`)."""
        if self.maxsize <= 0:
            return
        with self._lock:
            self._data[key] = (self._clock() + self.ttl, value)
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)
