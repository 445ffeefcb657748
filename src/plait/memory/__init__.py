"""Memory as state: per-session message lists, kept in process or in a `SessionStore` file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base_memory import ContextSummary, Memory, MemoryJournal, MessageLike
from .manager import MemoryManager

if TYPE_CHECKING:
    from .session_store import SessionStore

__all__ = ["ContextSummary", "Memory", "MemoryJournal", "MemoryManager", "MessageLike", "SessionStore"]


def __getattr__(name: str) -> type[SessionStore]:
    if name == "SessionStore":  # sqlite3 is imported only by those who use it
        from .session_store import SessionStore

        return SessionStore
    raise AttributeError(f"module 'plait.memory' has no attribute {name!r}")
