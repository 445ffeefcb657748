"""External tools: tools a tool-using agent offers its model but does not run itself.

A caller passes ``external_tools=[...]`` (OpenAI function tools, as a client sends them in
``tools``) to a call of a function-calling agent. The model sees them beside the agent's own
tools (or, with ``external_tools_only=True``, instead of them). A call to one never runs in
the agent: the run pauses as it does for an approval (`plait.agents.tool_loop`), the waiting
`PendingCall` says ``external=True``, and the caller runs the tool and answers with
``agent.resume({call_id: ToolOutput(text)})``. The agent's own calls of the same turn run as
usual. The tools are kept in the run's state (`RunState.scratch`, JSON), so a paused run saved
with its session still knows them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..exceptions import UserError

__all__ = [
    "EXTERNAL_ONLY_KEY",
    "EXTERNAL_TOOLS_KEY",
    "ExternalToolError",
    "check_external_tools",
    "external_names",
]

EXTERNAL_TOOLS_KEY = "external_tools"
"""A call's keyword (and the `RunState.scratch` key) holding the external tools."""

EXTERNAL_ONLY_KEY = "external_tools_only"
"""A call's keyword: True offers the external tools instead of the agent's own."""

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_FUNCTION_FIELDS = frozenset({"name", "description", "parameters", "strict"})


class ExternalToolError(UserError):
    """External tools that are not OpenAI function tools.

    Attributes:
        where: The offending part, named from the field the tools came in (``tools[1].function.name``).
    """

    def __init__(self, message: str, where: str) -> None:
        super().__init__(message)
        self.where = where


def check_external_tools(
    tools: object, own: Sequence[str] = (), field: str = EXTERNAL_TOOLS_KEY
) -> list[dict[str, Any]]:
    """`tools` as JSON OpenAI function tools (``{"type": "function", "function": {...}}``).

    Args:
        tools: The caller's tools.
        own: The names the agent's own tools go by (an external tool may not take one).
        field: What the caller called the list (it names the offending part in errors).

    Raises:
        ExternalToolError: Not a list of function tools with distinct valid names, or a name
            the agent's own tools use.
    """
    if not isinstance(tools, Sequence) or isinstance(tools, (str, bytes)):
        raise ExternalToolError(f"'{field}' must be a list of function tools", field)
    checked: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        where = f"{field}[{i}]"
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            raise ExternalToolError(f"'{where}' must be a function tool: {{'type': 'function', ...}}", f"{where}.type")
        function = tool.get("function")
        if not isinstance(function, Mapping):
            raise ExternalToolError(f"'{where}.function' must be an object", f"{where}.function")
        unknown = sorted(str(key) for key in function if key not in _FUNCTION_FIELDS)
        if unknown:
            raise ExternalToolError(f"'{where}.function' has an unknown field {unknown[0]!r}", f"{where}.function")
        name = function.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ExternalToolError(
                f"'{where}.function.name' must be 1 to 64 letters, digits, '_' or '-', got {name!r}",
                f"{where}.function.name",
            )
        if name in seen or name in own:
            whose = "another tool in the list" if name in seen else "one of the agent's own tools"
            raise ExternalToolError(
                f"'{where}.function.name' {name!r} is the name of {whose}", f"{where}.function.name"
            )
        seen.add(name)
        if not isinstance(function.get("description", ""), str):
            raise ExternalToolError(f"'{where}.function.description' must be a string", f"{where}.function.description")
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, Mapping):
            raise ExternalToolError(
                f"'{where}.function.parameters' must be a JSON Schema object", f"{where}.function.parameters"
            )
        entry: dict[str, Any] = {"name": name, "parameters": _json(parameters)}
        if function.get("description"):
            entry["description"] = function["description"]
        if isinstance(function.get("strict"), bool):
            entry["strict"] = function["strict"]
        checked.append({"type": "function", "function": entry})
    return checked


def external_names(tools: object) -> set[str]:
    """The names of checked external tools (none for anything else)."""
    if not isinstance(tools, list):
        return set()
    return {str(tool["function"]["name"]) for tool in tools if isinstance(tool, Mapping)}


def _json(value: object) -> Any:
    """A JSON copy of `value` (mappings with string keys, lists, scalars); anything else raises."""
    if isinstance(value, Mapping):
        return {str(key): _json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(item) for item in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise ExternalToolError(f"a tool's parameters must be JSON, not {type(value).__name__}", "parameters")
