"""Property tests: parsers never crash on arbitrary model output, and format/parse round-trip."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, assume, given, settings, strategies as st
from pydantic import BaseModel

from plait.exceptions import ParseError
from plait.prompts import (
    InterpreterParser,
    JSONParser,
    MixedToolParser,
    PluginParser,
    ToolParser,
    ToolStatusCode,
)

MARKERS = [
    "```python\n",
    "\n```\n",
    "```",
    "<tool>\n",
    "</tool>\n",
    "<|action_start|>",
    "<|interpreter|>\n",
    "<|plugin|>\n",
    "<|action_end|>\n",
    "{",
    "}",
    '"name"',
    "//",
    "\n",
]

# Text built from marker fragments and arbitrary characters, so markers actually occur.
model_text = st.lists(st.one_of(st.sampled_from(MARKERS), st.text(max_size=8)), max_size=20).map("".join)
any_text = st.one_of(st.text(), model_text)

SEED_PARSER = ToolParser(tool_type="code interpreter", begin="```python\n", end="\n```\n")
TOOL_PARSERS = [
    SEED_PARSER,
    ToolParser("plain"),
    InterpreterParser(),
    PluginParser(),
    ToolParser("j", validate=json.loads),
]
MIXED = MixedToolParser(parsers=[PluginParser(), InterpreterParser(), ToolParser("code", begin="```python\n")])

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check_tool_result(parser_begin: str | None, text: str, result: dict[str, Any]) -> None:
    assert set(result) <= {"tool_type", "thought", "action", "status", "error"}
    assert result["status"] in set(ToolStatusCode)
    assert text.startswith(result["thought"])
    if result["status"] == ToolStatusCode.NO_TOOL:
        assert result == {"tool_type": None, "thought": text, "action": None, "status": ToolStatusCode.NO_TOOL}
    else:
        assert result["tool_type"] is not None
        if parser_begin is not None:
            assert text[len(result["thought"]) :].startswith(parser_begin)
    assert ("error" in result) == (result["status"] == ToolStatusCode.PARSING_ERROR)


@SETTINGS
@given(text=any_text)
def test_tool_parsers_never_raise(text: str) -> None:
    for parser in TOOL_PARSERS:
        result = parser.parse_response(text)
        _check_tool_result(parser.begin, text, result)
        assert (result["status"] == ToolStatusCode.NO_TOOL) == (parser.begin not in text)
        parser.format_response(result)  # whatever was parsed can be written back


@SETTINGS
@given(text=any_text)
def test_mixed_tool_parser_never_raises(text: str) -> None:
    result = MIXED.parse_response(text)
    _check_tool_result(None, text, result)
    has_any = any(p.begin in text for p in MIXED.parsers.values())
    assert (result["status"] != ToolStatusCode.NO_TOOL) == has_any
    assert isinstance(MIXED.format_response(result), str)


@SETTINGS
@given(thought=any_text, action=any_text)
def test_tool_parser_round_trip(thought: str, action: str) -> None:
    parser = SEED_PARSER
    text = parser.format_response(
        {"tool_type": parser.tool_type, "thought": thought, "action": action, "status": ToolStatusCode.VALID_TOOL}
    )
    # The round trip holds when the markers occur only where format_response put them.
    assume(text.find(parser.begin) == len(thought))
    body = text[len(thought) + len(parser.begin) :]
    assume(body.find(parser.end) == len(action) and parser.begin not in body[: len(action) + 1])
    assert parser.parse_response(text) == {
        "tool_type": parser.tool_type,
        "thought": thought,
        "action": action,
        "status": ToolStatusCode.VALID_TOOL,
    }


class Call(BaseModel):
    name: str
    parameters: dict[str, Any] = {}


class Finish(BaseModel):
    conclusion: str


JSON_PARSER = JSONParser("{formats}", formats=[Call, Finish])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@SETTINGS
@given(text=st.one_of(any_text, json_values.map(json.dumps)))
def test_json_parser_raises_only_parse_error(text: str) -> None:
    try:
        result = JSON_PARSER.parse_response(text)
    except ParseError as exc:
        assert exc.raw == text
        assert exc.err_msg
    else:
        assert type(result) is dict
        assert set(result) in ({"name", "parameters"}, {"conclusion"})


@SETTINGS
@given(value=json_values, fenced=st.booleans())
def test_json_parser_without_models_decodes_any_json(value: Any, fenced: bool) -> None:
    text = JSONParser().format_response(value)
    if fenced:
        text = f"```json\n{text}\n```"
    assert JSONParser().parse_response(text) == value


@SETTINGS
@given(
    name=st.text(),
    parameters=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    conclusion=st.text(),
)
def test_json_parser_round_trip(name: str, parameters: dict[str, Any], conclusion: str) -> None:
    for parsed in ({"name": name, "parameters": parameters}, {"conclusion": conclusion}):
        assert JSON_PARSER.parse_response(JSON_PARSER.format_response(parsed)) == parsed
