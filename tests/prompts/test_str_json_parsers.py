from __future__ import annotations

import json
import re
from enum import Enum
from typing import Literal, Optional, Union

import pytest
from pydantic import BaseModel, Field

from plait.exceptions import ParseError, UserError
from plait.prompts import JSONParser, StrParser


class Action(BaseModel):
    name: str = Field(description="the tool to call")
    parameters: dict = Field(default_factory=dict)


class ActionFormat(BaseModel):
    thought_process: str = Field(description="why this action")
    action: Action


class FinishFormat(BaseModel):
    thought_process: str
    conclusion: str


class Color(str, Enum):
    RED = "red"
    BLUE = "blue"


class Everything(BaseModel):
    count: int = 3
    ratio: Optional[float] = None
    tags: list[str] = Field(description="labels\nsecond line")
    mode: Literal["fast", "slow"] = "fast"
    either: Union[int, str] = 0
    color: Color = Color.RED
    steps: list[Action] = []
    maybe: Optional[Action] = None
    table: dict[str, int] = {}


class Node(BaseModel):
    value: int
    children: list[Node] = []


# --------------------------------------------------------------------------- StrParser


def test_str_parser_instruction_and_identity() -> None:
    parser = StrParser("Answer in {language}, at most {limit} words.", language="French", limit=50)
    assert parser.format_instruction() == "Answer in French, at most 50 words."
    assert parser.parse_response("Bonjour") == "Bonjour"
    assert parser.format_response("Bonjour") == "Bonjour"
    assert StrParser().format_instruction() == ""


def test_str_parser_requires_every_template_field() -> None:
    with pytest.raises(UserError, match=r"\['limit'\]"):
        StrParser("{language} {limit}", language="French")
    with pytest.raises(UserError):
        StrParser("{0}", x=1)
    with pytest.raises(UserError):
        StrParser("{unclosed", unclosed=1)


def test_str_parser_extra_fields_are_allowed() -> None:
    assert StrParser("hi", unused="x").format_instruction() == "hi"


def test_str_parser_format_response_rejects_non_text() -> None:
    with pytest.raises(UserError):
        StrParser().format_response({"a": 1})


def test_subclass_can_override_format_to_string() -> None:
    class Upper(StrParser):
        def format_to_string(self, value: object) -> str:
            return str(value).upper()

    assert Upper("{x}!", x="hey").format_instruction() == "HEY!"


# --------------------------------------------------------------------------- JSONParser: instruction


def _strict_json(skeleton: str) -> object:
    """Drop `//` comments (no `//` inside the skeleton's strings) and decode strictly."""
    return json.loads(re.sub(r"//[^\n]*", "", skeleton))


def test_skeleton_is_readable_and_valid_json_once_comments_are_removed() -> None:
    text = JSONParser("{fmt}", fmt=ActionFormat).format_instruction()
    assert text == (
        "{\n"
        "    // why this action\n"
        '    "thought_process": "str",  // required\n'
        '    "action": {  // required\n'
        "        // the tool to call\n"
        '        "name": "str",  // required\n'
        '        "parameters": "dict"  // optional\n'
        "    }\n"
        "}"
    )
    assert _strict_json(text) == {"thought_process": "str", "action": {"name": "str", "parameters": "dict"}}


def test_skeleton_types_defaults_nesting_and_no_trailing_commas() -> None:
    text = JSONParser("{fmt}", fmt=Everything).format_instruction()
    assert '"count": "int",  // optional, default: 3' in text
    assert '"ratio": "float | null",  // optional, default: null' in text
    assert "    // labels\n    // second line\n" in text
    assert '"tags": "list[str]",  // required' in text
    assert "\"mode\": \"'fast' | 'slow'\"," in text
    assert '"either": "int | str",' in text
    assert '"color": "Color",  // optional, default: "red"' in text
    assert '"steps": [  // optional, default: []' in text
    assert '"maybe": {  // optional, default: null; may be null' in text
    assert '"table": "dict[str, int]"  // optional, default: {}' in text
    assert not re.search(r",\s*(//[^\n]*)?\n\s*[}\]]", text), "a trailing comma before a closing bracket"
    decoded = _strict_json(text)
    assert isinstance(decoded, dict)
    assert decoded["steps"] == [{"name": "str", "parameters": "dict"}]


def test_recursive_models_stop_at_the_cycle() -> None:
    text = JSONParser("{n}", n=Node).format_instruction()
    assert _strict_json(text) == {"value": "int", "children": "list[Node]"}


def test_list_of_models_renders_alternatives_and_strings_pass_through() -> None:
    parser = JSONParser("Reply with\n{formats}\n{note}", formats=[ActionFormat, FinishFormat], note="Thanks")
    text = parser.format_instruction()
    first, second = text.split("\nor\n")
    assert first.startswith("Reply with\n{")
    assert '"conclusion": "str"  // required\n}\nThanks' in second
    assert parser.models == [ActionFormat, FinishFormat]


# --------------------------------------------------------------------------- JSONParser: parsing

PARSER = JSONParser("{formats}", formats=[ActionFormat, FinishFormat])


@pytest.mark.parametrize(
    "reply",
    [
        '{"thought_process": "done", "conclusion": "42"}',
        'Sure!\n```json\n{"thought_process": "done", "conclusion": "42"}\n```\nHope it helps.',
        '```json\n{"thought_process": "done", "conclusion": "42"}\n',  # closing fence cut by a stop word
        '```\n{\n  // a comment line\n  "thought_process": "done",\n  "conclusion": "42", // trailing\n}\n```',
        'The answer: {"thought_process": "done", "conclusion": "42"} -- end',
        '{"thought_process": "done", /* block */ "conclusion": "42",}',
    ],
)
def test_parse_accepts_raw_fenced_and_commented_json(reply: str) -> None:
    assert PARSER.parse_response(reply) == {"thought_process": "done", "conclusion": "42"}


def test_first_matching_model_wins_and_returns_a_plain_dict() -> None:
    reply = '{"thought_process": "t", "action": {"name": "search"}, "conclusion": "c"}'
    parsed = PARSER.parse_response(reply)
    assert parsed == {"thought_process": "t", "action": {"name": "search", "parameters": {}}}
    assert type(parsed) is dict
    assert type(parsed["action"]) is dict


def test_comment_markers_inside_strings_are_kept() -> None:
    reply = '{"thought_process": "see http://x.y/*z*/", "conclusion": "a // b"}'
    assert PARSER.parse_response(reply) == {"thought_process": "see http://x.y/*z*/", "conclusion": "a // b"}


def test_not_json_raises_parse_error_for_the_model() -> None:
    with pytest.raises(ParseError) as info:
        PARSER.parse_response("I think the answer is 42.")
    err = info.value
    assert err.raw == "I think the answer is 42."
    assert "not valid JSON" in err.err_msg
    assert "ActionFormat {thought_process, action}" in err.err_msg
    assert "FinishFormat {thought_process, conclusion}" in err.err_msg


def test_json_matching_no_model_names_models_and_errors() -> None:
    with pytest.raises(ParseError) as info:
        PARSER.parse_response('{"thought_process": 5, "action": {"parameters": {}}}')
    message = info.value.err_msg
    assert message.startswith("The JSON does not match any expected format (ActionFormat, FinishFormat):")
    assert "- ActionFormat: thought_process: Input should be a valid string; action.name: Field required" in message
    assert "- FinishFormat:" in message
    assert "conclusion: Field required" in message


def test_json_array_against_models_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match=r"\(root\)"):
        PARSER.parse_response("[1, 2]")


def test_validation_error_list_is_capped() -> None:
    class Many(BaseModel):
        a: int
        b: int
        c: int
        d: int
        e: int
        f: int
        g: int

    with pytest.raises(ParseError, match=r"\.\.\. 2 more"):
        JSONParser("{m}", m=Many).parse_response("{}")


def test_without_models_the_decoded_value_is_returned() -> None:
    parser = JSONParser("Reply in JSON.")
    assert parser.parse_response('[1, 2, {"a": null}]') == [1, 2, {"a": None}]
    assert parser.parse_response('```json\n"text"\n```') == "text"
    with pytest.raises(ParseError):
        parser.parse_response("")


def test_deeply_nested_input_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        PARSER.parse_response("[" * 100_000)


def test_format_response_round_trip() -> None:
    parsed = PARSER.parse_response('{"thought_process": "t", "action": {"name": "web", "parameters": {"q": "雨"}}}')
    text = PARSER.format_response(parsed)
    assert "雨" in text
    assert PARSER.parse_response(text) == parsed
    assert json.loads(PARSER.format_response(FinishFormat(thought_process="a", conclusion="b"))) == {
        "thought_process": "a",
        "conclusion": "b",
    }


def test_format_response_handles_enums_and_rejects_garbage() -> None:
    parsed = JSONParser("{e}", e=Everything).parse_response('{"tags": ["x"], "color": "blue"}')
    assert parsed["color"] is Color.BLUE
    assert json.loads(PARSER.format_response(parsed))["color"] == "blue"
    with pytest.raises(UserError):
        PARSER.format_response({"x": object()})
