"""Hooks around agent and tool calls."""

from .hook import Hook, RemovableHandle
from .logger import MessageLogger

__all__ = ["Hook", "MessageLogger", "RemovableHandle"]
