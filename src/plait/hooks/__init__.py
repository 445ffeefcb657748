"""Hooks around agent and tool calls, and interceptors that observe them (tracing, usage)."""

from .action_preprocessor import ActionPreprocessor, InternLMActionProcessor
from .hook import Hook, RemovableHandle
from .logger import MessageLogger
from .tool_log import ToolLog
from .tracer import JSONLTracer
from .usage import Metered, UsageMeter

__all__ = [
    "ActionPreprocessor",
    "Hook",
    "InternLMActionProcessor",
    "JSONLTracer",
    "MessageLogger",
    "Metered",
    "RemovableHandle",
    "ToolLog",
    "UsageMeter",
]
