"""Python annotations and docstring type strings -> the tool-description type vocabulary.

The vocabulary is Lagent's: ``STRING``, ``NUMBER`` (int), ``FLOAT``, ``BOOLEAN``,
``Array``, plus ``OBJECT`` for mappings. A parameter dict may carry two extra keys that
survive into JSON Schema: ``items`` (the element description of an ``Array``) and
``enum`` (the allowed values of a ``Literal`` or ``Enum``).
"""

from __future__ import annotations

import collections.abc
import enum
import re
import types
import typing

from ..types import JSONValue

__all__ = ["TypeDescription", "describe_annotation", "describe_type_string", "split_annotated"]

TypeDescription = dict[str, JSONValue]
"""What a type says in a parameter description: ``{'type': ...}`` plus ``items`` / ``enum``."""

STRING, NUMBER, FLOAT, BOOLEAN, ARRAY, OBJECT = "STRING", "NUMBER", "FLOAT", "BOOLEAN", "Array", "OBJECT"

_ARRAY_ORIGINS = (
    list,
    tuple,
    set,
    frozenset,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Set,
    collections.abc.MutableSet,
    collections.abc.Iterable,
    collections.abc.Collection,
)
_OBJECT_ORIGINS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def split_annotated(annotation: object) -> tuple[object, str | None]:
    """``Annotated[T, "desc", ...]`` -> ``(T, "desc")``; anything else -> ``(annotation, None)``."""
    if typing.get_origin(annotation) is typing.Annotated:
        inner, *metadata = typing.get_args(annotation)
        text = next((item for item in metadata if isinstance(item, str)), None)
        return inner, text
    return annotation, None


def _strip_optional(annotation: object) -> tuple[object, list[object]]:
    """Remove ``None`` from a union; return the remaining annotation and its members."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0], members
        return annotation, members
    return annotation, [annotation]


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return NUMBER
    if isinstance(value, float):
        return FLOAT
    return STRING


def _enum_description(values: list[JSONValue]) -> TypeDescription:
    kinds = {_scalar(value) for value in values}
    if kinds == {NUMBER, FLOAT}:
        kinds = {FLOAT}
    return {"type": kinds.pop() if len(kinds) == 1 else STRING, "enum": values}


def describe_annotation(annotation: object) -> TypeDescription:
    """The description of a type hint: ``{'type': ...}`` plus ``items``/``enum`` when known.

    Returns an empty dict for annotations that say nothing (``Any``, unknown classes), so the
    caller can fall back to the docstring type.
    """
    annotation, _ = split_annotated(annotation)
    if isinstance(annotation, str):
        return describe_type_string(annotation)
    annotation, members = _strip_optional(annotation)
    if len(members) > 1:
        described = [describe_annotation(member) for member in members]
        kinds = {item.get("type") for item in described}
        if kinds <= {NUMBER, FLOAT} and kinds:
            return {"type": FLOAT if FLOAT in kinds else NUMBER}
        return described[0] if len(kinds) == 1 else {"type": STRING}
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return _enum_description(list(typing.get_args(annotation)))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _enum_description([member.value for member in annotation])
    if origin is not None:
        return _describe_generic(origin, typing.get_args(annotation))
    return _describe_class(annotation)


def _describe_generic(origin: object, args: tuple[object, ...]) -> TypeDescription:
    if origin in _ARRAY_ORIGINS:
        result: TypeDescription = {"type": ARRAY}
        item_args = [arg for arg in args if arg is not Ellipsis]
        if origin is tuple and len(set(map(repr, item_args))) > 1:
            return result
        if item_args:
            items = describe_annotation(item_args[0])
            if items:
                result["items"] = items
        return result
    if origin in _OBJECT_ORIGINS:
        return {"type": OBJECT}
    return {}


def _describe_class(annotation: object) -> TypeDescription:
    if annotation is bool:
        return {"type": BOOLEAN}
    if annotation is int:
        return {"type": NUMBER}
    if annotation is float:
        return {"type": FLOAT}
    if annotation in (str, bytes):
        return {"type": STRING}
    if annotation in _ARRAY_ORIGINS:
        return {"type": ARRAY}
    if annotation in _OBJECT_ORIGINS:
        return {"type": OBJECT}
    if isinstance(annotation, type):
        if issubclass(annotation, bool):
            return {"type": BOOLEAN}
        if issubclass(annotation, int):
            return {"type": NUMBER}
        if issubclass(annotation, float):
            return {"type": FLOAT}
        if issubclass(annotation, str):
            return {"type": STRING}
        if issubclass(annotation, (list, tuple, set, frozenset)):
            return {"type": ARRAY}
        if issubclass(annotation, dict):
            return {"type": OBJECT}
    return {}


_WORDS = {
    "str": STRING,
    "string": STRING,
    "text": STRING,
    "bytes": STRING,
    "int": NUMBER,
    "integer": NUMBER,
    "number": NUMBER,
    "float": FLOAT,
    "double": FLOAT,
    "bool": BOOLEAN,
    "boolean": BOOLEAN,
    "list": ARRAY,
    "tuple": ARRAY,
    "set": ARRAY,
    "sequence": ARRAY,
    "array": ARRAY,
    "iterable": ARRAY,
    "dict": OBJECT,
    "mapping": OBJECT,
    "object": OBJECT,
}
_OPTIONAL_SUFFIX = re.compile(r",?\s*optional\s*$", re.IGNORECASE)


def describe_type_string(text: str) -> TypeDescription:
    """The description of a docstring (or unresolvable string-hint) type such as ``list[str]``.

    Understands ``Optional[T]``, ``T | None``, ``T, optional``, ``typing.`` prefixes,
    ``list[T]``/``List[T]``, ``Literal['a', 'b']`` and the plain builtin names; returns an
    empty dict for anything else.
    """
    text = _OPTIONAL_SUFFIX.sub("", text.strip().strip("'\"")).strip()
    text = re.sub(r"\b(?:typing|collections\.abc|t)\.", "", text)
    if not text:
        return {}
    parts = [part.strip() for part in _split_top(text, "|")]
    parts = [part for part in parts if part.lower() not in ("none", "nonetype")]
    if len(parts) != 1:
        return {"type": STRING} if parts else {}
    text = parts[0]
    head, _, inner = text.partition("[")
    head = head.strip().lower()
    inner = inner[:-1] if inner.endswith("]") else inner
    if head in ("optional", "annotated") and inner:
        return describe_type_string(_split_top(inner, ",")[0])
    if head == "union" and inner:
        return describe_type_string(" | ".join(_split_top(inner, ",")))
    if head == "literal" and inner:
        return _literal_strings(inner)
    kind = _WORDS.get(head)
    if kind is None:
        return {}
    result: TypeDescription = {"type": kind}
    if kind == ARRAY and inner:
        args = _split_top(inner, ",")
        if len(args) == 1 or (len(args) == 2 and args[1].strip() == "..."):
            items = describe_type_string(args[0])
            if items:
                result["items"] = items
    return result


def _literal_strings(inner: str) -> TypeDescription:
    import ast

    values: list[JSONValue] = []
    for part in _split_top(inner, ","):
        try:
            values.append(ast.literal_eval(part.strip()))
        except (ValueError, SyntaxError):
            values.append(part.strip().strip("'\""))
    return _enum_description(values)


def _split_top(text: str, sep: str) -> list[str]:
    """Split on `sep` outside brackets."""
    parts: list[str] = []
    depth, start = 0, 0
    for index, char in enumerate(text):
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        elif char == sep and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts
