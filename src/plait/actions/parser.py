"""Argument parsers: turn what a model wrote into keyword arguments for a tool API.

A parser is built for one action (``parser(action)``): it checks the action's description,
adds a ``parameter_description`` telling the model how to pass arguments, then
`parse_inputs` maps raw inputs to ``{parameter: value}`` (raising `ParseError` with a
message written for the model) and `parse_outputs` turns a tool's return value into
result items ``[{'type': 'text', 'content': ...}]``.

Example:
    ```python
    action = Bold(parser=TupleParser)
    action("('hello',)").result  # [{'type': 'text', 'content': '**hello**'}]
    ```
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..exceptions import ParseError, UserError
from ..untrusted import clean, clean_text

if TYPE_CHECKING:
    from .base_action import BaseAction

__all__ = ["BaseParser", "JsonParser", "ParseError", "TupleParser", "to_result_items"]

_MEDIA_KEYS = ("text", "image", "audio", "video", "file")
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|json5|python)?[ \t]*\n?(.*?)(?:```|$)", re.DOTALL)
_MAX_LITERAL = 100_000


def _plain(value: object) -> object:
    """A pydantic model or dataclass instance as plain data (its fields), anything else unchanged."""
    if isinstance(value, type):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # a pydantic model: its JSON form
        try:
            return dump(mode="json")
        except Exception:  # a model that cannot dump itself shows as str() below
            return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            return dataclasses.asdict(value)
        except Exception:  # a field that cannot be copied
            return value
    return value


def _to_text(value: object) -> str:
    """Text for a result item: strings as they are, JSON for data (models and dataclasses too), ``str()`` else."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    value = _plain(value)
    if isinstance(value, (Mapping, list, tuple, int, float, bool)) or value is None:
        try:
            return json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            pass
    try:
        return str(value)
    except Exception:  # a broken __str__ must not break the tool call
        return object.__repr__(value)


def to_result_items(outputs: object) -> list[dict[str, object]]:
    """Normalise a tool's return value into result items (strings cleaned, see `plait.untrusted`).

    * ``None`` -> ``[]``; a string -> one text item; bytes are decoded as UTF-8.
    * ``{'type': ..., 'content': ...}`` or a list of such dicts -> kept as items.
    * a dict whose keys are all media kinds (``text``, ``image``, ``audio``, ``video``,
      ``file``), e.g. ``{'text': out}`` or ``{'image': path}`` -> one item per key.
    * anything else -> one text item holding its JSON (non-ASCII kept; a pydantic model or a
      dataclass as its fields) or ``str()``.
    """
    if type(outputs) is str:  # the common case: one text item, nothing to walk
        return [{"type": "text", "content": clean_text(outputs)}]
    try:
        return clean(_result_items(outputs))
    except ParseError:  # data nested too deep to keep
        return [{"type": "text", "content": f"<a {type(outputs).__name__} nested too deep to show>"}]


def _result_items(outputs: object) -> list[dict[str, object]]:
    if outputs is None:
        return []
    if isinstance(outputs, Mapping):
        if _is_item(outputs):
            return [dict(outputs)]
        if outputs and all(key in _MEDIA_KEYS for key in outputs):
            return [
                {"type": key, "content": _to_text(value) if key == "text" else value} for key, value in outputs.items()
            ]
    elif isinstance(outputs, (list, tuple)) and outputs and all(_is_item(item) for item in outputs):
        return [dict(item) for item in outputs]
    return [{"type": "text", "content": _to_text(outputs)}]


def _is_item(value: object) -> bool:
    return isinstance(value, Mapping) and "type" in value and "content" in value and len(value) <= 3


class BaseParser:
    """Maps raw inputs to the first parameter of the API (dicts with known keys are used as they are).

    Subclasses set `PARAMETER_DESCRIPTION` (added to every API's description) and override
    `parse_inputs`.

    Args:
        action: The action whose description the parser validates and decorates.

    Raises:
        UserError: The description is malformed (e.g. ``required`` names an unknown parameter).
    """

    PARAMETER_DESCRIPTION: str = ""

    def __init__(self, action: BaseAction) -> None:
        self.action = action
        self._api2param: dict[str, list[dict[str, Any]]] = {}
        self._api2required: dict[str, list[str]] = {}
        description = action.description
        if not isinstance(description, Mapping):
            raise UserError(f"a tool description must be a dict, not {type(description).__name__}")
        apis = description.get("api_list") if "api_list" in description else [description]
        if not isinstance(apis, list):
            raise UserError(f"'api_list' of tool {action.name!r} must be a list of API descriptions")
        for api in apis:
            self._register(api, toolkit="api_list" in description)

    def _register(self, api: object, toolkit: bool) -> None:
        if not isinstance(api, dict) or not isinstance(api.get("name"), str):
            raise UserError(f"every API description of tool {self.action.name!r} needs a 'name'; got {api!r}")
        parameters = api.get("parameters", [])
        required = api.get("required", [])
        if not isinstance(parameters, list) or not all(isinstance(p, dict) and "name" in p for p in parameters):
            raise UserError(f"'parameters' of {api['name']!r} must be a list of dicts with a 'name'")
        names = [p["name"] for p in parameters]
        unknown = [name for name in required if name not in names]
        if unknown:
            raise UserError(
                f"API {api['name']!r} of tool {self.action.name!r} lists required parameters that it does not "
                f"define: {', '.join(map(repr, unknown))}"
            )
        if self.PARAMETER_DESCRIPTION:
            api["parameter_description"] = self.PARAMETER_DESCRIPTION
        key = api["name"] if toolkit else "run"
        self._api2param[key] = parameters
        self._api2required[key] = list(required)

    # -- helpers for subclasses -------------------------------------------------------------
    def parameters(self, name: str = "run") -> list[dict[str, Any]]:
        """The parameter descriptions of API `name`.

        Raises:
            ParseError: The action has no such API.
        """
        try:
            return self._api2param[name]
        except KeyError:
            valid = ", ".join(map(repr, self._api2param))
            raise ParseError(f"unknown API {name!r}; valid APIs: {valid}", raw=name) from None

    def required(self, name: str = "run") -> list[str]:
        """Names of the required parameters of API `name`."""
        self.parameters(name)
        return self._api2required[name]

    def check_arguments(self, args: dict[str, object], name: str = "run") -> dict[str, object]:
        """Reject unknown and missing arguments, naming them and the valid ones."""
        names = [p["name"] for p in self.parameters(name)]
        unknown = [key for key in args if key not in names]
        if unknown:
            accepted = f"it accepts: {', '.join(map(repr, names))}" if names else "it takes no arguments"
            raise ParseError(f"unknown arguments: {', '.join(map(_short_repr, unknown))}; {accepted}", raw=args)
        missing = [key for key in self._api2required[name] if key not in args]
        if missing:
            raise ParseError(f"missing required arguments: {', '.join(map(repr, missing))}", raw=args)
        return args

    def example(self, name: str = "run") -> str:
        """A JSON skeleton of the API's arguments, for error messages."""
        return "{" + ", ".join(f'"{p["name"]}": ...' for p in self.parameters(name)) + "}"

    # -- the interface ------------------------------------------------------------------------
    def parse_inputs(self, inputs: object, name: str = "run") -> dict[str, object]:
        """Map `inputs` to the API's first parameter (a dict of known parameters is used as is)."""
        params = self.parameters(name)
        names = [p["name"] for p in params]
        if inputs is None:
            args: dict[str, object] = {}
        elif isinstance(inputs, Mapping) and all(key in names for key in inputs):
            args = dict(inputs)
        elif params:
            args = {names[0]: inputs}
        elif isinstance(inputs, str) and not inputs.strip():
            args = {}
        else:
            raise ParseError(f"{self._api_label(name)} takes no arguments; got {_short_repr(inputs)}", raw=inputs)
        return self.check_arguments(args, name)

    def parse_outputs(self, outputs: object) -> list[dict[str, object]]:
        """Turn a tool's return value into result items (see `to_result_items`)."""
        return to_result_items(outputs)

    def _api_label(self, name: str) -> str:
        return f"{self.action.name}.{name}" if name != "run" else self.action.name


class JsonParser(BaseParser):
    """Arguments as a dict or a JSON object, optionally inside a Markdown code fence.

    Also accepted: a Python dict literal (single quotes) and a JSON object surrounded by
    other text. Unknown and missing arguments are errors that name them.
    """

    PARAMETER_DESCRIPTION = (
        "If you call this tool, you must pass arguments in the JSON format {key: value}, "
        "where the key is the parameter name."
    )

    def parse_inputs(self, inputs: object, name: str = "run") -> dict[str, object]:
        """Parse a dict / JSON string into keyword arguments."""
        self.parameters(name)
        if inputs is None:
            args: object = {}
        elif isinstance(inputs, (dict, Mapping)):
            args = dict(inputs)
        elif isinstance(inputs, (str, bytes, bytearray)):
            text = inputs if isinstance(inputs, str) else bytes(inputs).decode("utf-8", errors="replace")
            args = self._loads(text, name) if text.strip() else {}
        else:
            raise ParseError(
                f"arguments must be a JSON object such as {self.example(name)}, not {type(inputs).__name__}",
                raw=inputs,
            )
        if not isinstance(args, dict):
            raise ParseError(
                f"arguments must be a JSON object such as {self.example(name)}, not a JSON {_json_kind(args)}",
                raw=inputs,
            )
        return self.check_arguments(args, name)

    def _loads(self, text: str, name: str) -> object:
        text = text.strip()
        fence = _FENCE.search(text)
        if fence is not None:
            text = fence.group(1).strip()
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as exc:
            error = exc
        start = text.find("{")
        if start >= 0:
            try:
                return json.JSONDecoder().raw_decode(text[start:])[0]
            except (ValueError, RecursionError):
                pass
        if len(text) <= _MAX_LITERAL and text.startswith("{"):
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                value = None
            if isinstance(value, dict):
                return value
        if isinstance(error, json.JSONDecodeError):
            detail = f"{error.msg} (line {error.lineno}, column {error.colno})"
        else:
            detail = type(error).__name__
        raise ParseError(f"invalid JSON arguments: {detail}; pass a JSON object such as {self.example(name)}", raw=text)


class TupleParser(BaseParser):
    """Arguments as a positional tuple: ``"('a', 1)"`` or a Python tuple (a dict also works)."""

    PARAMETER_DESCRIPTION = (
        "If you call this tool, you must pass arguments in the tuple format like (arg1, arg2, arg3), "
        "and the arguments are ordered."
    )

    def parse_inputs(self, inputs: object, name: str = "run") -> dict[str, object]:
        """Parse a tuple / tuple literal into keyword arguments, in parameter order."""
        params = self.parameters(name)
        if isinstance(inputs, Mapping):
            return self.check_arguments(dict(inputs), name)
        values = self._values(inputs)
        required = self._api2required[name]
        if len(values) < len(required):
            raise ParseError(
                f"{self._api_label(name)} takes {len(required)} required positional arguments "
                f"({', '.join(required)}) but {len(values)} were given",
                raw=inputs,
            )
        if len(values) > len(params):
            raise ParseError(
                f"{self._api_label(name)} takes at most {len(params)} positional arguments "
                f"but {len(values)} were given",
                raw=inputs,
            )
        return {params[i]["name"]: value for i, value in enumerate(values)}

    @staticmethod
    def _values(inputs: object) -> Sequence[object]:
        if inputs is None:
            return ()
        if isinstance(inputs, (tuple, list)):
            return tuple(inputs)
        if not isinstance(inputs, str):
            return (inputs,)
        text = inputs.strip()
        if not text:
            return ()
        if len(text) > _MAX_LITERAL:
            raise ParseError("tuple arguments too long to parse", raw=inputs)
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
            raise ParseError(
                f"invalid tuple format ({type(exc).__name__}); pass a Python tuple such as ('text', 1)",
                raw=inputs,
            ) from None
        return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "null" if value is None else type(value).__name__


def _short_repr(value: object, limit: int = 80) -> str:
    try:
        text = repr(value)
    except Exception:
        text = object.__repr__(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
