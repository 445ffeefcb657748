"""Hooks around agent and tool calls."""

from .action_preprocessor import ActionPreprocessor, InternLMActionProcessor
from .hook import Hook, RemovableHandle
from .logger import MessageLogger
from .tracer import JSONLTracer

__all__ = ["ActionPreprocessor", "Hook", "InternLMActionProcessor", "JSONLTracer", "MessageLogger", "RemovableHandle"]
