"""JSON encoding helpers (private): state whose messages hold pydantic models or dataclasses; text for models."""

from __future__ import annotations

import json

__all__ = ["json_default", "key_json", "text_json"]

text_json = json.JSONEncoder(ensure_ascii=False).encode
"""``json.dumps(value, ensure_ascii=False)``, without building an encoder per call (as ``dumps`` with options does)."""

key_json = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode
"""``json.dumps(value, ensure_ascii=False, sort_keys=True)``: equal JSON objects give equal text."""


def json_default(value: object) -> object:
    """`json.dumps` ``default=``: pydantic models and dataclasses as plain dicts; anything else is an error."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if hasattr(value, "__dataclass_fields__"):
        from ..schema import dataclass2dict

        return dataclass2dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
