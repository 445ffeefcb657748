"""Reading JSON that a model wrote (private): where a value ends, and repairs whose intent is unambiguous.

Models write almost-JSON: a trailing comma, a closing brace cut off by a stop word, single
quotes or Python literals (``True``, ``None``). `decode_lenient` tries strict JSON first and
then each repair in turn, and says which one it applied; anything else is an error whose
message names what was wrong. Python literals are read with `ast.literal_eval`, never `eval`.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize

__all__ = ["LITERAL_LIMIT", "BracketWalk", "LenientJSONError", "decode_lenient", "drop_trailing_commas", "json_end"]

LITERAL_LIMIT = 100_000
"""Longest text tried as a Python literal (the parser's memory grows with it; JSON has no such limit)."""

_TRAILING_COMMA = re.compile(r'"(?:[^"\\]|\\.)*"|,(\s*[}\]])', re.DOTALL)
_STRUCTURE = re.compile(r"[\"'\[\]{}\\]")
_CLOSER = {"{": "}", "[": "]"}
_LAYOUT = frozenset({tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT})
_JSON_NAMES = {"true": True, "false": False, "null": None}


class LenientJSONError(ValueError):
    """The text is not JSON, even after the repairs; the message says why (one line)."""


def drop_trailing_commas(text: str) -> str:
    """Remove commas that directly precede a closing ``}`` or ``]`` (outside strings)."""
    if "," not in text:
        return text
    return _TRAILING_COMMA.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(0), text)


class BracketWalk:
    """Finds where a bracketed value ends, resumably: `advance` on a text that grew goes on from where it stopped.

    Strings in double or single quotes are skipped, so brackets inside them do not count.
    """

    def __init__(self, start: int) -> None:
        self.pos = start
        self.stack: list[str] = []
        self.quote = ""
        self._skip = -1
        self.end: int | None = None

    def advance(self, text: str) -> int | None:
        """Index just after the value in `text` (which extends the texts seen before); None while it is open."""
        if self.end is not None:
            return self.end
        for match in _STRUCTURE.finditer(text, self.pos):
            index = match.start()
            if index < self._skip:
                continue
            char = match.group()
            if self.quote:
                if char == "\\":
                    self._skip = index + 2
                elif char == self.quote:
                    self.quote = ""
                continue
            if char in "\"'":
                self.quote = char
            elif char in "{[":
                self.stack.append(char)
            elif char in "}]":
                if self.stack:
                    self.stack.pop()
                if not self.stack:
                    self.end = match.end()
                    return self.end
        self.pos = max(len(text), self._skip)
        return None


def json_end(text: str, start: int) -> int | None:
    """Index just after the bracketed value that opens at ``text[start]`` (``{`` or ``[``); None if it is not closed.

    Strings in double or single quotes are skipped, so brackets inside them do not count.
    """
    return BracketWalk(start).advance(text)


def _close_brackets(text: str) -> str | None:
    """`text` with its unclosed brackets closed, or None when it ends inside a string or closes nothing."""
    stripped = text.rstrip()
    if not stripped.startswith(("{", "[")):
        return None
    walk = BracketWalk(0)
    if walk.advance(stripped) is not None or walk.quote or not walk.stack or stripped.endswith((",", ":")):
        return None
    return stripped + "".join(_CLOSER[bracket] for bracket in reversed(walk.stack))


class _JSONNames(ast.NodeTransformer):
    """``true``/``false``/``null`` as Python constants, so a mix of JSON and Python literals reads."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in _JSON_NAMES:
            return ast.copy_location(ast.Constant(_JSON_NAMES[node.id]), node)
        return node


def _python_literal(text: str) -> object:
    if len(text) > LITERAL_LIMIT:
        raise ValueError("too long to read as a Python literal")
    text = text.strip()
    value = ast.literal_eval(_JSONNames().visit(ast.parse(text, mode="eval")))
    _refuse_joined_strings(text)  # after the parse: most text that gets here is not a literal at all
    return value


def _refuse_joined_strings(text: str) -> None:
    """Python joins ``"a" "b"`` into ``"ab"``; in a model's JSON it is a missing comma, not a repair."""
    previous = tokenize.ENDMARKER
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in _LAYOUT:
            continue
        if token.type == previous == tokenize.STRING:
            raise ValueError("two strings in a row")
        previous = token.type


def _describe(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "it is nested too deeply"
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno}, column {exc.colno}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def decode_lenient(text: str) -> tuple[object, str]:
    """Decode `text` as JSON, repairing it where the intent is unambiguous.

    Returns:
        ``(value, repair)``: `repair` is ``''`` for valid JSON, otherwise what was repaired
        (``'trailing comma'``, ``'closed 2 brackets'``, ``'Python literal'``, or several joined by
        ``', '``).

    Raises:
        LenientJSONError: The text is not JSON after the repairs; the message is the strict
            parser's first complaint.
    """
    try:
        return json.loads(text), ""
    except (ValueError, RecursionError) as exc:
        first = exc
    candidates: list[tuple[str, str]] = []
    uncomma = drop_trailing_commas(text)
    if uncomma != text:
        candidates.append((uncomma, "trailing comma"))
    closed = _close_brackets(uncomma)
    if closed is not None:
        added = len(closed) - len(uncomma.rstrip())
        note = f"closed {added} bracket{'s' if added > 1 else ''}"
        candidates.append((closed, ", ".join(filter(None, ["trailing comma" if uncomma != text else "", note]))))
    for candidate, note in candidates:
        try:
            return json.loads(candidate), note
        except (ValueError, RecursionError):
            continue
    for candidate, note in [(text, ""), *candidates]:
        try:
            return _python_literal(candidate), ", ".join(filter(None, [note, "Python literal"]))
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError, tokenize.TokenError):
            continue
    raise LenientJSONError(_describe(first)) from None
