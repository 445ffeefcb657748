"""The ReWOO plan format: parse a planner's reply into steps, and substitute evidence.

A plan alternates a ``Plan:`` line (what the step is for) with exactly one evidence line
``#E<n> = Tool[input]``; an input may use earlier evidence by its variable (``#E1``)::

    Plan: Find the capital of France.
    #E1 = Search[capital of France]
    Plan: Get its weather.
    #E2 = Weather[#E1]

Parsing is tolerant of layout (blank lines, indentation, spaces around ``=`` and the
brackets, ``**Plan:**``, list bullets, an input spanning several lines, an evidence line
on the plan's own line) and strict about structure; every violation raises `ParseError`
with a message written for the model:

* each plan has exactly one ``#E`` line, and each ``#E`` line belongs to a plan;
* the input is in square brackets: ``Tool[input]``;
* variables are unique and an input only uses variables defined before it;
* the tool exists (when the caller gives the valid names).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..exceptions import ParseError

__all__ = ["PlanStep", "parse_plan", "substitute"]

_BULLET = r"(?:[-*+]\s+|\d+[.)]\s+)?"
_PLAN = re.compile(rf"^{_BULLET}[*_]*Plan(?:\s*\d+)?[*_]*\s*:[*_]*\s*(.*)$", re.IGNORECASE)
_EVIDENCE = re.compile(rf"^{_BULLET}[*_]*#E(\d+)[*_]*\s*=\s*(.*)$", re.DOTALL)
_ASSIGNMENT = re.compile(r"#E(\d+)\s*=(?!=)")
_CALL = re.compile(r"^([A-Za-z_][\w.\-]*)\s*\[(.*)\]$", re.DOTALL)
_REFERENCE = re.compile(r"#E(\d+)(?!\d)")
_FORMAT = "Write each step as a 'Plan: ...' line followed by exactly one '#E<n> = Tool[input]' line."


@dataclass(frozen=True)
class PlanStep:
    """One step of a plan.

    Attributes:
        plan: What the step is for (the ``Plan:`` text).
        evidence: The step's variable, e.g. ``'#E1'``.
        tool: The tool to call.
        tool_input: The input as written (may use earlier variables).
        depends: The variables the input uses.
    """

    plan: str
    evidence: str
    tool: str
    tool_input: str
    depends: tuple[str, ...]


@dataclass
class _Draft:
    plan: list[str]
    evidence: tuple[str, str] | None = None  # (number, right-hand side)


def _lines(text: str) -> list[str]:
    """Stripped non-blank lines; a ``#E`` line whose bracket is still open absorbs the next lines."""
    result: list[str] = []
    open_input = False
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        if open_input:
            result[-1] += "\n" + line
            open_input = not line.endswith("]")
            continue
        if not line:
            continue
        result.append(line)
        evidence = _EVIDENCE.match(line)
        if evidence is not None:
            rhs = evidence.group(2)
            open_input = "[" in rhs and not rhs.rstrip().endswith("]")
    return result


def _drafts(text: str) -> list[_Draft]:
    drafts: list[_Draft] = []
    for line in _lines(text):
        plan = _PLAN.match(line)
        if plan is not None:
            if drafts and drafts[-1].evidence is None:
                raise ParseError(f"Plan {len(drafts)} has no '#E<n> = Tool[input]' line. {_FORMAT}", raw=text)
            rest = plan.group(1)
            inline = _ASSIGNMENT.search(rest)
            drafts.append(_Draft([rest[: inline.start()].strip() if inline else rest.strip()]))
            if inline is None:
                continue
            line = rest[inline.start() :]
        evidence = _EVIDENCE.match(line)
        if evidence is None:
            if drafts and drafts[-1].evidence is None:
                drafts[-1].plan.append(line)  # the plan's text goes on
            continue  # text around the plan is ignored
        number, rhs = evidence.group(1), evidence.group(2).strip()
        if not drafts:
            raise ParseError(f"#E{number} comes before any 'Plan:' line. {_FORMAT}", raw=text)
        current = drafts[-1]
        if current.evidence is not None or _ASSIGNMENT.search(rhs):
            first = f"#E{current.evidence[0]}" if current.evidence else f"#E{number}"
            raise ParseError(
                f"Plan {len(drafts)} has more than one #E line ({first} and another). Each plan must have "
                f"exactly one #E line: split the work into separate plans. {_FORMAT}",
                raw=text,
            )
        current.evidence = (number, rhs)
    if drafts and drafts[-1].evidence is None:
        raise ParseError(f"Plan {len(drafts)} has no '#E<n> = Tool[input]' line. {_FORMAT}", raw=text)
    return drafts


def parse_plan(
    text: str,
    is_tool: Callable[[str], bool] | None = None,
    tool_names: Sequence[str] = (),
) -> list[PlanStep]:
    """Parse a planner's reply into steps.

    Args:
        text: The planner's reply.
        is_tool: Tells whether a tool name is valid; unknown tools are an error when given.
        tool_names: The valid names, quoted in that error.

    Raises:
        ParseError: The reply breaks the plan format (the message says how).
    """
    if not isinstance(text, str):
        raise ParseError(f"expected the plan as text, got {type(text).__name__}", raw=text)
    steps: list[PlanStep] = []
    defined: set[str] = set()
    for draft in _drafts(text):
        if draft.evidence is None:  # _drafts never returns one; keeps the type checker informed
            continue
        number, rhs = draft.evidence
        variable = f"#E{number}"
        call = _CALL.match(rhs)
        if call is None:
            raise ParseError(
                f"{variable} = {rhs!r} is not a tool call: write it as Tool[input], with the input in square "
                f"brackets, e.g. {variable} = Search[capital of France].",
                raw=text,
            )
        tool, tool_input = call.group(1), call.group(2).strip()
        if variable in defined:
            raise ParseError(f"{variable} is defined twice; give every step its own number.", raw=text)
        depends = tuple(dict.fromkeys(f"#E{n}" for n in _REFERENCE.findall(tool_input)))
        undefined = [d for d in depends if d not in defined]
        if undefined:
            raise ParseError(
                f"The input of {variable} uses {', '.join(undefined)}, which is not defined by an earlier step.",
                raw=text,
            )
        if is_tool is not None and not is_tool(tool):
            valid = ", ".join(tool_names) or "none"
            raise ParseError(f"{variable} uses the unknown tool {tool!r}. Valid tools: {valid}.", raw=text)
        defined.add(variable)
        steps.append(PlanStep(" ".join(p for p in draft.plan if p), variable, tool, tool_input, depends))
    if not steps:
        raise ParseError(f"The reply holds no plan. {_FORMAT}", raw=text)
    return steps


def substitute(tool_input: str, evidence: Mapping[str, str]) -> Any:
    """Replace ``#E<n>`` variables in an input with their evidence.

    A JSON-object input is decoded first and variables are replaced inside its string
    values (so quotes in the evidence cannot break the JSON); other inputs are text.
    """

    def replace_in(text: str) -> str:
        return _REFERENCE.sub(lambda m: evidence.get(f"#E{m.group(1)}", m.group(0)), text)

    stripped = tool_input.strip()
    if stripped.startswith("{"):
        try:
            decoded = json.loads(stripped)
        except (ValueError, RecursionError):
            decoded = None
        if isinstance(decoded, dict):
            return _walk(decoded, replace_in)
    return replace_in(tool_input)


def _walk(value: Any, replace_in: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return replace_in(value)
    if isinstance(value, list):
        return [_walk(v, replace_in) for v in value]
    if isinstance(value, dict):
        return {k: _walk(v, replace_in) for k, v in value.items()}
    return value
