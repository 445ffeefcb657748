r"""Values that arrive from outside plait: cleaned where they enter, so nothing downstream breaks on them.

A model reply, a tool result or an HTTP body can hold what no well-behaved sender
writes, and a JSON escape is enough to send it: a lone surrogate (``"\ud800"``) that no
UTF-8 encoder accepts, an integer of thousands of digits, arrays nested a hundred
thousand deep. Stored as they are, they fail much later and far away — every following
request of the session, `save_state`, the session store. plait cleans them at the
boundary instead, once:

* `clean_text` / `clean` replace lone surrogates with U+FFFD (the Unicode replacement
  character), in strings and in the keys and values of nested containers;
* `loads` is `json.loads` for untrusted text: anything that does not decode — invalid
  JSON, a number Python refuses to convert, nesting too deep — is a `ParseError` (errors
  are data: callers turn it into an observation or a 4xx), and the decoded strings are
  clean.

Example:
    ```python
    from plait.untrusted import clean_text, loads

    clean_text('ok \ud800')             # 'ok \ufffd'
    loads(r'{"a": "\ud800"}')           # {'a': '\ufffd'}
    loads('[' * 100_000)                # ParseError: invalid JSON (too deep)
    ```
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TypeVar, cast

import orjson

from .exceptions import ParseError

__all__ = ["MAX_DEPTH", "as_text", "clean", "clean_text", "decode_arguments", "loads"]

T = TypeVar("T")

_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str every surrogate is a lone one: pairs decode to one character
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # how JSON text writes one

MAX_DEPTH = 256
"""The deepest nesting `loads` accepts (tool arguments and API bodies need a handful)."""


def clean_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (the same object when there is none)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)


def as_text(value: object) -> str:
    """Clean text for a field that must be a string, whatever was sent: None is ``""``, data is JSON.

    Never raises: a number Python will not print (more than 4,300 digits) or a value JSON
    cannot hold becomes a short placeholder naming its type.
    """
    if isinstance(value, str):
        return clean_text(value)
    if value is None:
        return ""
    try:
        if isinstance(value, (bool, int, float)):
            return str(value)
        return clean_text(json.dumps(value, ensure_ascii=False, default=str))
    except (ValueError, TypeError, RecursionError):
        return f"<unreadable {type(value).__name__}>"


def clean(value: T) -> T:
    """`value` with `clean_text` applied to every string in it, dict keys included.

    Dicts, lists and tuples are rebuilt only where something changed; other objects are
    returned as they are.

    Raises:
        ParseError: Containers nested deeper than `MAX_DEPTH`.
    """
    if isinstance(value, str):
        return cast(T, clean_text(value))
    if isinstance(value, (dict, list, tuple)):
        try:
            dirty = _inspect(value)
        except RecursionError:  # deep enough to exhaust the caller's stack first
            raise ParseError(f"a value nested deeper than {MAX_DEPTH} levels", raw=None) from None
        if dirty:
            return cast(T, _rebuild(value))
    return value


def _inspect(value: object, depth: int = 0) -> bool:
    """Whether `value` holds a string that needs cleaning; raises `ParseError` past `MAX_DEPTH`.

    Walks everything (a value too deep is refused even when a string was found dirty).
    """
    if isinstance(value, str):
        return clean_text(value) is not value
    if not isinstance(value, (dict, list, tuple)):
        return False
    if depth >= MAX_DEPTH:
        raise ParseError(f"a value nested deeper than {MAX_DEPTH} levels", raw=None)
    dirty = False
    items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
    for item in items:
        dirty = _inspect(item, depth + 1) | dirty
    return dirty


def _rebuild(value: object) -> object:
    """`value` with its strings cleaned (depth already checked by `_inspect`)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {_rebuild(key): _rebuild(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rebuild(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_rebuild(item) for item in value)
    return value


def loads(text: str | bytes) -> object:
    """Decode untrusted JSON; strings in the result are clean.

    Well-formed UTF-8 JSON without long digit runs is read by orjson (4-5x the standard
    decoder on model replies): such text holds no lone surrogate (orjson refuses them) and
    no integer orjson would read as a float (it reads those beyond 64 bits so). Everything
    else, and whatever orjson refuses (NaN, 1e400, deep nesting, invalid UTF-8), goes
    through `json.loads`, which reads it as before or says what is wrong.

    Raises:
        ParseError: The text is not JSON, is nested deeper than `MAX_DEPTH`, or holds a
            number Python will not convert (more than 4,300 digits).
    """
    raw = bytes(text) if isinstance(text, (bytes, bytearray)) else _utf8(text)
    if raw is not None and not _long_digit_run(raw):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if str(exc).startswith("depth limit"):  # deeper than MAX_DEPTH: refused without recursing in Python
                raise ParseError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels", raw=None) from None
            # otherwise the standard decoder reads it or says why not
        else:
            if raw.count(b"[") + raw.count(b"{") < MAX_DEPTH:
                return value
            return clean(value)  # refuses what is nested too deep
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and the int digit limit are ValueErrors
        raise ParseError(f"invalid JSON: {str(exc)[:200]}", raw=text[:200]) from None
    brackets = text.count("[") + text.count("{")
    if brackets < MAX_DEPTH and _ESCAPED_SURROGATE.search(text) is None and clean_text(text) is text:
        return value  # the common case, decided on the text: nothing deep, no surrogate to clean
    return clean(value)


def _utf8(text: str) -> bytes | None:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the standard path cleans it
        return None


_NON_DIGITS_TO_SPACE = bytes(byte if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))


def _long_digit_run(raw: bytes) -> bool:
    """Whether `raw` has 19 digits in a row somewhere (in a number or a string: either way, asked safely)."""
    return max(map(len, raw.translate(_NON_DIGITS_TO_SPACE).split()), default=0) >= 19


def decode_arguments(raw: object) -> dict[str, object] | str:
    """A tool call's arguments as a model sent them: a dict when they are a JSON object, else clean text.

    Text that is not a JSON object (a scalar, invalid or hostile JSON) goes on as text for
    the tool's argument parser to report; nothing here raises. None and blank text are
    no arguments.
    """
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        try:
            return clean({str(key): value for key, value in raw.items()})
        except ParseError:
            return "<arguments nested too deep>"
    if isinstance(raw, str):
        text = clean_text(raw)
    else:
        try:
            text = clean_text(json.dumps(raw, ensure_ascii=False, default=str))
        except (ValueError, TypeError, RecursionError):
            return f"<unreadable arguments of type {type(raw).__name__}>"
    if not text.strip():
        return {}
    try:
        value = loads(text)
    except ParseError:
        return text
    return value if isinstance(value, dict) else text
