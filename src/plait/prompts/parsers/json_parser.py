"""`JSONParser`: ask for JSON shaped like pydantic models and parse the reply into a dict.

The instruction shows each model as a JSON skeleton (field types as strings, ``//``
comments for descriptions and required/default). Replies are read leniently, since
models copy what they see: raw JSON or JSON in a fenced block (the closing fence may be
missing), ``//`` and ``/* */`` comments, trailing commas and text around the object are
all accepted.
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Iterator, Sequence
from typing import Any, Literal, TypeGuard, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, to_jsonable_python

from ...exceptions import ParseError, UserError
from ...utils._lenient_json import drop_trailing_commas
from .str_parser import StrParser

__all__ = ["JSONParser"]

_INDENT = "    "
_MAX_ERRORS_PER_MODEL = 5
_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)(?:```|\Z)", re.DOTALL)
_JSON_LABELS = {"", "json", "json5", "jsonc", "javascript", "js"}

# One rendered line: (code, comment); code carries its indentation.
_Line = tuple[str, str]


class JSONParser(StrParser):
    r"""Output format for JSON replies described by pydantic (v2) models.

    Args:
        template: The instruction, with ``{field}`` placeholders.
        **format_field: Placeholder values. A pydantic model class renders as a JSON
            skeleton; a list of model classes renders as alternatives joined by ``or``;
            strings render as they are. The model classes, in the order given, are the
            formats `parse_response` accepts.

    Example:
        ```python
        class Action(BaseModel):
            name: str = Field(description='tool to call')
            parameters: dict = {}

        class Finish(BaseModel):
            conclusion: str

        parser = JSONParser('Reply with JSON:\n{formats}', formats=[Action, Finish])
        print(parser.format_instruction())
        parser.parse_response('```json\n{"conclusion": "42"}\n```')  # {'conclusion': '42'}
        ```
    """

    @property
    def models(self) -> list[type[BaseModel]]:
        """The model classes among the fields, in order: the formats a reply may take."""
        found: list[type[BaseModel]] = []
        for value in self.format_field.values():
            candidates = value if isinstance(value, (list, tuple)) else [value]
            found.extend(m for m in candidates if _is_model(m) and m not in found)
        return found

    def format_to_string(self, value: object) -> str:
        """Render a model class (or a list of them) as a JSON skeleton; other values as text."""
        if _is_model(value):
            return _render_skeleton(value)
        if isinstance(value, (list, tuple)) and value and all(_is_model(v) for v in value):
            return "\nor\n".join(_render_skeleton(v) for v in value)
        return super().format_to_string(value)

    def parse_response(self, data: str) -> object:
        """Parse a JSON reply; with models, return the first that validates, as a plain dict.

        Without any model field the decoded JSON value is returned as is.

        Raises:
            ParseError: The reply holds no valid JSON, or the JSON matches none of the
                models (the message names each model and its validation errors).
        """
        models = self.models
        value = _load_lenient(data, models)
        if not models:
            return value
        failures: list[tuple[type[BaseModel], ValidationError]] = []
        for model in models:
            try:
                return model.model_validate(value).model_dump()
            except ValidationError as exc:
                failures.append((model, exc))
        raise ParseError(_no_match_message(failures), raw=data)

    def format_response(self, parsed: object) -> str:
        """Serialise a parsed reply (dict, list, model instance, ...) as JSON text."""
        if isinstance(parsed, BaseModel):
            parsed = parsed.model_dump(mode="json")
        try:
            return json.dumps(parsed, ensure_ascii=False, default=to_jsonable_python)
        except (TypeError, ValueError) as exc:
            raise UserError(f"JSONParser.format_response cannot serialise {type(parsed).__name__}: {exc}") from exc


def _is_model(value: object) -> TypeGuard[type[BaseModel]]:
    return isinstance(value, type) and issubclass(value, BaseModel)


# --------------------------------------------------------------------------- skeleton


def _render_skeleton(model: type[BaseModel]) -> str:
    lines = [("{", ""), *_object_body(model, 1, frozenset({model})), ("}", "")]
    return "\n".join(_join(code, comment) for code, comment in lines)


def _join(code: str, comment: str) -> str:
    if not comment:
        return code
    if code.strip():
        return f"{code}  // {comment}"
    return f"{code}// {comment}"


def _object_body(model: type[BaseModel], depth: int, seen: frozenset[type[BaseModel]]) -> list[_Line]:
    entries = [_field_lines(name, field, depth, seen) for name, field in model.model_fields.items()]
    lines: list[_Line] = []
    for index, entry in enumerate(entries):
        if index < len(entries) - 1:
            code, comment = entry[-1]
            entry[-1] = (code + ",", comment)
        lines.extend(entry)
    return lines


def _field_lines(name: str, field: FieldInfo, depth: int, seen: frozenset[type[BaseModel]]) -> list[_Line]:
    pad = _INDENT * depth
    lines: list[_Line] = [(pad, line) for line in (field.description or "").strip().splitlines() if line.strip()]
    key = json.dumps(field.alias or name, ensure_ascii=False)
    note = _requirement(field)
    nested = _nested_model(field.annotation)
    if nested is not None and nested[1] not in seen:
        kind, sub, optional = nested
        inner_seen = seen | {sub}
        if optional:
            note += "; may be null"
        if kind == "object":
            lines.append((f"{pad}{key}: {{", note))
            lines.extend(_object_body(sub, depth + 1, inner_seen))
            lines.append((f"{pad}}}", ""))
        else:
            inner = _INDENT * (depth + 1)
            lines.append((f"{pad}{key}: [", note))
            lines.append((f"{inner}{{", ""))
            lines.extend(_object_body(sub, depth + 2, inner_seen))
            lines.append((f"{inner}}}", ""))
            lines.append((f"{pad}]", ""))
        return lines
    type_name = json.dumps(_type_name(field.annotation), ensure_ascii=False)
    lines.append((f"{pad}{key}: {type_name}", note))
    return lines


def _requirement(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default is PydanticUndefined:  # default_factory
        return "optional"
    try:
        shown = json.dumps(field.default, ensure_ascii=False, default=to_jsonable_python)
    except (TypeError, ValueError):
        shown = repr(field.default)
    return f"optional, default: {shown}"


_SEQUENCES = (list, tuple, set, frozenset, Sequence)


def _nested_model(annotation: object) -> tuple[str, type[BaseModel], bool] | None:
    """``('object' | 'array', model, may_be_null)`` when the annotation holds one model class."""
    optional = False
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            return None
        optional = True
        annotation = args[0]
        origin = get_origin(annotation)
    if _is_model(annotation):
        return "object", annotation, optional
    if origin in _SEQUENCES:
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        if len(args) == 1 and _is_model(args[0]):
            return "array", args[0], optional
    return None


def _type_name(annotation: object) -> str:
    """A short, readable name for a type annotation: ``list[str]``, ``int | null``, ``'a' | 'b'``."""
    if annotation is None or annotation is type(None):
        return "null"
    if annotation is Any:
        return "Any"
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Literal:
        return " | ".join(repr(arg) for arg in args)
    if origin is Union or origin is types.UnionType:
        return " | ".join(_type_name(arg) for arg in args)
    if origin is not None:
        name = getattr(origin, "__name__", None) or str(origin)
        if not args:
            return name
        return f"{name}[{', '.join('...' if a is Ellipsis else _type_name(a) for a in args)}]"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation)


# --------------------------------------------------------------------------- lenient loading


def _load_lenient(data: str, models: list[type[BaseModel]]) -> object:
    """Decode the JSON value in a reply, or raise a `ParseError` written for the model."""
    if not isinstance(data, str):
        raise ParseError(f"expected the reply as text, got {type(data).__name__}", raw=data)
    first_error = ""
    for candidate in _candidates(data):
        try:
            return _decode(candidate)
        except (ValueError, RecursionError) as exc:
            first_error = first_error or _describe(exc)
    raise ParseError(_not_json_message(first_error or "empty reply", models), raw=data)


def _candidates(data: str) -> Iterator[str]:
    fenced = [(label.lower(), body) for label, body in _FENCE.findall(data)]
    yield from (body for label, body in fenced if label in _JSON_LABELS)
    yield data


def _decode(text: str) -> object:
    cleaned = drop_trailing_commas(_strip_comments(text)).strip()
    try:
        return json.loads(cleaned)
    except ValueError as exc:
        # Text around the value ("Sure! {...} Hope this helps"): decode from the first bracket.
        starts = [i for i in (cleaned.find("{"), cleaned.find("[")) if i >= 0]
        if not starts:
            raise
        try:
            value, _ = json.JSONDecoder().raw_decode(cleaned, min(starts))
        except ValueError:
            raise exc from None
        return value


def _describe(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "the JSON is nested too deeply"
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno}, column {exc.colno}"
    return str(exc)


def _strip_comments(text: str) -> str:
    """Remove ``// ...`` and ``/* ... */`` comments outside string literals."""
    if "/" not in text:
        return text
    out: list[str] = []
    index, size = 0, len(text)
    in_string = False
    while index < size:
        char = text[index]
        if in_string:
            if char == "\\":
                out.append(text[index : index + 2])
                index += 2
                continue
            in_string = char != '"'
        elif char == '"':
            in_string = True
        elif text.startswith("//", index):
            newline = text.find("\n", index)
            index = size if newline < 0 else newline
            continue
        elif text.startswith("/*", index):
            close = text.find("*/", index + 2)
            index = size if close < 0 else close + 2
            continue
        out.append(char)
        index += 1
    return "".join(out)


# --------------------------------------------------------------------------- messages


def _formats_hint(models: list[type[BaseModel]]) -> str:
    shapes = [f"{m.__name__} {{{', '.join(f.alias or n for n, f in m.model_fields.items())}}}" for m in models]
    return " or ".join(shapes)


def _not_json_message(reason: str, models: list[type[BaseModel]]) -> str:
    message = f"The reply is not valid JSON ({reason}). Reply with one JSON object, optionally inside a ```json block"
    if models:
        message += f", in one of these formats: {_formats_hint(models)}"
    return message + "."


def _no_match_message(failures: list[tuple[type[BaseModel], ValidationError]]) -> str:
    names = ", ".join(model.__name__ for model, _ in failures)
    lines = [f"The JSON does not match any expected format ({names}):"]
    for model, exc in failures:
        errors = exc.errors(include_url=False)
        shown = [f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in errors]
        if len(shown) > _MAX_ERRORS_PER_MODEL:
            shown = [*shown[:_MAX_ERRORS_PER_MODEL], f"... {len(errors) - _MAX_ERRORS_PER_MODEL} more"]
        lines.append(f"- {model.__name__}: {'; '.join(shown)}")
    return "\n".join(lines)
