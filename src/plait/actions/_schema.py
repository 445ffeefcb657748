"""Tool descriptions -> OpenAI ``tools`` entries with JSON Schema parameters.

The same description dict that is shown to models in prompts is converted, so the two
never disagree. OpenAI function names must match ``^[a-zA-Z0-9_-]{1,64}$``; a flattened
``Toolkit.api`` name becomes ``Toolkit__api`` (`openai_name`), and executors map it back.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from ..types import JSONValue

__all__ = ["openai_name", "openai_tool", "to_json_schema"]

_TYPES = {
    "string": "string",
    "str": "string",
    "number": "integer",
    "int": "integer",
    "integer": "integer",
    "float": "number",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "object": "object",
    "dict": "object",
    "null": "null",
}
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def openai_name(name: str) -> str:
    """An OpenAI-safe function name for a tool name (``'Toolkit.api'`` -> ``'Toolkit__api'``)."""
    safe = _UNSAFE.sub("_", name.replace(".", "__")) or "tool"
    if len(safe) > 64:
        digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:8]
        safe = f"{safe[:55]}_{digest}"
    return safe


def _schema_type(kind: object) -> str | None:
    if not isinstance(kind, str):
        return None
    # NUMBER is Lagent's integer; JSON Schema's "number" (float) is spelled FLOAT there.
    return _TYPES.get(kind.lower())


def to_json_schema(parameter: Mapping[str, object]) -> dict[str, JSONValue]:
    """JSON Schema of one parameter (or item) description: type, description, items, enum.

    A parameter that carries its own schema (``json_schema``, as MCP tools' parameters
    do) is exported as that schema, so nothing the server declared is lost.
    """
    own = parameter.get("json_schema")
    if isinstance(own, Mapping):
        exported = dict(own)
        if parameter.get("description") and "description" not in exported:
            exported["description"] = str(parameter["description"])
        return exported
    schema: dict[str, JSONValue] = {}
    kind = _schema_type(parameter.get("type"))
    if kind is not None:
        schema["type"] = kind
    if parameter.get("description"):
        schema["description"] = str(parameter["description"])
    items = parameter.get("items")
    if kind == "array" and isinstance(items, Mapping):
        schema["items"] = to_json_schema(items)
    enum = parameter.get("enum")
    if isinstance(enum, (list, tuple)) and enum:
        schema["enum"] = list(enum)
    return schema


def openai_tool(api: Mapping[str, Any], name: str, fallback_description: str = "") -> dict[str, Any]:
    """One OpenAI ``tools`` entry for an API description.

    Args:
        api: ``{name, description, parameters, required, ...}``.
        name: The tool name to expose (made OpenAI-safe).
        fallback_description: Used when the API has no description (a toolkit's own).
    """
    parameters = [p for p in api.get("parameters", []) if isinstance(p, Mapping) and "name" in p]
    schema: dict[str, JSONValue] = {
        "type": "object",
        "properties": {str(p["name"]): to_json_schema(p) for p in parameters},
        "required": [str(name) for name in api.get("required", [])],
        "additionalProperties": False,
    }
    return {
        "type": "function",
        "function": {
            "name": openai_name(name),
            "description": str(api.get("description") or fallback_description or ""),
            "parameters": schema,
        },
    }
