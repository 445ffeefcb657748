r"""The tool-call markup of each open-model family, read left to right from a growing text (private).

`Scanner.scan` turns text into prose and markup events. Given a prefix of a reply (``final``
false) it stops where the text so far cannot decide what comes next — an unclosed call, a
trailing ``<tool`` — and says which characters could decide it (`Pending`); everything before
that point reads the same whatever follows, which is what lets a stream show it. Given the
whole reply (``final`` true) it decides everything: an unclosed call runs to the end.

The wire forms, as the servers' parsers and the models' chat templates write them:

- ``hermes``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one per block
  (Qwen2.5, Qwen3, Hermes; vLLM ``hermes``).
- ``qwen3_coder``: ``<tool_call><function=NAME><parameter=P>value</parameter></function></tool_call>``,
  also without the outer tags (vLLM ``qwen3_coder``, llama.cpp's Qwen3-Coder XML).
- ``internlm2``: ``<|action_start|><|plugin|>{"name": ..., "parameters": {...}}<|action_end|>``.
- ``llama3``: ``<|python_tag|>{"name": ..., "parameters": {...}}``, several joined by ``;``, and
  the built-in tools' ``<|python_tag|>brave_search.call(query="...")``.
- ``mistral``: ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`` and the newer
  ``[TOOL_CALLS]NAME[ARGS]{...}`` (also with ``[CALL_ID]id``), once per call.
- ``deepseek``: ``<｜tool▁calls▁begin｜>`` + calls + ``<｜tool▁calls▁end｜>``, each call
  ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>``
  (V3, R1) or ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>`` (V3.1).
- ``fenced_json``: a Markdown block (``json``, ``json5``, ``jsonc`` or no label) whose whole body is
  a call object or a list of them.
- ``bare_json``: a whole reply that is a call object, a list of them, or several joined by ``;``.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from ..utils._lenient_json import LITERAL_LIMIT, BracketWalk, LenientJSONError, decode_lenient, json_end
from ._call_shapes import CallBuilder, Found, FoundCall, call_shaped
from ._held_text import partial_marker_start

__all__ = ["FORMATS", "Markup", "Pending", "ScanState", "Scanner"]

FORMATS = ("hermes", "qwen3_coder", "internlm2", "llama3", "mistral", "deepseek", "fenced_json", "bare_json")
"""The text tool-call formats, by name."""

_DS_CALLS_BEGIN = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
_DS_CALLS_END = "<\uff5ctool\u2581calls\u2581end\uff5c>"
_DS_CALL_BEGIN = "<\uff5ctool\u2581call\u2581begin\uff5c>"
_DS_CALL_END = "<\uff5ctool\u2581call\u2581end\uff5c>"
_DS_SEP = "<\uff5ctool\u2581sep\uff5c>"
_FENCE_LABELS = frozenset({"", "json", "json5", "jsonc"})
_ANY = None  # Pending triggers: any new character may decide
_CLOSERS = frozenset("}]")
_NAME = re.compile(r"[^\s<>\[\]{}()\"',;`]{1,128}")
_DS_CALL = re.compile(re.escape(_DS_CALL_BEGIN) + r"(.*?)(?:" + re.escape(_DS_CALL_END) + r"|\Z)", re.DOTALL)
_WORD = re.compile(r"\w*")
_DS_NAME = re.compile(r"\s*([^\s{`]+)\s*(.*)", re.DOTALL)
_FENCED_ARGS = re.compile(r"\A\s*```[A-Za-z0-9]*[ \t]*\n?(.*?)\n?```\s*\Z", re.DOTALL)


@dataclass(frozen=True)
class Markup:
    """A piece of call markup: it ends at `end`; what it held."""

    end: int
    calls: list[FoundCall] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Pending:
    """The text so far cannot decide; rescan once a delta holds one of `triggers` (None: any character)."""

    triggers: frozenset[str] | None


@dataclass(frozen=True)
class _Prose:
    """Not markup after all: the text up to `end` is prose (``in_fence``: a code block opened)."""

    end: int
    in_fence: bool = False


@dataclass(frozen=True)
class ScanState:
    """Where a scan stands between calls: before the first word (a whole-reply JSON may start), in a code block."""

    at_start: bool = True
    in_fence: bool = False


Event = str | Markup
"""Prose (its text) or markup."""
_Result = Markup | Pending | _Prose


@functools.lru_cache(maxsize=64)
def _openers(markers: tuple[str, ...]) -> re.Pattern[str]:
    """The pattern of the markers that open markup (one per set of enabled formats: made once)."""
    return re.compile("|".join(map(re.escape, markers)))


class Scanner:
    """Finds the markup of the enabled `formats` in text; see the module docstring."""

    def __init__(self, builder: CallBuilder, formats: Iterable[str]) -> None:
        self.builder = builder
        enabled = set(formats)
        handlers: dict[str, Callable[[str, int, bool], _Result]] = {}
        if enabled & {"hermes", "qwen3_coder"}:
            handlers["<tool_call>"] = self._tool_call
        if "qwen3_coder" in enabled:
            handlers["<function="] = self._function
        if "internlm2" in enabled:
            handlers["<|action_start|>"] = self._internlm
        if "llama3" in enabled:
            handlers["<|python_tag|>"] = self._python_tag
        if "mistral" in enabled:
            handlers["[TOOL_CALLS]"] = self._mistral
        if "deepseek" in enabled:
            handlers[_DS_CALLS_BEGIN] = self._deepseek
            handlers[_DS_CALL_BEGIN] = self._deepseek
        self._fenced = "fenced_json" in enabled
        if self._fenced:
            handlers["```"] = self._fence
        self._bare = "bare_json" in enabled
        self._handlers = handlers
        self._walks: dict[int, BracketWalk] = {}  # by start: the text only grows between scans
        self._openers = _openers(tuple(handlers)) if handlers else None

    def scan(
        self, text: str, pos: int, state: ScanState, final: bool
    ) -> tuple[list[Event], int, ScanState, Pending | None]:
        """Events for ``text[pos:]``, the position reached, the state there, and why it stopped early (None if not)."""
        events: list[Event] = []
        size = len(text)
        while pos < size:
            if state.at_start:
                whole = self._whole_reply(text, pos, final)
                if isinstance(whole, Pending):
                    return events, pos, state, whole
                state = replace(state, at_start=False)
                if whole is not None:
                    events.append(whole)
                    pos = whole.end
                    continue
            match = self._openers.search(text, pos) if self._openers else None
            if match is None:
                stop = None if final or not self._openers else partial_marker_start(text, pos, self._handlers)
                events.append(text[pos:stop])
                if stop is not None:
                    return events, stop, state, Pending(_ANY)
                return events, size, state, None
            if match.start() > pos:
                events.append(text[pos : match.start()])
            pos = match.start()
            if match.group() == "```" and state.in_fence:
                events.append("```")
                pos, state = match.end(), replace(state, in_fence=False)
                continue
            result = self._handlers[match.group()](text, pos, final)
            if isinstance(result, Pending):
                return events, pos, state, result
            if isinstance(result, Markup):
                events.append(result)
            else:
                events.append(text[pos : result.end])
                state = replace(state, in_fence=result.in_fence)
            pos = result.end
        return events, pos, state, None

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _until(text: str, start: int, closer: str, final: bool) -> tuple[int, int] | Pending:
        """(where the body ends, where the markup ends) for a body closed by `closer`; unclosed: to the end."""
        close = text.find(closer, start)
        if close >= 0:
            return close, close + len(closer)
        if final:
            return len(text), len(text)
        return Pending(frozenset(closer[-1]))

    @staticmethod
    def _token(text: str, index: int, token: str, final: bool) -> int | Pending | None:
        """The index after `token` when the text has it at `index`; Pending when it may still come."""
        if text.startswith(token, index):
            return index + len(token)
        rest = text[index:]
        if not final and token.startswith(rest):
            return Pending(_ANY)
        return None

    @staticmethod
    def _skip_space(text: str, index: int) -> int:
        while index < len(text) and text[index].isspace():
            index += 1
        return index

    def _value_end(self, text: str, start: int, final: bool) -> int | Pending:
        """Where the bracketed value at `start` ends; a stream's growing text is walked once, not per delta."""
        walk = self._walks.get(start)
        if walk is None:
            walk = self._walks[start] = BracketWalk(start)
        end = walk.advance(text)
        if end is not None:
            return end
        return len(text) if final else Pending(_CLOSERS)

    # ------------------------------------------------------------------ formats

    def _whole_reply(self, text: str, pos: int, final: bool) -> Markup | Pending | None:
        """A reply that is only a JSON call (``bare_json``); None when it is not one."""
        if not self._bare:
            return None
        start = self._skip_space(text, pos)
        if start >= len(text):
            return None if final else Pending(_ANY)
        if text[start] == "[":
            second = self._skip_space(text, start + 1)
            if second >= len(text):
                return None if final else Pending(_ANY)
            if text[second] != "{":
                return None
        elif text[start] != "{":
            return None
        if not final:
            return Pending(frozenset())  # only the end of the reply can tell
        body = text[start:].strip()
        try:
            value, repair = decode_lenient(body)
            values = [value]
        except LenientJSONError:
            values, repair = _semicolon_values(body), ""
        if not values or not all(call_shaped(value) for value in values):
            return None
        return self._from_values("a JSON call", values, "bare_json", repair, len(text))

    def _from_values(self, label: str, values: list[object], fmt: str, repair: str, end: int) -> Markup:
        calls: list[FoundCall] = []
        problems: list[str] = []
        for value in values:
            found, wrong = self.builder.from_value(label, value, fmt, repair)
            calls += found
            problems += wrong
        return Markup(end, calls, problems)

    def _tool_call(self, text: str, start: int, final: bool) -> _Result:
        span = self._until(text, start + len("<tool_call>"), "</tool_call>", final)
        if isinstance(span, Pending):
            return span
        calls: list[FoundCall] = []
        problems: list[str] = []
        for part in text[start + len("<tool_call>") : span[0]].split("<tool_call>"):
            part = part.strip()
            if not part:
                continue
            if part.startswith("<function="):
                found: Found = self.builder.from_xml("<tool_call>", part, "qwen3_coder")
            else:
                found = self.builder.from_text("<tool_call>", part, "hermes")
            calls += found[0]
            problems += found[1]
        if not calls and not problems:
            problems.append("<tool_call>: the block is empty; nothing was run.")
        return Markup(span[1], calls, problems)

    def _function(self, text: str, start: int, final: bool) -> _Result:
        head = start + len("<function=")
        name = _NAME.match(text, head)
        if name is None or name.end() >= len(text) or text[name.end()] != ">":
            reached_end = head >= len(text) if name is None else name.end() >= len(text)
            if not final and reached_end and len(text) - head < 128:
                return Pending(_ANY)
            return _Prose(head)
        span = self._until(text, name.end() + 1, "</function>", final)
        if isinstance(span, Pending):
            return span
        end = span[1]
        after = self._token(text, self._skip_space(text, end), "</tool_call>", final)
        if isinstance(after, Pending):
            return after
        found = self.builder.from_xml("<function=...>", text[start : span[0]], "qwen3_coder")
        return Markup(after if after is not None else end, *found)

    def _internlm(self, text: str, start: int, final: bool) -> _Result:
        span = self._until(text, start + len("<|action_start|>"), "<|action_end|>", final)
        if isinstance(span, Pending):
            return span
        label = "<|action_start|>"
        body = text[start + len(label) : span[0]].strip()
        if body.startswith("<|interpreter|>"):
            problem = f"{label}<|interpreter|>: code blocks are not run here; call one of the offered tools instead."
            return Markup(span[1], [], [problem])
        body = body.removeprefix("<|plugin|>")
        brace = body.find("{")
        if brace < 0:
            return Markup(span[1], [], [f"{label}: no JSON call in the block; nothing was run."])
        return Markup(span[1], *self.builder.from_text(label, body[brace:], "internlm2"))

    def _python_tag(self, text: str, start: int, final: bool) -> _Result:
        label = "<|python_tag|>"
        index = self._skip_space(text, start + len(label))
        if index >= len(text):
            return Markup(index, [], [f"{label}: no call after the tag; nothing was run."]) if final else Pending(_ANY)
        if text[index] not in "{[":
            if not final:
                return Pending(frozenset())  # a built-in tool's call runs to the end of the reply
            return Markup(len(text), *self._builtin_call(label, text[index:]))
        pieces: list[str] = []
        end = index
        while True:
            value_end = self._value_end(text, index, final)
            if isinstance(value_end, Pending):
                return value_end
            pieces.append(text[index:value_end])
            end = value_end
            after = self._skip_space(text, end)
            if after >= len(text):
                if final:
                    break
                return Pending(_ANY)
            if text[after] != ";":
                break
            index = self._skip_space(text, after + 1)
            if index >= len(text) and not final:
                return Pending(_ANY)
            if index >= len(text) or text[index] not in "{[":
                break
        calls: list[FoundCall] = []
        problems: list[str] = []
        for piece in pieces:
            found = self.builder.from_text(label, piece, "llama3")
            calls += found[0]
            problems += found[1]
        return Markup(end, calls, problems)

    def _builtin_call(self, label: str, source: str) -> Found:
        """Llama 3.1's built-in tool form, ``brave_search.call(query="...")``; literal keyword arguments only."""
        source = source.strip()
        try:
            if len(source) > LITERAL_LIMIT:
                raise ValueError("too long")
            tree = ast.parse(source, mode="eval").body
            if not isinstance(tree, ast.Call) or tree.args:
                raise ValueError("not a call with keyword arguments")
            func = tree.func
            if isinstance(func, ast.Attribute) and func.attr == "call" and isinstance(func.value, ast.Name):
                name = func.value.id
            elif isinstance(func, ast.Name):
                name = func.id
            else:
                raise ValueError("not a tool's name")
            arguments = {kw.arg: ast.literal_eval(kw.value) for kw in tree.keywords if kw.arg is not None}
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            return [], [f"{label}: not a JSON call nor a tool.call(...); nothing was run."]
        return self.builder.call(label, name, arguments, "llama3", "")

    def _mistral(self, text: str, start: int, final: bool) -> _Result:
        label = "[TOOL_CALLS]"
        index = self._skip_space(text, start + len(label))
        if index >= len(text):
            return Markup(index, [], [f"{label}: no call after the tag; nothing was run."]) if final else Pending(_ANY)
        if text[index] in "[{":
            end = self._value_end(text, index, final)
            if isinstance(end, Pending):
                return end
            return Markup(end, *self.builder.from_text(label, text[index:end], "mistral"))
        name = _NAME.match(text, index)
        if name is None:
            return Markup(index, [], [f"{label}: no tool name after the tag; nothing was run."])
        index = name.end()
        if index >= len(text) and not final:
            return Pending(_ANY)
        for token in ("[CALL_ID]", "[ARGS]"):
            after = self._token(text, index, token, final)
            if isinstance(after, Pending):
                return after
            if after is not None:
                word = _WORD.match(text, after) if token == "[CALL_ID]" else None
                index = word.end() if word else after
                if index >= len(text) and not final:
                    return Pending(_ANY)
        index = self._skip_space(text, index)
        if index >= len(text) or text[index] != "{":
            if index >= len(text) and not final:
                return Pending(_ANY)
            return Markup(index, [], [f"{label}{name.group()}: no JSON arguments follow the name; it was not run."])
        end = self._value_end(text, index, final)
        if isinstance(end, Pending):
            return end
        return Markup(end, *self.builder.call(label, name.group(), text[index:end], "mistral"))

    def _deepseek(self, text: str, start: int, final: bool) -> _Result:
        whole = text.startswith(_DS_CALLS_BEGIN, start)
        opener, closer = (_DS_CALLS_BEGIN, _DS_CALLS_END) if whole else (_DS_CALL_BEGIN, _DS_CALL_END)
        span = self._until(text, start + len(opener), closer, final)
        if isinstance(span, Pending):
            return span
        body = text[start + len(opener) : span[0]]
        pieces = _DS_CALL.findall(body) if whole else [body]
        label = "DeepSeek tool call"
        calls: list[FoundCall] = []
        problems: list[str] = []
        for piece in pieces:
            kind, sep, rest = piece.partition(_DS_SEP)
            if not sep:
                problems.append(f"{label}: no <\uff5ctool\u2581sep\uff5c> in the call; nothing was run.")
                continue
            if kind.strip() == "function":  # V3 and R1: type, separator, name, then a ```json block
                named = _DS_NAME.match(rest)
                name, arguments = (named.group(1), named.group(2)) if named else ("", "")
            else:  # V3.1: name, separator, arguments
                name, arguments = kind, rest
            fenced = _FENCED_ARGS.match(arguments)
            found = self.builder.call(label, name, fenced.group(1) if fenced else arguments, "deepseek")
            calls += found[0]
            problems += found[1]
        if not calls and not problems:
            problems.append(f"{label}: the block holds no call; nothing was run.")
        return Markup(span[1], calls, problems)

    def _fence(self, text: str, start: int, final: bool) -> _Result:
        newline = text.find("\n", start + 3)
        if newline < 0:
            return _Prose(len(text)) if final else Pending(_ANY)
        if text[start + 3 : newline].strip().lower() not in _FENCE_LABELS:
            return _Prose(newline + 1, in_fence=True)
        first = self._skip_space(text, newline + 1)
        if first >= len(text):
            return _Prose(newline + 1, in_fence=True) if final else Pending(_ANY)
        if text[first] not in "{[":
            return _Prose(newline + 1, in_fence=True)
        close = text.find("```", first)
        if close < 0 and not final:
            return Pending(frozenset("`"))
        body, end = (text[first:close], close + 3) if close >= 0 else (text[first:], len(text))
        try:
            value, repair = decode_lenient(body.strip())
        except LenientJSONError:
            return _Prose(end)
        if not call_shaped(value):
            return _Prose(end)
        return self._from_values("a ```json block", [value], "fenced_json", repair, end)


def _semicolon_values(body: str) -> list[object]:
    """Llama's ``{...}; {...}``: each value decoded leniently; empty unless every one reads."""
    values: list[object] = []
    index = 0
    while index < len(body):
        while index < len(body) and (body[index].isspace() or body[index] == ";"):
            index += 1
        if index >= len(body):
            break
        if body[index] not in "{[":
            return []
        end = json_end(body, index) or len(body)
        try:
            values.append(decode_lenient(body[index:end])[0])
        except LenientJSONError:
            return []
        index = end
    return values
