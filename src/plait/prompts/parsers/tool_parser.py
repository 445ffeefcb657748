"""Tool-call output formats: a tool call is the text between a `begin` and an `end` marker.

`ToolParser.parse_response` never raises: a reply either has no call (`NO_TOOL`), a call
(`VALID_TOOL`), or a call whose `validate` step failed (`PARSING_ERROR`, with the raw
action kept and an ``'error'`` hint the model can read). `MixedToolParser` combines
several tool parsers and picks the call that starts first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from enum import IntEnum

from ...exceptions import ParseError, UserError
from ...utils._json import text_json
from ...utils.config import create_object, load_class_from_string
from .str_parser import StrParser

__all__ = [
    "InterpreterParser",
    "MixedToolParser",
    "PluginParser",
    "ToolParser",
    "ToolStatusCode",
    "default_plugin_validate",
]

Validator = Callable[[str], object]


class ToolStatusCode(IntEnum):
    """Whether a reply holds a tool call (the ``'status'`` of a parsed tool reply)."""

    NO_TOOL = 0
    VALID_TOOL = 1
    PARSING_ERROR = -1


def _no_tool(text: str) -> dict[str, object]:
    return {"tool_type": None, "thought": text, "action": None, "status": ToolStatusCode.NO_TOOL}


def _resolve_validate(validate: Validator | str | None) -> Validator | None:
    if isinstance(validate, str):
        validate = load_class_from_string(validate)
    if validate is not None and not callable(validate):
        raise UserError(f"validate must be a callable or a dotted path to one, not {type(validate).__name__}")
    return validate


def _partial_marker_len(text: str, marker: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `marker`."""
    for size in range(min(len(text), len(marker) - 1), 0, -1):
        if text.endswith(marker[:size]):
            return size
    return 0


class ToolParser(StrParser):
    r"""Output format for replies that may call one tool between two markers.

    A reply ``thought + begin + action + end`` parses to
    ``{'tool_type', 'thought', 'action', 'status'}``. `end` may be missing (a stop word
    often cuts it off); a partial `end` at the very end of the reply is dropped.

    Args:
        tool_type: The kind of tool this format calls, stored in the parsed reply.
        template: The instruction, with ``{field}`` placeholders; ``{begin}`` and ``{end}``
            are available.
        begin: The marker that opens a call.
        end: The marker that closes a call.
        validate: Turns the action text into its final form (e.g. ``json.loads``): a
            callable or a dotted path to one. If it raises, the status is
            `ToolStatusCode.PARSING_ERROR`, the raw action is kept and ``'error'`` says why.
        **format_field: Other placeholder values for `template`.

    Example:
        ```python
        parser = ToolParser('code interpreter', begin='```python\n', end='\n```\n')
        parser.parse_response('Let me compute.\n```python\nprint(6 * 7)')
        # {'tool_type': 'code interpreter', 'thought': 'Let me compute.\n',
        #  'action': 'print(6 * 7)', 'status': ToolStatusCode.VALID_TOOL}
        ```
    """

    def __init__(
        self,
        tool_type: str,
        template: str = "",
        begin: str = "<tool>\n",
        end: str = "</tool>\n",
        validate: Validator | str | None = None,
        **format_field: object,
    ) -> None:
        if not isinstance(begin, str) or not begin:
            raise UserError(f"{type(self).__name__}: begin must be a non-empty string, got {begin!r}")
        if not isinstance(end, str):
            raise UserError(f"{type(self).__name__}: end must be a string, got {end!r}")
        super().__init__(template, begin=begin, end=end, **format_field)
        self.tool_type = tool_type
        self.begin = begin
        self.end = end
        self.validate = _resolve_validate(validate)

    def format_instruction(self) -> str:
        """The template with every field rendered by `format_to_string` (``''`` for no template)."""
        return self._instruction_text()

    def parse_response(self, data: str) -> dict[str, object]:
        """Split a reply into thought and tool call; never raises."""
        start = data.find(self.begin)
        if start < 0:
            return _no_tool(data)
        thought = data[:start]
        action = data[start + len(self.begin) :]
        stop = action.find(self.end) if self.end else -1
        again = action.find(self.begin)  # a second call starts before this one was closed
        if again >= 0 and (stop < 0 or again < stop):
            stop = again
        if stop >= 0:
            action = action[:stop]
        elif self.end:
            action = action[: len(action) - _partial_marker_len(action, self.end)]
        result: dict[str, object] = {
            "tool_type": self.tool_type,
            "thought": thought,
            "action": action,
            "status": ToolStatusCode.VALID_TOOL,
        }
        if self.validate is not None:
            try:
                result["action"] = self.validate(action)
            except Exception as exc:
                result["status"] = ToolStatusCode.PARSING_ERROR
                result["error"] = _error_hint(exc)
        return result

    def format_response(self, parsed: object) -> str:
        """Write a parsed reply back as text: ``thought + begin + action + end``.

        Dict and list actions are written as JSON; a reply without a call is its thought.

        Raises:
            UserError: `parsed` is not a parsed reply of this parser's tool type.
        """
        if not isinstance(parsed, (dict, Mapping)):
            raise UserError(f"{type(self).__name__}.format_response expects a dict, not {type(parsed).__name__}")
        thought = parsed.get("thought") or ""
        action = parsed.get("action")
        if action is None or parsed.get("status") == ToolStatusCode.NO_TOOL:
            return str(thought)
        tool_type = parsed.get("tool_type")
        if tool_type is not None and tool_type != self.tool_type:
            raise UserError(f"{type(self).__name__}({self.tool_type!r}) cannot format a {tool_type!r} call")
        text = text_json(action) if isinstance(action, (dict, list)) else str(action)
        return f"{thought}{self.begin}{text}{self.end}"


def _error_hint(exc: Exception) -> str:
    if isinstance(exc, ParseError):
        return exc.err_msg
    detail = str(exc)
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def default_plugin_validate(action: str) -> dict[str, object]:
    """Parse a plugin call: a JSON object with a string ``name`` and a ``parameters`` object.

    Raises:
        ParseError: The text is not such an object (the message says what is expected).
    """
    expected = 'write the call as a JSON object: {"name": "<tool name>", "parameters": {<arguments>}}'
    text = action.strip()
    try:
        call = json.loads(text)
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nesting too deep"
        raise ParseError(f"the plugin call is not valid JSON ({reason}); {expected}", raw=action) from None
    if not isinstance(call, dict):
        raise ParseError(f"the plugin call must be a JSON object; {expected}", raw=action)
    if not isinstance(call.get("name"), str) or not call["name"]:
        raise ParseError(f"the plugin call has no 'name' string; {expected}", raw=action)
    if not isinstance(call.get("parameters"), dict):
        raise ParseError(f"the plugin call has no 'parameters' object; {expected}", raw=action)
    return call


class InterpreterParser(ToolParser):
    r"""`ToolParser` for InternLM-style code calls (``<|action_start|><|interpreter|>``).

    Example:
        ```python
        parser = InterpreterParser()
        parser.parse_response('Compute it.<|action_start|><|interpreter|>\nprint(1 + 1)<|action_end|>\n')
        # {'tool_type': 'interpreter', 'thought': 'Compute it.', 'action': 'print(1 + 1)', 'status': 1}
        ```
    """

    def __init__(
        self,
        tool_type: str = "interpreter",
        template: str = "",
        begin: str = "<|action_start|><|interpreter|>\n",
        end: str = "<|action_end|>\n",
        validate: Validator | str | None = None,
        **format_field: object,
    ) -> None:
        super().__init__(tool_type, template, begin, end, validate, **format_field)


class PluginParser(ToolParser):
    r"""`ToolParser` for InternLM-style plugin calls; the action is parsed as ``{name, parameters}``.

    Example:
        ```python
        parser = PluginParser()
        reply = '<|action_start|><|plugin|>\n{"name": "search", "parameters": {"q": "lagent"}}<|action_end|>\n'
        parser.parse_response(reply)['action']  # {'name': 'search', 'parameters': {'q': 'lagent'}}
        ```
    """

    def __init__(
        self,
        tool_type: str = "plugin",
        template: str = "",
        begin: str = "<|action_start|><|plugin|>\n",
        end: str = "<|action_end|>\n",
        validate: Validator | str | None = default_plugin_validate,
        **format_field: object,
    ) -> None:
        super().__init__(tool_type, template, begin, end, validate, **format_field)


class MixedToolParser(StrParser):
    r"""Several tool formats at once; a reply's call is the one whose `begin` comes first.

    Args:
        tool_type: Name given to this parser's own instruction message, if any.
        template: An instruction shown before the sub-parsers' instructions.
        parsers: `ToolParser` instances or config dicts (``{'type': PluginParser, ...}``);
            tool types must be distinct.
        **format_field: Placeholder values for `template`.

    Example:
        ```python
        parser = MixedToolParser(parsers=[PluginParser(template='Plugins: ...'), InterpreterParser()])
        parser.format_instruction()  # [{'role': 'system', 'content': 'Plugins: ...', 'name': 'plugin'}]
        parser.parse_response('<|action_start|><|interpreter|>\nprint(1)')['tool_type']  # 'interpreter'
        ```
    """

    def __init__(
        self,
        tool_type: str | None = None,
        template: str = "",
        parsers: Iterable[ToolParser | Mapping[str, object]] | None = None,
        **format_field: object,
    ) -> None:
        super().__init__(template, **format_field)
        self.tool_type = tool_type
        self.parsers: dict[str, ToolParser] = {}
        for config in parsers or []:
            parser = create_object(config)
            if not isinstance(parser, ToolParser):
                raise UserError(f"MixedToolParser: parsers must be ToolParsers, got {type(parser).__name__}")
            if parser.tool_type in self.parsers:
                raise UserError(f"MixedToolParser: two parsers have tool_type {parser.tool_type!r}")
            self.parsers[parser.tool_type] = parser

    def format_instruction(self) -> list[dict[str, str]]:
        """System messages: this parser's own instruction, then each sub-parser's (empty ones skipped)."""
        messages: list[dict[str, str]] = []
        own = self._instruction_text()
        if own.strip():
            message = {"role": "system", "content": own}
            if self.tool_type:
                message["name"] = self.tool_type
            messages.append(message)
        for name, parser in self.parsers.items():
            content = parser.format_instruction()
            if content.strip():
                messages.append({"role": "system", "content": content, "name": name})
        return messages

    def parse_response(self, data: str) -> dict[str, object]:
        """Parse with the sub-parser whose `begin` occurs earliest (the longest on a tie); never raises."""
        best: ToolParser | None = None
        best_key = (len(data) + 1, 0)
        for parser in self.parsers.values():
            start = data.find(parser.begin)
            if start >= 0 and (start, -len(parser.begin)) < best_key:
                best, best_key = parser, (start, -len(parser.begin))
        return best.parse_response(data) if best is not None else _no_tool(data)

    def format_response(self, parsed: object) -> str:
        """Write a parsed reply back as text with the sub-parser of its tool type.

        Raises:
            UserError: The reply's tool type has no sub-parser.
        """
        if not isinstance(parsed, (dict, Mapping)):
            raise UserError(f"MixedToolParser.format_response expects a dict, not {type(parsed).__name__}")
        tool_type = parsed.get("tool_type")
        if tool_type is None or parsed.get("action") is None or parsed.get("status") == ToolStatusCode.NO_TOOL:
            return str(parsed.get("thought") or "")
        parser = self.parsers.get(tool_type)
        if parser is None:
            raise UserError(f"MixedToolParser has no parser for tool_type {tool_type!r}; known: {list(self.parsers)}")
        return parser.format_response(parsed)
