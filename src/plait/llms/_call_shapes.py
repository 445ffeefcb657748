"""From what a model wrote inside tool-call markup to checked calls (private to `text_tool_calls`).

A call needs a name that was offered and arguments that are (or repair to) a JSON object.
Whatever falls short becomes a one-line problem, written to be shown to the model as an
observation; nothing unoffered ever becomes a call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from ..exceptions import ParseError, UserError
from ..untrusted import clean
from ..utils._lenient_json import LenientJSONError, decode_lenient
from ..utils.names import did_you_mean

__all__ = ["CallBuilder", "Found", "FoundCall", "Offered", "call_shaped"]

Offered = Collection[str] | Mapping[str, Mapping[str, object] | None]
"""The tools a request offered: names, or names mapped to their parameters' JSON schema (or whole OpenAI tool specs)."""

_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "type", "id"})
_FUNCTION = re.compile(r"<function=([^>\n]*)>(.*?)(?:</function>|(?=<function=)|\Z)", re.DOTALL)
_PARAMETER = re.compile(
    r"<parameter=([^>\n]*)>(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|\Z)",
    re.DOTALL,
)
_INTEGER = re.compile(r"[+-]?\d+")
_JSON_TYPES: dict[str, type | tuple[type, ...]] = {"number": (int, float), "object": dict, "array": list}


@dataclass(frozen=True)
class FoundCall:
    """A tool call found in a reply's text.

    Attributes:
        name: The tool's name; always one of the offered names.
        arguments: The arguments as JSON object text (``'{"city": "Paris"}'``).
        format: The markup it was written in (one of `FORMATS`).
        repair: What was repaired to read the arguments (``'trailing comma'``,
            ``'closed 1 bracket'``, ``'Python literal'``...); ``''`` when nothing was.
    """

    name: str
    arguments: str
    format: str
    repair: str = ""


Found = tuple[list[FoundCall], list[str]]
"""Calls and problems from one piece of markup."""


def _show(name: object) -> str:
    text = name if isinstance(name, str) else json.dumps(name, default=repr)[:80]
    return repr(text[:60] + "..." if len(text) > 60 else text)


def _typed(value: str, schema: object) -> object:
    """A Qwen3-Coder ``<parameter>`` value as its declared JSON type; the text when it is not one."""
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind in (None, "string"):
        return value
    text = value.strip()
    if text == "null":
        return None
    if kind == "integer" and _INTEGER.fullmatch(text) and len(text) < 4300:
        return int(text)
    if kind == "boolean" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if kind in ("number", "object", "array"):
        try:
            decoded, _ = decode_lenient(text)
        except LenientJSONError:
            return value
        wanted = _JSON_TYPES[kind]
        if isinstance(decoded, wanted) and not isinstance(decoded, bool):
            return decoded
    return value


class CallBuilder:
    """Checks calls against the offered tools and turns call-shaped values into `FoundCall`s."""

    def __init__(self, offered: Offered) -> None:
        if isinstance(offered, str):
            raise UserError(f"offered must be a collection of tool names, not the string {offered!r}: [{offered!r}]")
        names = list(offered)
        bad = [name for name in names if not isinstance(name, str)]
        if bad:
            raise UserError(f"offered tools must be given by name (str), got {type(bad[0]).__name__}")
        self.names = frozenset(names)
        self.schemas: Mapping[str, object] = offered if isinstance(offered, Mapping) else {}

    def _hint(self, name: object) -> str:
        if not self.names:
            return "no tools are offered"
        close = did_you_mean(name, sorted(self.names), n=3) if isinstance(name, str) else ""
        if close:
            return close
        if len(self.names) <= 8:
            return f"offered: {', '.join(sorted(self.names))}"
        return f"{len(self.names)} tools are offered"

    def call(self, label: str, name: object, arguments: object, fmt: str, repair: str = "") -> Found:
        """One call: `name` must be offered; `arguments` a JSON object, JSON object text or None (no arguments)."""
        if not isinstance(name, str) or not name.strip():
            return [], [f"{label}: a call needs the tool's name as a string; it was not run."]
        name = name.strip()
        if name not in self.names:
            return [], [f"{label}: {_show(name)} is not an offered tool ({self._hint(name)}); it was not run."]
        if isinstance(arguments, str):
            if not arguments.strip():
                arguments = None
            else:
                try:
                    arguments, fixed = decode_lenient(arguments)
                except LenientJSONError as exc:
                    return [], [self._bad_arguments(label, name, f"not JSON ({exc})")]
                repair = ", ".join(filter(None, [repair, fixed]))
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return [], [self._bad_arguments(label, name, f"a JSON {_json_kind(arguments)}, not an object")]
        try:
            text = _ENCODE(clean(arguments))  # no lone surrogate from a JSON escape; too deep is refused
        except ParseError:
            return [], [self._bad_arguments(label, name, "nested too deeply")]
        except (TypeError, ValueError, RecursionError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return [], [self._bad_arguments(label, name, f"not JSON ({reason})")]
        return [FoundCall(name, text, fmt, repair)], []

    @staticmethod
    def _bad_arguments(label: str, name: str, why: str) -> str:
        return f"{label}: the arguments of {_show(name)} are {why}; give one JSON object. The call was not run."

    def from_value(self, label: str, value: object, fmt: str, repair: str = "") -> Found:
        """Calls from a decoded JSON value: a call object or a list of them."""
        items = value if isinstance(value, list) else [value]
        if not items:
            return [], [f"{label}: an empty list of calls; nothing was run."]
        calls: list[FoundCall] = []
        problems: list[str] = []
        for item in items:
            item = _unwrap(item)
            if not isinstance(item, dict):
                problems.append(f"{label}: a call must be a JSON object with a name, not a {_json_kind(item)}.")
                continue
            arguments = item["arguments"] if "arguments" in item else item.get("parameters")
            found, wrong = self.call(label, item.get("name"), arguments, fmt, repair)
            calls += found
            problems += wrong
        return calls, problems

    def from_text(self, label: str, raw: str, fmt: str) -> Found:
        """Calls from JSON text (one value, or several in a row as some models write them)."""
        values: list[object] = []
        repair = ""
        try:
            values = [json.loads(raw)]
        except (ValueError, RecursionError):
            values = _several(raw)
            if not values:
                try:
                    value, repair = decode_lenient(raw)
                except LenientJSONError as exc:
                    return [], [f"{label}: the call is not JSON ({exc}); nothing was run."]
                values = [value]
        calls: list[FoundCall] = []
        problems: list[str] = []
        for value in values:
            found, wrong = self.from_value(label, value, fmt, repair)
            calls += found
            problems += wrong
        return calls, problems

    def from_xml(self, label: str, body: str, fmt: str) -> Found:
        """Calls from Qwen3-Coder's ``<function=NAME><parameter=P>value</parameter></function>``."""
        calls: list[FoundCall] = []
        problems: list[str] = []
        for name, inner in _FUNCTION.findall(body):
            name = name.strip()
            schema = _parameters(self.schemas.get(name))
            properties = schema.get("properties") if isinstance(schema, Mapping) else None
            arguments: dict[str, object] = {}
            for parameter, value in _PARAMETER.findall(inner):
                value = value[1:] if value.startswith("\n") else value
                value = value[:-1] if value.endswith("\n") else value
                spec = properties.get(parameter.strip()) if isinstance(properties, Mapping) else None
                arguments[parameter.strip()] = _typed(value, spec)
            found, wrong = self.call(label, name, arguments, fmt)
            calls += found
            problems += wrong
        if not calls and not problems:
            problems.append(f"{label}: no <function=NAME> in the call; nothing was run.")
        return calls, problems


def call_shaped(value: object) -> bool:
    """Whether a JSON value found loose in prose (a whole reply, a fenced block) is meant as calls.

    An object whose keys are ``name`` (a string) and ``arguments`` or ``parameters``, and at
    most ``type`` and ``id`` besides (also nested as ``{"type": "function", "function": {...}}``),
    or a non-empty list of such objects.
    """
    items = value if isinstance(value, list) and value else [value]
    for item in items:
        item = _unwrap(item)
        if not (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and ("arguments" in item or "parameters" in item)
            and item.keys() <= _CALL_KEYS
        ):
            return False
    return True


def _parameters(spec: object) -> object:
    """The parameters' schema, also from a whole OpenAI tool spec (``{"type": "function", "function": {...}}``)."""
    if isinstance(spec, Mapping) and isinstance(spec.get("function"), Mapping):
        spec = spec["function"]
    if isinstance(spec, Mapping) and isinstance(spec.get("parameters"), Mapping):
        spec = spec["parameters"]
    return spec


def _unwrap(item: object) -> object:
    """The inner function of an OpenAI-shaped ``{"type": "function", "function": {...}}`` item."""
    if isinstance(item, dict) and isinstance(item.get("function"), dict) and item.keys() <= {"type", "function", "id"}:
        return item["function"]
    return item


def _several(raw: str) -> list[object]:
    """JSON values in a row, separated by whitespace or ``;``; empty unless all of `raw` reads."""
    decoder = json.JSONDecoder()
    values: list[object] = []
    index, size = 0, len(raw)
    while True:
        while index < size and (raw[index].isspace() or raw[index] == ";"):
            index += 1
        if index >= size:
            return values
        try:
            value, index = decoder.raw_decode(raw, index)
        except (ValueError, RecursionError):
            return []
        values.append(value)


def _json_kind(value: object) -> str:
    kinds = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return kinds.get(type(value), "number" if isinstance(value, (int, float)) else type(value).__name__)
