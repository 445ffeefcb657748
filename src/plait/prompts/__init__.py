"""Prompt templates and output formats (parsers)."""

from .parsers import (
    InterpreterParser,
    JSONParser,
    MixedToolParser,
    PluginParser,
    StrParser,
    ToolParser,
    ToolStatusCode,
    default_plugin_validate,
)
from .prompt_template import PromptTemplate

__all__ = [
    "InterpreterParser",
    "JSONParser",
    "MixedToolParser",
    "PluginParser",
    "PromptTemplate",
    "StrParser",
    "ToolParser",
    "ToolStatusCode",
    "default_plugin_validate",
]
