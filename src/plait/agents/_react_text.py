"""`ReActTextParser`: the classic ReAct text protocol as an output format.

The model writes::

    Thought: I need the weather first.
    Action: weather
    Action Input: {"city": "Paris"}

or, when it is done::

    Thought: I know the answer.
    Final Answer: It is sunny in Paris.

`parse_response` returns the same dicts as the JSON variant of `ReAct`, so the agent loop
does not care which protocol is in use:
``{'thought_process': ..., 'action': {'name': ..., 'parameters': <raw input text>}}`` or
``{'thought_process': ..., 'conclusion': ...}``.

Reading is lenient: markers may be bold (``**Action:**``), any case, indented; an
``Observation:`` the model invented (and everything after it) is ignored; the action name
may be quoted or back-ticked. A reply with neither an action nor a final answer raises
`ParseError` with a message written for the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..exceptions import ParseError, UserError
from ..prompts.parsers.str_parser import StrParser

__all__ = ["ReActTextParser"]


def _marker(label: str) -> re.Pattern[str]:
    return re.compile(rf"^[ \t>*_-]*{label}[ \t*_]*:[ \t*_]*", re.IGNORECASE | re.MULTILINE)


_THOUGHT = _marker("Thought")
_ACTION = _marker("Action")
_INPUT = _marker(r"Action[ \t]+Input")
_FINAL = _marker(r"Final[ \t]+Answer")
_OBSERVATION = _marker("Observation")
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\n?(.*?)\n?```$", re.DOTALL)


class ReActTextParser(StrParser):
    r"""Output format for ``Thought / Action / Action Input / Final Answer`` replies.

    Args:
        template: Optional instruction text (the ReAct prompt itself usually explains the
            protocol, so the default is empty).
        **format_field: Placeholder values for `template`.

    Example:
        ```python
        parser = ReActTextParser()
        parser.parse_response('Thought: easy\nFinal Answer: 4')
        # {'thought_process': 'easy', 'conclusion': '4'}
        ```
    """

    def parse_response(self, data: str) -> dict[str, object]:
        """Read a thought and either an action (name + raw input) or a final answer.

        Raises:
            ParseError: Neither ``Action:`` nor ``Final Answer:`` is present, or the action
                has no name.
        """
        if not isinstance(data, str):
            raise ParseError(f"expected the reply as text, got {type(data).__name__}", raw=data)
        text = data
        invented = _OBSERVATION.search(text)
        if invented is not None:
            text = text[: invented.start()]
        action = _ACTION.search(text)
        final = _FINAL.search(text)
        if action is None and final is None:
            raise ParseError(
                "The reply has neither an 'Action:' line nor a 'Final Answer:' line. To use a tool write "
                "'Thought: ...', 'Action: <tool name>' and 'Action Input: <arguments>' on separate lines; "
                "to finish write 'Thought: ...' and 'Final Answer: <answer>'.",
                raw=data,
            )
        first = min((m for m in (action, final) if m is not None), key=lambda m: m.start())
        thought = _thought(text[: first.start()])
        if first is final:
            return {"thought_process": thought, "conclusion": text[first.end() :].strip()}
        return {"thought_process": thought, **_action(text, first)}

    def format_response(self, parsed: Any) -> str:
        """Write a parsed reply back in the protocol (the inverse of `parse_response`)."""
        if isinstance(parsed, str):
            return parsed
        if not isinstance(parsed, Mapping):
            raise UserError(f"ReActTextParser.format_response expects a dict, not {type(parsed).__name__}")
        lines = [f"Thought: {parsed['thought_process']}"] if parsed.get("thought_process") else []
        if "conclusion" in parsed:
            lines.append(f"Final Answer: {parsed['conclusion']}")
        else:
            action = parsed.get("action") or {}
            parameters = action.get("parameters", "")
            if not isinstance(parameters, str):
                parameters = json.dumps(parameters, ensure_ascii=False, default=str)
            lines += [f"Action: {action.get('name', '')}", f"Action Input: {parameters}"]
        return "\n".join(lines)


def _thought(prefix: str) -> str:
    match = _THOUGHT.search(prefix)
    return (prefix[match.end() :] if match else prefix).strip()


def _action(text: str, action: re.Match[str]) -> dict[str, object]:
    line_end = text.find("\n", action.end())
    line_end = len(text) if line_end < 0 else line_end
    name = action.string[action.end() : line_end].strip().strip("`'\"").rstrip(".").strip()
    rest = text[line_end:]
    given = _INPUT.search(rest)
    if given is not None:
        raw = rest[given.end() :]
        stop = min((m.start() for m in (_FINAL.search(raw), _THOUGHT.search(raw)) if m is not None), default=len(raw))
        raw = raw[:stop].strip()
    elif "[" in name and name.endswith("]"):  # Action: tool[input]
        name, _, raw = name[:-1].partition("[")
        name = name.strip()
    else:
        raw = ""
    fenced = _FENCE.match(raw)
    if fenced is not None:
        raw = fenced.group(1).strip()
    if not name:
        raise ParseError(
            "The 'Action:' line names no tool. Write 'Action: <tool name>' and then 'Action Input: <arguments>'.",
            raw=text,
        )
    return {"action": {"name": name, "parameters": raw}}
