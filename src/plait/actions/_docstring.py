"""A small Google-style docstring parser: just what tool descriptions need.

It splits a docstring into its leading text, its ``Args:`` entries and its ``Returns:``
entries. Entries look like ``name (type): description`` (``name: description`` and, in
Returns, ``type: description`` also work); continuation lines indented deeper than the
entry join its description with a newline. RST roles such as ``:class:`str``` are reduced
to their target text first.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["DocEntry", "ParsedDocstring", "parse_docstring", "parse_entries", "strip_rst_roles"]

_ROLE = re.compile(r":(?:[\w.+-]+:)+`~?([^`]+)`")
_ARGS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments", "kwargs", "other parameters"}
_RETURNS = {"returns", "return", "yields", "yield"}
_OTHER = {
    "raises",
    "raise",
    "exceptions",
    "except",
    "example",
    "examples",
    "note",
    "notes",
    "warning",
    "warnings",
    "warns",
    "see also",
    "references",
    "todo",
    "attributes",
    "methods",
    "tip",
    "important",
    "caution",
    "danger",
    "hint",
}
_KNOWN = _ARGS | _RETURNS | _OTHER
# ``name (type): desc`` / ``name: desc``; the name may be ``*args``/``**kwargs``.
_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_][\w.]*)\s*(?:\((.*?)\))?\s*:(?:\s+|$)(.*)$")
_UNNAMED = re.compile(r"^\((.*?)\)\s*:(?:\s+|$)(.*)$")


@dataclass
class DocEntry:
    """One ``name (type): description`` entry of an Args or Returns section."""

    name: str | None
    annotation: str | None
    description: str


@dataclass
class ParsedDocstring:
    """The parts of a docstring that tool descriptions use."""

    description: str = ""
    args: dict[str, DocEntry] = field(default_factory=dict)
    returns: list[DocEntry] = field(default_factory=list)


def strip_rst_roles(text: str) -> str:
    """Replace RST roles (``:class:`str```, ``:py:func:`~m.f```) with their target text."""
    return _ROLE.sub(r"\1", text)


def _sections(doc: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Split a cleaned docstring into its leading text and its ``Header:`` sections."""
    text: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        if _indent(line) == 0 and stripped.endswith(":") and stripped[:-1].strip().lower() in _KNOWN:
            current = []
            sections.append((stripped[:-1].strip().lower(), current))
        elif current is None:
            text.append(line)
        elif not stripped or _indent(line) > 0:
            current.append(line)
        else:  # unindented text after a section: a later text block, not part of the description
            current = []
            sections.append(("", current))
    return text, sections


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse_entries(lines: list[str], *, returns: bool = False, named: bool = True) -> list[DocEntry]:
    """Parse the body lines of an Args/Returns section into entries.

    Args:
        lines: The section's lines (any common indentation).
        returns: Parse a Returns section.
        named: For Returns, whether entries are ``name (type): description`` (``(type):
            description`` for an unnamed one). When False the whole section is one entry
            ``type: description`` whose continuation lines stay in its description.
    """
    body = inspect.cleandoc("\n".join(lines)).splitlines() if any(line.strip() for line in lines) else []
    if returns and not named:
        return _single_return(body)
    entries: list[DocEntry] = []
    for line in body:
        if not line.strip():
            continue
        if _indent(line) == 0:
            entry = _entry(line)
            if entry is not None or not entries:
                entries.append(entry or DocEntry(None, None, line.strip()))
                continue
        last = entries[-1]
        last.description = f"{last.description}\n{line.strip()}" if last.description else line.strip()
    return entries


def _entry(line: str) -> DocEntry | None:
    match = _ENTRY.match(line)
    if match is not None:
        annotation = match.group(2)
        return DocEntry(match.group(1), annotation.strip() if annotation else None, match.group(3).strip())
    match = _UNNAMED.match(line)
    if match is not None:
        return DocEntry(None, match.group(1).strip() or None, match.group(2).strip())
    return None


def _single_return(body: list[str]) -> list[DocEntry]:
    if not body:
        return []
    head, sep, rest = body[0].partition(":")
    annotation: str | None = None
    first = body[0].strip()
    if sep and head.strip() and " " not in head.strip().replace(", ", ","):
        annotation, first = head.strip(), rest.strip()
    tail = inspect.cleandoc("\n".join(body[1:])) if len(body) > 1 else ""
    description = f"{first}\n{tail}" if tail else first
    return [DocEntry(None, annotation, description.strip())]


def parse_docstring(doc: str | None, *, returns_named_value: bool = False) -> ParsedDocstring:
    """Parse a Google-style docstring.

    Args:
        doc: The raw ``__doc__`` (None gives an empty result).
        returns_named_value: Read Returns entries as ``name (type): description``.
    """
    if not doc:
        return ParsedDocstring()
    cleaned = strip_rst_roles(inspect.cleandoc(doc))
    text, sections = _sections(cleaned)
    result = ParsedDocstring(description=inspect.cleandoc("\n".join(text)).strip() if text else "")
    for header, lines in sections:
        if header in _ARGS:
            for entry in parse_entries(lines):
                if entry.name is not None:
                    result.args[entry.name.lstrip("*")] = entry
        elif header in _RETURNS and not result.returns:
            result.returns = parse_entries(lines, returns=True, named=returns_named_value)
    return result
