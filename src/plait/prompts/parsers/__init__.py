"""Output formats (parsers): how a model is told to answer and how its reply is read back.

Each has `format_instruction()`, `parse_response(text)` and `format_response(parsed)`.
"""

from .json_parser import JSONParser
from .str_parser import StrParser
from .tool_parser import (
    InterpreterParser,
    MixedToolParser,
    PluginParser,
    ToolParser,
    ToolStatusCode,
    default_plugin_validate,
)

__all__ = [
    "InterpreterParser",
    "JSONParser",
    "MixedToolParser",
    "PluginParser",
    "StrParser",
    "ToolParser",
    "ToolStatusCode",
    "default_plugin_validate",
]
