"""JSON encoding of state: messages whose content holds pydantic models or dataclasses (private)."""

from __future__ import annotations

__all__ = ["json_default"]


def json_default(value: object) -> object:
    """`json.dumps` ``default=``: pydantic models and dataclasses as plain dicts; anything else is an error."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if hasattr(value, "__dataclass_fields__"):
        from ..schema import dataclass2dict

        return dataclass2dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
