"""Reading loosely typed values field by field: decoded JSON replies, SDK objects, parameters (private).

Each helper returns the value when it has the expected shape and raises `TypeError`
otherwise: the error the plain access (``value.get``, ``int(value)``, iteration) would
have raised, which callers already turn into their own error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import SupportsFloat, SupportsIndex, SupportsInt

__all__ = ["count", "json_array", "json_object", "number"]


def json_object(value: object) -> Mapping[str, object]:
    """`value` when it is a JSON object (a mapping)."""
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


def json_array(value: object) -> Iterable[object]:
    """`value` when it can be iterated; an empty tuple for a missing (falsy) one."""
    if not value:
        return ()
    if not isinstance(value, Iterable):
        raise TypeError(f"'{type(value).__name__}' object is not iterable")
    return value


def count(value: object) -> int:
    """``int(value or 0)``: a token count or an index (None or missing: 0)."""
    value = value or 0
    if not isinstance(value, (str, bytes, SupportsInt, SupportsIndex)):
        kind = type(value).__name__
        raise TypeError(f"int() argument must be a string, a bytes-like object or a real number, not '{kind}'")
    return int(value)


def number(value: object) -> float:
    """``float(value)``: a sampling parameter such as a temperature."""
    if not isinstance(value, (str, bytes, SupportsFloat, SupportsIndex)):
        raise TypeError(f"float() argument must be a string or a real number, not '{type(value).__name__}'")
    return float(value)
