"""Memory as state: per-session message lists, kept in process or in a session backend.

Backends (`SessionBackend`): `SessionStore` (a SQLite file) and `PostgresSessionStore` (a
PostgreSQL database, psycopg 3: ``pip install 'plait[postgres]'``); their drivers are imported
only by those who use them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base_memory import ContextSummary, Memory, MemoryJournal, MessageLike
from .manager import MemoryManager

if TYPE_CHECKING:
    from .backend import SessionBackend
    from .postgres_store import PostgresSessionStore
    from .session_store import SessionStore

__all__ = [
    "ContextSummary",
    "Memory",
    "MemoryJournal",
    "MemoryManager",
    "MessageLike",
    "PostgresSessionStore",
    "SessionBackend",
    "SessionStore",
]

_LAZY = {  # sqlite3 and psycopg are imported only by those who use them
    "SessionStore": "session_store",
    "PostgresSessionStore": "postgres_store",
    "SessionBackend": "backend",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'plait.memory' has no attribute {name!r}")
