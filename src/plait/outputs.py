"""Typed outputs: an agent's answer as a validated Python object (``output_type=``).

An agent built with ``output_type=Model`` asks its model for JSON that matches `Model`'s
JSON Schema and hands back the validated object in the reply's ``formatted`` (``content``
keeps the text). `OutputType` holds everything about one such type, written once for
every agent and backend:

* `schema` and `response_format`: the JSON Schema, and the OpenAI-style ``response_format``
  request field that carries it (``{"type": "json_schema", "json_schema": {"name", "schema",
  "strict"}}``). Backends that constrain decoding take that one field: `GPTAPI` sends it,
  `LlamaCppModel` decodes under its grammar, `ClaudeAPI` turns it into a forced tool, vLLM and
  LMDeploy into guided decoding; backends without one (HF transformers) get `instructions`.
  The schema is made *strict*-compatible (every property required, no extra properties, no
  defaults) where that keeps its meaning; a schema that cannot be strict (a free-form
  ``dict[str, int]``) is sent with ``strict: false``.
* `instructions`: the same request in words, for models that take no schema.
* `validate`: the reply text to the object, or `OutputInvalid` with one line per error
  (``'path: message'``) — the text a retry shows the model.

A type whose schema is not an object with properties (``int``, ``list[str]``, a union) is
*wrapped*: the model writes ``{"result": <value>}`` (strict APIs take objects only) and
`validate` unwraps it (a bare value is accepted too).

Example:
    ```python
    from pydantic import BaseModel
    from plait.outputs import OutputType

    class City(BaseModel):
        name: str
        population: int

    spec = OutputType(City)
    spec.validate('{"name": "Oslo", "population": 709037}')   # City(name='Oslo', population=709037)
    spec.response_format()['json_schema']['strict']           # True
    ```
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar, cast

from pydantic import TypeAdapter, ValidationError

from .exceptions import ParseError, UserError
from .types import JSONValue
from .untrusted import loads

__all__ = ["WRAPPER_KEY", "OutputInvalid", "OutputType", "output_type_of", "response_schema", "schema_instructions"]

T = TypeVar("T")

WRAPPER_KEY = "result"
"""The one property a wrapped type's value is written under (see the module docs)."""

_DECODER = json.JSONDecoder()
_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?```\s*$", re.DOTALL)


class OutputInvalid(Exception):
    """A reply that does not match the output type (internal: the agent retries or raises).

    Attributes:
        errors: One ``'path: message'`` line per error.
    """

    def __init__(self, errors: Sequence[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = list(errors)


class OutputType(Generic[T]):
    """What a typed answer must be: its type, its JSON Schema, and how a reply is checked.

    Args:
        type_: A pydantic model, a dataclass, a `TypedDict`, or any type pydantic validates
            (``int``, ``list[str]``, ``Literal['yes', 'no']``...).
        name: The schema's name in requests (``json_schema.name``; letters, digits, ``_``
            and ``-``); defaults to the type's name.

    Raises:
        UserError: pydantic cannot build a JSON Schema for `type_`.
    """

    def __init__(self, type_: type[T] | Any, name: str | None = None) -> None:
        self.type = type_
        self.name = _schema_name(name or getattr(type_, "__name__", None) or repr(type_))
        try:
            self.adapter: TypeAdapter[T] = TypeAdapter(type_)
            schema = self.adapter.json_schema()
        except Exception as exc:  # pydantic's errors for unsupported types are several classes
            raise UserError(f"output_type {type_!r} has no JSON Schema: {exc}") from exc
        self.wrapped = not (schema.get("type") == "object" and isinstance(schema.get("properties"), Mapping))
        if self.wrapped:
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {WRAPPER_KEY: schema}, "required": [WRAPPER_KEY]}
            if defs is not None:
                schema["$defs"] = defs
        self.schema: dict[str, Any] = schema
        strict = _strict(schema)
        self.strict = strict is not None
        self.strict_schema: dict[str, Any] = strict if strict is not None else schema
        self._response_format: dict[str, object] = {
            "type": "json_schema",
            "json_schema": {"name": self.name, "schema": self.strict_schema, "strict": self.strict},
        }

    def __repr__(self) -> str:
        return f"OutputType({self.name})"

    def response_format(self) -> dict[str, object]:
        """The ``response_format`` request field that asks for this type (OpenAI's ``json_schema`` shape).

        Built once and shared by every request: backends read it, never change it.
        """
        return self._response_format

    def instructions(self) -> str:
        """The request in words, for a model that takes no schema."""
        return _instructions(self.schema)

    def correction(self, errors: Sequence[str]) -> str:
        """What the model is told after an invalid reply: what was wrong, and to answer again."""
        listed = "\n".join(f"- {line}" for line in errors[:20])
        return (
            f"Your reply did not match the required JSON Schema:\n{listed}\n"
            "Reply again with only the corrected JSON object, and nothing else."
        )

    def validate(self, text: str) -> T:
        """The reply text as the output type.

        Code fences and text around the JSON are tolerated; a wrapped type's value is read
        from ``{"result": ...}`` (or taken bare).

        Raises:
            OutputInvalid: The text holds no JSON, or its value does not validate.
        """
        try:
            value = _json_in(text)
        except ParseError as exc:
            raise OutputInvalid([f"(reply): not JSON ({exc.err_msg})"]) from None
        if self.wrapped and isinstance(value, dict) and set(value) == {WRAPPER_KEY}:
            value = value[WRAPPER_KEY]
        try:
            return self.adapter.validate_python(value)
        except ValidationError as exc:
            raise OutputInvalid([_error_line(error) for error in exc.errors()]) from None


def output_type_of(value: object) -> OutputType[Any] | None:
    """An agent's `OutputType` from its ``output_type`` argument (a type, an `OutputType`, or None)."""
    if value is None or isinstance(value, OutputType):
        return value
    return OutputType(value)


def response_schema(response_format: object) -> dict[str, Any] | None:
    """The JSON Schema a ``response_format`` parameter asks for (``json_object``: any object; else None).

    Raises:
        UserError: `response_format` is not one of OpenAI's shapes.
    """
    if response_format is None:
        return None
    if isinstance(response_format, Mapping):
        kind = response_format.get("type")
        if kind == "text":
            return None
        if kind == "json_object":
            return {"type": "object"}
        spec = response_format.get("json_schema")
        if kind == "json_schema" and isinstance(spec, Mapping) and isinstance(spec.get("schema"), Mapping):
            return dict(spec["schema"])
    raise UserError(
        "response_format must be {'type': 'json_schema', 'json_schema': {'name', 'schema', 'strict'}}, "
        f"{{'type': 'json_object'}} or {{'type': 'text'}}, not {response_format!r}"
    )


def schema_instructions(response_format: object) -> str | None:
    """A ``response_format`` parameter in words, for a model that takes no schema (None: it asks for text)."""
    schema = response_schema(response_format)
    return None if schema is None else _instructions(schema)


def _instructions(schema: Mapping[str, Any]) -> str:
    text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    return f"Reply with only a JSON object that matches this JSON Schema, and nothing else:\n{text}"


def _schema_name(raw: str) -> str:
    name = re.sub(r"[^a-zA-Z0-9_-]+", "_", raw).strip("_")[:64]
    return name or "output"


def _json_in(text: str) -> JSONValue:
    """The JSON value a reply holds: the whole text, a fenced block, or the first object/array in it."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        return cast(JSONValue, loads(stripped))
    except ParseError:
        starts = [i for i in (stripped.find("{"), stripped.find("[")) if i >= 0]
        if not starts:
            raise
        start = min(starts)
        try:  # where the first value ends (text may follow it); `loads` then decodes it safely
            end = start + _DECODER.raw_decode(stripped[start:])[1]
        except (ValueError, RecursionError):
            raise ParseError(f"no complete JSON value after position {start}", raw=text) from None
        return cast(JSONValue, loads(stripped[start:end]))


def _error_line(error: Mapping[str, Any]) -> str:
    location = ".".join(str(part) for part in error.get("loc", ())) or "(root)"
    return f"{location}: {error.get('msg', 'invalid')}"


def _strict(schema: object) -> Any:
    """`schema` made strict-compatible (OpenAI structured outputs), or None where it cannot be.

    Objects list every property as required and allow no others; ``default`` values are
    dropped (a strict model always writes the field). An object that allows arbitrary extra
    properties (a ``dict[str, X]``) has no strict form.
    """
    if isinstance(schema, list):
        items = [_strict(item) for item in schema]
        return None if any(item is None for item in items) else items
    if not isinstance(schema, Mapping):
        return schema
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "default":
            continue
        if key in ("properties", "$defs", "definitions"):
            if not isinstance(value, Mapping):
                return None
            converted = {name: _strict(sub) for name, sub in value.items()}
            if any(sub is None for sub in converted.values()):
                return None
            result[key] = converted
        elif key in ("items", "anyOf", "allOf", "oneOf", "prefixItems", "not"):
            converted_value = _strict(value)
            if converted_value is None:
                return None
            result[key] = converted_value
        else:
            result[key] = value
    if result.get("type") == "object" or "properties" in result:
        extra = result.get("additionalProperties")
        if extra not in (None, False):
            return None  # free-form keys: no strict form
        result["additionalProperties"] = False
        result["required"] = list(result.get("properties", {}))
    return result
