"""Memory as state: per-session message lists."""

from .base_memory import Memory, MessageLike
from .manager import MemoryManager

__all__ = ["Memory", "MemoryManager", "MessageLike"]
