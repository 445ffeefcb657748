"""Memory as state: per-session message lists, kept in process or in a `SessionStore` file."""

from __future__ import annotations

from typing import Any

from .base_memory import Memory, MemoryJournal, MessageLike
from .manager import MemoryManager

__all__ = ["Memory", "MemoryJournal", "MemoryManager", "MessageLike", "SessionStore"]


def __getattr__(name: str) -> Any:
    if name == "SessionStore":  # sqlite3 is imported only by those who use it
        from .session_store import SessionStore

        return SessionStore
    raise AttributeError(f"module 'plait.memory' has no attribute {name!r}")
