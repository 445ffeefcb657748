"""Typed tool results over MCP: ``outputSchema`` and ``structuredContent`` (private).

A tool whose return annotation is a pydantic model, a ``TypedDict`` or a dataclass has a
structured result: `MCPServer` advertises the type's JSON Schema as the tool's
``outputSchema`` and sends each result as ``structuredContent`` (validated against the
type) beside the same JSON as text, as the specification asks for older clients. plait
writes such a return value as its JSON text (`plait.actions.parser.to_result_items`);
this module reads that text back through the type. Other tools (plain text, images,
``ActionReturn``) have neither.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from typing_extensions import is_typeddict

from ...exceptions import ToolError
from ...schema import ActionReturn
from ...types import JSONValue
from ..base_action import BaseAction

__all__ = ["OutputTypes", "structured_content"]

logger = logging.getLogger(__name__)


def _structured_type(fn: Callable[..., object]) -> type | None:
    """The return annotation of `fn` when it is a model, ``TypedDict`` or dataclass (None otherwise)."""
    try:
        hint = typing.get_type_hints(fn).get("return")
    except Exception:  # an annotation that does not resolve: no schema, as for an untyped tool
        return None
    if not isinstance(hint, type):
        return None
    if issubclass(hint, BaseModel) or is_typeddict(hint):
        return hint
    if dataclasses.is_dataclass(hint) and not issubclass(hint, ActionReturn):
        return hint
    return None


@functools.lru_cache(maxsize=256)
def _adapter(kind: type) -> tuple[TypeAdapter[Any], dict[str, JSONValue]] | None:
    """`kind`'s validator and JSON Schema (None: pydantic cannot describe it)."""
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(kind)
        schema = adapter.json_schema(mode="serialization")
    except Exception as exc:  # a field of a type pydantic cannot describe
        logger.debug("no output schema for %r: %s", kind, exc)
        return None
    return (adapter, schema) if schema.get("type") == "object" else None


class OutputTypes:
    """The structured return types of an executor's tools, by flattened name (``Toolkit.api``).

    Args:
        actions: The executor's actions.
    """

    def __init__(self, actions: Iterable[BaseAction]) -> None:
        self.types: dict[str, type] = {}
        for action in actions:
            for api in action.api_names:
                try:
                    fn = action.resolve_api(api)[2]
                except ToolError:
                    continue
                kind = _structured_type(fn)
                if kind is not None and _adapter(kind) is not None:
                    self.types[f"{action.name}.{api}" if action.is_toolkit else action.name] = kind

    def schema(self, name: str) -> dict[str, JSONValue] | None:
        """The ``outputSchema`` of tool `name` (flattened; None: its result is not structured)."""
        kind = self.types.get(name)
        described = _adapter(kind) if kind is not None else None
        return dict(described[1]) if described is not None else None


def structured_content(kind: type, items: list[dict[str, Any]] | None) -> tuple[JSONValue, str | None]:
    """``(structuredContent, None)`` for a typed tool's result items, or ``(None, why not)``.

    The items must be the one JSON text plait writes for such a value.
    """
    described = _adapter(kind)
    texts = [item.get("content") for item in items or () if isinstance(item, Mapping)]
    if described is None or len(texts) != 1 or not isinstance(texts[0], str):
        return None, f"the tool's result is not one {kind.__name__} (its declared return type)"
    adapter = described[0]
    try:
        value = adapter.validate_json(texts[0])
    except ValidationError as exc:
        return None, f"the tool's result does not match its declared return type {kind.__name__}: {exc}"
    data: JSONValue = adapter.dump_python(value, mode="json")
    return data, None
