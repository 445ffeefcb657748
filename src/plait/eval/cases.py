"""The cases of an evaluation: a JSONL data set, one ``{"id", "input", "expected"}`` object per line.

```
{"id": "fr", "input": "What is the capital of France?", "expected": "Paris"}
{"id": 2, "input": "Capital of Japan?", "expected": ["Tokyo", "東京"], "topic": "geography"}
```

``id`` is a string or an integer, unique in the file (it is what a resumed run matches
finished cases by); ``input`` is the text the agent is asked; ``expected`` is any JSON value
the scorer understands (a string, a list of acceptable strings, a pattern...). Other keys
are kept as the case's `Case.metadata`. Blank lines are skipped. Anything else — a line that
is not JSON, not an object, a missing or duplicate id — is a `UserError` naming the file and
the line, before anything runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Union

from ..exceptions import ParseError, UserError
from ..types import JSONValue
from ..untrusted import loads

__all__ = ["Case", "CaseId", "CasesLike", "case_key", "load_cases", "parse_cases"]

CaseId = Union[str, int]
"""A case's id, as the data set writes it."""


@dataclass(frozen=True)
class Case:
    """One case of a data set.

    Attributes:
        id: Unique in the data set (a string or an integer).
        input: What the agent is asked.
        expected: What the scorer compares the answer with (any JSON value).
        metadata: The line's other keys.
    """

    id: CaseId
    input: str
    expected: JSONValue = None
    metadata: dict[str, JSONValue] = field(default_factory=dict)

    def to_dict(self) -> dict[str, JSONValue]:
        """The case as a data-set line (metadata keys back at the top level)."""
        return {**self.metadata, "id": self.id, "input": self.input, "expected": self.expected}


CasesLike = Union[str, "os.PathLike[str]", Iterable[Union[Case, Mapping[str, JSONValue]]]]
"""Cases: a JSONL file's path, or `Case` objects / dicts shaped like its lines."""


def case_key(case_id: object) -> str:
    """The key a case id is matched by in ``results.jsonl`` (``1`` and ``"1"`` are different cases)."""
    return f"{type(case_id).__name__}:{case_id}"


def _case(data: object, where: str) -> Case:
    """One line's case, checked.

    Raises:
        UserError: Not an object, or a missing / mistyped ``id`` or ``input``.
    """
    if not isinstance(data, Mapping):
        raise UserError(
            f"{where}: a case is a JSON object with 'id', 'input' and 'expected', not {type(data).__name__}"
        )
    case_id = data.get("id")
    if isinstance(case_id, bool) or not isinstance(case_id, (str, int)) or case_id == "":
        raise UserError(f"{where}: 'id' must be a non-empty string or an integer, got {case_id!r}"[:300])
    text = data.get("input")
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"{where}: 'input' must be a non-empty string (case {case_id!r})"[:300])
    metadata = {str(key): value for key, value in data.items() if key not in ("id", "input", "expected")}
    return Case(case_id, text, data.get("expected"), metadata)


def parse_cases(lines: Iterable[str | Mapping[str, JSONValue] | Case], source: str = "cases") -> list[Case]:
    """The cases of JSONL lines (or of already decoded objects), in order.

    Args:
        lines: JSONL text lines, dicts shaped like them, or `Case` objects.
        source: What error messages call the data (a file name).

    Raises:
        UserError: A line that is not a case, or an id seen before (the message names the line).
    """
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        where = f"{source} line {number}"
        if isinstance(line, Case):
            case = line
        elif isinstance(line, str):
            if not line.strip():
                continue
            try:
                case = _case(loads(line), where)
            except ParseError as exc:
                raise UserError(f"{where}: {exc}") from None
        else:
            case = _case(line, where)
        key = case_key(case.id)
        if key in seen:
            raise UserError(f"{where}: id {case.id!r} is already used on line {seen[key]}")
        seen[key] = number
        cases.append(case)
    return cases


def load_cases(cases: CasesLike) -> list[Case]:
    """The cases of a JSONL file (by path), or of given cases / dicts, checked (see `parse_cases`).

    Raises:
        UserError: The file cannot be read, is not UTF-8, or holds a line that is not a case.
    """
    if not isinstance(cases, (str, os.PathLike)):
        return parse_cases(cases)
    path = os.fspath(cases)
    try:
        with open(path, encoding="utf-8") as fh:
            return parse_cases(fh, os.path.basename(path))
    except OSError as exc:
        raise UserError(f"cannot read the data set {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
