"""Tools described by JSON Schema (MCP tools, LangChain tools) -> plait API descriptions.

Each property of the input schema becomes one parameter: its plait type (``STRING``,
``NUMBER``...) for prompts, and the property's own schema under ``json_schema`` so native
tool calling sends the model exactly what the tool declared (see `to_json_schema`).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..types import JSONValue
from ._types import ARRAY, BOOLEAN, FLOAT, NUMBER, OBJECT, STRING

__all__ = ["api_description", "plait_type"]

_PLAIT_TYPES = {
    "string": STRING,
    "integer": NUMBER,
    "number": FLOAT,
    "boolean": BOOLEAN,
    "array": ARRAY,
    "object": OBJECT,
}


def plait_type(schema: Mapping[str, JSONValue]) -> str:
    """The plait type of a JSON Schema: its first non-null ``type`` (of one ``anyOf`` member too), else ``STRING``.

    Example:
        ```python
        plait_type({"anyOf": [{"type": "integer"}, {"type": "null"}]})  # 'NUMBER'
        ```
    """
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the first real type
        kind = next((k for k in kind if k != "null"), None)
    if kind is None:  # Optional[int] as pydantic writes it: {"anyOf": [{"type": "integer"}, {"type": "null"}]}
        options = schema.get("anyOf") or schema.get("oneOf")
        listed = options if isinstance(options, list) else []
        members = [m for m in listed if isinstance(m, Mapping) and m.get("type") != "null"]
        if len(members) == 1:
            return plait_type(members[0])
    return _PLAIT_TYPES.get(str(kind), STRING)


def api_description(tool: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """A plait API description for a tool ``{name, description, inputSchema}`` (its JSON Schema kept per parameter)."""
    raw_schema = tool.get("inputSchema")
    schema: Mapping[str, JSONValue] = raw_schema if isinstance(raw_schema, Mapping) else {}
    raw_properties = schema.get("properties")
    properties: Mapping[str, JSONValue] = raw_properties if isinstance(raw_properties, Mapping) else {}
    parameters: list[JSONValue] = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, Mapping) else {}
        parameters.append(
            {
                "name": str(name),
                "type": plait_type(prop),
                "description": str(prop.get("description") or ""),
                "json_schema": dict(prop),
            }
        )
    listed = schema.get("required")
    required: list[JSONValue] = [str(r) for r in (listed if isinstance(listed, list) else []) if r in properties]
    description = str(tool.get("description") or tool.get("title") or "")
    return {"name": str(tool["name"]), "description": description, "parameters": parameters, "required": required}
