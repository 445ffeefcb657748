"""Meta templates: exact rendered prompts (LMTemplateParser) and API messages (APITemplateParser)."""

from __future__ import annotations

import pytest

from plait.exceptions import UserError
from plait.llms import INTERNLM2_META, APITemplateParser, LMTemplateParser
from plait.llms.openai import OPENAI_META

SYSTEM = {"role": "system", "content": "You are helpful."}
USER = {"role": "user", "content": "What is 2+2?"}
ASSISTANT = {"role": "assistant", "content": "4"}


# -- LMTemplateParser + INTERNLM2_META --


def test_internlm2_user_turn_gets_the_assistant_prompt_appended() -> None:
    parser = LMTemplateParser(INTERNLM2_META)
    assert parser([SYSTEM, USER]) == (
        "<|im_start|>system\nYou are helpful.<|im_end|>\n"
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_internlm2_tool_turns_use_special_name_tokens() -> None:
    parser = LMTemplateParser(INTERNLM2_META)
    dialog = [
        SYSTEM,
        {"role": "system", "name": "plugin", "content": '[{"name": "search"}]'},
        USER,
        {"role": "assistant", "content": 'Searching.<|action_start|><|plugin|>\n{"name": "search"}<|action_end|>'},
        {"role": "environment", "name": "plugin", "content": '{"result": 42}'},
    ]
    assert parser(dialog) == (
        "<|im_start|>system\nYou are helpful.<|im_end|>\n"
        '<|im_start|>system name=<|plugin|>\n[{"name": "search"}]<|im_end|>\n'
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
        '<|im_start|>assistant\nSearching.<|action_start|><|plugin|>\n{"name": "search"}<|action_end|><|im_end|>\n'
        '<|im_start|>environment name=<|plugin|>\n{"result": 42}<|im_end|>\n'
        "<|im_start|>assistant\n"
    )


def test_internlm2_interpreter_and_unmapped_names() -> None:
    parser = LMTemplateParser(INTERNLM2_META)
    out = parser(
        [
            {"role": "environment", "name": "interpreter", "content": "3"},
            {"role": "user", "name": "alice", "content": "hi"},
        ]
    )
    assert out == (
        "<|im_start|>environment name=<|interpreter|>\n3<|im_end|>\n"
        "<|im_start|>user name=alice\nhi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_last_assistant_turn_is_closed_and_not_reopened() -> None:
    parser = LMTemplateParser(INTERNLM2_META)
    assert parser([USER, ASSISTANT]) == (
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
    )


def test_generate_role_left_open_for_continuation() -> None:
    meta = [
        {"role": "user", "begin": "<u>", "end": "</u>"},
        {"role": "assistant", "begin": "<a>", "end": "</a>", "generate": True},
    ]
    parser = LMTemplateParser(meta)
    assert parser([USER, {"role": "assistant", "content": "The answer"}]) == "<u>What is 2+2?</u><a>The answer"
    assert parser([USER]) == "<u>What is 2+2?</u><a>"


def test_fallback_role_and_bare_strings() -> None:
    meta = [
        {"role": "system", "begin": "[S]", "end": "\n"},
        {"role": "user", "begin": "[U]", "end": "\n"},
        {"role": "assistant", "begin": "[A]", "end": "\n"},
        {"role": "environment", "fallback_role": "system"},
    ]
    parser = LMTemplateParser(meta)
    assert parser([{"role": "environment", "content": "obs"}, "raw text\n", USER]) == (
        "[S]obs\nraw text\n[U]What is 2+2?\n[A]"
    )


def test_unknown_role_is_a_clear_user_error() -> None:
    with pytest.raises(UserError, match=r"role 'tool' is not in the meta template \(roles: 'system', 'user'"):
        LMTemplateParser(INTERNLM2_META)([{"role": "tool", "content": "x"}])


def test_bad_meta_templates_are_rejected() -> None:
    with pytest.raises(UserError, match="appears twice"):
        LMTemplateParser([{"role": "user"}, {"role": "user"}])
    with pytest.raises(UserError, match="falls back to 'nobody'"):
        LMTemplateParser([{"role": "user", "fallback_role": "nobody"}])


def test_no_meta_template_joins_contents_with_newlines() -> None:
    parser = LMTemplateParser()
    assert parser([SYSTEM, {"role": "user", "content": ""}, USER]) == "You are helpful.\nWhat is 2+2?"
    assert parser("already a prompt") == "already a prompt"


def test_parser_does_not_alias_the_meta_template() -> None:
    meta = [{"role": "user", "begin": "<u>", "end": "</u>"}]
    parser = LMTemplateParser(meta)
    meta[0]["begin"] = "CHANGED"
    assert parser([USER]) == "<u>What is 2+2?</u>"


# -- APITemplateParser --


def test_api_parser_maps_roles_and_merges_consecutive_same_role() -> None:
    parser = APITemplateParser(OPENAI_META)
    out = parser(
        [
            SYSTEM,
            {"role": "environment", "name": "plugin", "content": "tool output"},
            USER,
            {"role": "user", "content": "Please answer."},
            ASSISTANT,
        ]
    )
    assert out == [
        {"role": "system", "content": "You are helpful.\ntool output"},
        {"role": "user", "content": "What is 2+2?\nPlease answer."},
        {"role": "assistant", "content": "4"},
    ]


def test_api_parser_wraps_begin_end_and_keeps_names() -> None:
    meta = [
        {"role": "user", "api_role": "user", "begin": "<<", "end": ">>"},
        {"role": "environment", "api_role": "user", "begin": "Observation: "},
    ]
    parser = APITemplateParser(meta)
    assert parser([{"role": "user", "name": "bob", "content": "hi"}]) == [
        {"role": "user", "name": "bob", "content": "<<hi>>"}
    ]
    assert parser([{"role": "environment", "content": "42"}]) == [{"role": "user", "content": "Observation: 42"}]


def test_api_parser_passes_native_tool_messages_through_unmerged() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    dialog = [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "r1"},
        {"role": "tool", "tool_call_id": "call_2", "content": "r2"},
        {"role": "assistant", "content": "done"},
        {"role": "assistant", "content": "really"},
    ]
    out = APITemplateParser(OPENAI_META)(dialog)
    assert out == [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "r1"},
        {"role": "tool", "tool_call_id": "call_2", "content": "r2"},
        {"role": "assistant", "content": "done\nreally"},
    ]
    assert out[1] is not dialog[1]  # copies, never the caller's dicts


def test_api_parser_never_mutates_its_input() -> None:
    dialog = [dict(USER), {"role": "user", "content": "more"}]
    before = [dict(m) for m in dialog]
    APITemplateParser(OPENAI_META)(dialog)
    assert dialog == before


def test_api_parser_without_meta_keeps_roles_and_wraps_strings() -> None:
    parser = APITemplateParser()
    assert parser([{"role": "developer", "content": "x"}]) == [{"role": "developer", "content": "x"}]
    assert parser("hello") == [{"role": "user", "content": "hello"}]
    with pytest.raises(UserError, match="not in the meta template"):
        APITemplateParser(OPENAI_META)([{"role": "critic", "content": "x"}])


def test_api_parser_keeps_multimodal_content_unmerged() -> None:
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:,"}}]
    out = APITemplateParser(OPENAI_META)([USER, {"role": "user", "content": parts}])
    assert out == [USER, {"role": "user", "content": parts}]
