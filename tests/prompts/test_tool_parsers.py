from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from plait.exceptions import ParseError, UserError
from plait.prompts import (
    InterpreterParser,
    MixedToolParser,
    PluginParser,
    ToolParser,
    ToolStatusCode,
    default_plugin_validate,
)
from plait.schema import AgentMessage

# The "Use a tool parser as follows" output of seed 000, verbatim apart from indentation
# (the seed text lost its leading spaces).
SEED_000 = Path(__file__).with_name("seed_000_tool_parser.json")

INTERPRETER_BEGIN = "<|action_start|><|interpreter|>\n"
PLUGIN_BEGIN = "<|action_start|><|plugin|>\n"
ACTION_END = "<|action_end|>\n"


# --------------------------------------------------------------------------- seed 000


def test_seed_000_code_interpreter_parse_is_exact() -> None:
    seed_text = SEED_000.read_text(encoding="utf-8")
    seed = json.loads(seed_text)
    parser = ToolParser(tool_type="code interpreter", begin="```python\n", end="\n```\n")

    formatted = parser.parse_response(seed["content"])

    assert formatted == seed["formatted"]
    assert list(formatted) == ["tool_type", "thought", "action", "status"]
    assert formatted["status"] is ToolStatusCode.VALID_TOOL
    assert formatted["action"].endswith("print(result)")
    bot_msg = AgentMessage(sender="Agent", content=seed["content"], formatted=formatted)
    dumped = bot_msg.model_dump_json(indent=4)
    assert '"status": 1' in dumped
    assert [line.strip() for line in dumped.splitlines()] == [line.strip() for line in seed_text.splitlines()]


def test_seed_000_format_response_restores_the_call() -> None:
    seed = json.loads(SEED_000.read_text(encoding="utf-8"))
    parser = ToolParser(tool_type="code interpreter", begin="```python\n", end="\n```\n")
    text = parser.format_response(seed["formatted"])
    assert text == seed["content"] + "\n```\n"
    assert parser.parse_response(text) == seed["formatted"]


# --------------------------------------------------------------------------- ToolParser


def test_no_begin_marker_means_no_tool() -> None:
    parser = ToolParser("calc")
    assert parser.parse_response("Just an answer.") == {
        "tool_type": None,
        "thought": "Just an answer.",
        "action": None,
        "status": ToolStatusCode.NO_TOOL,
    }
    assert parser.format_response(parser.parse_response("Just an answer.")) == "Just an answer."


def test_complete_call_and_text_after_end_is_dropped() -> None:
    parser = ToolParser("calc")
    parsed = parser.parse_response("Let me add.<tool>\n1 + 1</tool>\nignored tail")
    assert parsed == {"tool_type": "calc", "thought": "Let me add.", "action": "1 + 1", "status": 1}
    assert parser.format_response(parsed) == "Let me add.<tool>\n1 + 1</tool>\n"


@pytest.mark.parametrize(
    ("reply", "action"),
    [
        ("x```python\nprint(1)", "print(1)"),  # stop word removed the whole end marker
        ("x```python\nprint(1)\n", "print(1)"),  # stop word '```\n' left the newline
        ("x```python\nprint(1)\n``", "print(1)"),  # cut inside the end marker
        ("x```python\nprint(1)\n```\n", "print(1)"),  # complete
        ("x```python\n", ""),
    ],
)
def test_missing_or_partial_end_marker(reply: str, action: str) -> None:
    parser = ToolParser("code", begin="```python\n", end="\n```\n")
    parsed = parser.parse_response(reply)
    assert parsed["action"] == action
    assert parsed["thought"] == "x"
    assert parsed["status"] == ToolStatusCode.VALID_TOOL


def test_second_begin_before_end_closes_the_first_call() -> None:
    parser = ToolParser("calc")
    assert parser.parse_response("a<tool>\n1<tool>\n2</tool>\n")["action"] == "1"


def test_empty_end_takes_the_rest() -> None:
    parser = ToolParser("shell", begin="$ ", end="")
    parsed = parser.parse_response("Listing:\n$ ls -la\n")
    assert parsed["action"] == "ls -la\n"
    assert parser.format_response(parsed) == "Listing:\n$ ls -la\n"


def test_validate_transforms_the_action_and_dicts_are_written_as_json() -> None:
    parser = ToolParser("browser", begin="```json\n", end="\n```\n", validate=lambda x: json.loads(x.rstrip("`")))
    parsed = parser.parse_response('Search.\n```json\n{"name": "search", "parameters": {"q": "雨"}}\n```')
    assert parsed["action"] == {"name": "search", "parameters": {"q": "雨"}}
    assert parsed["status"] == ToolStatusCode.VALID_TOOL
    text = parser.format_response(parsed)
    assert text == 'Search.\n```json\n{"name": "search", "parameters": {"q": "雨"}}\n```\n'
    assert parser.parse_response(text) == parsed


def test_validate_from_dotted_path() -> None:
    parser = ToolParser("json", validate="json.loads")
    assert parser.parse_response("<tool>\n[1, 2]</tool>\n")["action"] == [1, 2]


@pytest.mark.parametrize("validate", ["no_such_module_xyz.fn", "string.ascii_letters", 42])
def test_bad_validate_is_a_user_error(validate: Any) -> None:
    with pytest.raises(UserError):
        ToolParser("x", validate=validate)


def test_validate_failure_is_parsing_error_with_raw_action_and_hint() -> None:
    parser = ToolParser("json", validate=json.loads)
    parsed = parser.parse_response("Try.<tool>\n{not json}</tool>\n")
    assert parsed["status"] == ToolStatusCode.PARSING_ERROR
    assert parsed["action"] == "{not json}"
    assert parsed["tool_type"] == "json"
    assert parsed["thought"] == "Try."
    assert parsed["error"].startswith("JSONDecodeError: ")
    assert parser.format_response(parsed) == "Try.<tool>\n{not json}</tool>\n"


def test_format_instruction_can_use_begin_and_end() -> None:
    parser = ToolParser(
        "code", template="Write code between {begin} and {end}; {extra}", extra="thanks", begin="<code>", end="</code>"
    )
    assert parser.format_instruction() == "Write code between <code> and </code>; thanks"
    with pytest.raises(UserError, match=r"\['missing'\]"):
        ToolParser("code", template="{missing}")


def test_constructor_checks_markers() -> None:
    with pytest.raises(UserError):
        ToolParser("x", begin="")
    with pytest.raises(UserError):
        ToolParser("x", end=None)  # type: ignore[arg-type]


def test_format_response_checks_input() -> None:
    parser = ToolParser("calc")
    with pytest.raises(UserError, match="cannot format a 'other' call"):
        parser.format_response({"tool_type": "other", "thought": "", "action": "x", "status": 1})
    with pytest.raises(UserError):
        parser.format_response("text")  # type: ignore[arg-type]
    # A missing tool_type is accepted (few-shot dicts written by hand).
    assert parser.format_response({"thought": "t", "action": 7}) == "t<tool>\n7</tool>\n"


def test_status_codes() -> None:
    assert [(c.name, int(c)) for c in ToolStatusCode] == [("NO_TOOL", 0), ("VALID_TOOL", 1), ("PARSING_ERROR", -1)]


# --------------------------------------------------------------------------- Interpreter / Plugin


def test_interpreter_parser_round_trip() -> None:
    parser = InterpreterParser(template="Use {begin}code{end}")
    assert parser.tool_type == "interpreter"
    assert parser.format_instruction() == f"Use {INTERPRETER_BEGIN}code{ACTION_END}"
    reply = f"Compute it.{INTERPRETER_BEGIN}print(1 + 1){ACTION_END}"
    parsed = parser.parse_response(reply)
    assert parsed == {"tool_type": "interpreter", "thought": "Compute it.", "action": "print(1 + 1)", "status": 1}
    assert parser.format_response(parsed) == reply
    # Stop word '<|action_end|>' removed the end marker.
    assert parser.parse_response(f"x{INTERPRETER_BEGIN}print(2)")["action"] == "print(2)"


def test_plugin_parser_valid_call_round_trip() -> None:
    parser = PluginParser()
    reply = f'Look it up.{PLUGIN_BEGIN}{{"name": "search", "parameters": {{"q": "lagent"}}}}{ACTION_END}'
    parsed = parser.parse_response(reply)
    assert parsed == {
        "tool_type": "plugin",
        "thought": "Look it up.",
        "action": {"name": "search", "parameters": {"q": "lagent"}},
        "status": ToolStatusCode.VALID_TOOL,
    }
    assert parser.format_response(parsed) == reply
    assert parser.parse_response(parser.format_response(parsed)) == parsed


@pytest.mark.parametrize(
    ("action", "hint"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"parameters": {}}', "no 'name'"),
        ('{"name": "", "parameters": {}}', "no 'name'"),
        ('{"name": "search"}', "no 'parameters'"),
        ('{"name": "search", "parameters": "q=1"}', "no 'parameters'"),
        ("[" * 50_000, "not valid JSON"),
    ],
)
def test_plugin_parser_bad_calls_are_parsing_errors(action: str, hint: str) -> None:
    parsed = PluginParser().parse_response(f"t{PLUGIN_BEGIN}{action}{ACTION_END}")
    assert parsed["status"] == ToolStatusCode.PARSING_ERROR
    assert parsed["action"] == action
    assert hint in parsed["error"]
    assert '"name": "<tool name>"' in parsed["error"]


def test_default_plugin_validate_directly() -> None:
    assert default_plugin_validate(' {"name": "a", "parameters": {}}\n') == {"name": "a", "parameters": {}}
    with pytest.raises(ParseError):
        default_plugin_validate("{}")


# --------------------------------------------------------------------------- MixedToolParser


def _mixed(**kwargs: Any) -> MixedToolParser:
    return MixedToolParser(
        parsers=[PluginParser(template="Plugins: {begin}"), {"type": InterpreterParser, "template": "Code."}],
        **kwargs,
    )


def test_mixed_format_instruction_is_a_list_of_system_messages() -> None:
    parser = _mixed(template="You are {who}.", who="helpful")
    assert parser.format_instruction() == [
        {"role": "system", "content": "You are helpful."},
        {"role": "system", "content": f"Plugins: {PLUGIN_BEGIN}", "name": "plugin"},
        {"role": "system", "content": "Code.", "name": "interpreter"},
    ]
    named = MixedToolParser(tool_type="meta", template="M", parsers=[InterpreterParser()])
    assert named.format_instruction() == [{"role": "system", "content": "M", "name": "meta"}]
    assert MixedToolParser().format_instruction() == []


def test_mixed_picks_the_earliest_begin_marker() -> None:
    parser = _mixed()
    interp_first = f"a{INTERPRETER_BEGIN}print(1){ACTION_END}b{PLUGIN_BEGIN}{{}}"
    parsed = parser.parse_response(interp_first)
    assert parsed == {"tool_type": "interpreter", "thought": "a", "action": "print(1)", "status": 1}
    plugin_first = f'a{PLUGIN_BEGIN}{{"name": "s", "parameters": {{}}}}{ACTION_END}b{INTERPRETER_BEGIN}x'
    parsed = parser.parse_response(plugin_first)
    assert parsed["tool_type"] == "plugin"
    assert parsed["action"] == {"name": "s", "parameters": {}}


def test_mixed_prefers_the_longest_marker_on_a_tie() -> None:
    parser = MixedToolParser(parsers=[ToolParser("short", begin="<a>"), ToolParser("long", begin="<a><b>")])
    assert parser.parse_response("x<a><b>y</tool>\n")["tool_type"] == "long"
    assert parser.parse_response("x<a>y</tool>\n")["tool_type"] == "short"


def test_mixed_no_tool_and_format_response_dispatch() -> None:
    parser = _mixed()
    parsed = parser.parse_response("Final answer: 3.")
    assert parsed == {"tool_type": None, "thought": "Final answer: 3.", "action": None, "status": 0}
    assert parser.format_response(parsed) == "Final answer: 3."
    for reply in (
        f"a{INTERPRETER_BEGIN}print(1){ACTION_END}",
        f'a{PLUGIN_BEGIN}{{"name": "s", "parameters": {{"k": 1}}}}{ACTION_END}',
    ):
        assert parser.format_response(parser.parse_response(reply)) == reply
    bad = parser.parse_response(f"a{PLUGIN_BEGIN}oops")
    assert bad["status"] == ToolStatusCode.PARSING_ERROR
    assert parser.format_response(bad) == f"a{PLUGIN_BEGIN}oops{ACTION_END}"


def test_mixed_rejects_bad_configuration_and_unknown_tool_types() -> None:
    with pytest.raises(UserError, match="must be ToolParsers"):
        MixedToolParser(parsers=["not a parser"])  # type: ignore[list-item]
    with pytest.raises(UserError, match="two parsers"):
        MixedToolParser(parsers=[InterpreterParser(), ToolParser("interpreter")])
    with pytest.raises(UserError, match="no parser for tool_type 'web'"):
        _mixed().format_response({"tool_type": "web", "thought": "", "action": "x", "status": 1})
    with pytest.raises(UserError):
        _mixed().format_response("x")  # type: ignore[arg-type]


def test_mixed_accepts_dotted_type_paths() -> None:
    parser = MixedToolParser(parsers=[{"type": "plait.prompts.InterpreterParser"}])
    assert list(parser.parsers) == ["interpreter"]
