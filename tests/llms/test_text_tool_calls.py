"""Tool calls written into a reply's text (issue 37, item 3): each family's wire form, whole and streamed.

Every case runs four ways — `find_tool_calls` on the whole reply, and `TextCallStream` fed the
reply at once, a character at a time and in random pieces — and all four must agree; the
streamed text (what `feed` showed, then what `finish` returned) must be exactly the final
text, so markup is never shown and nothing is lost or shown twice.

The wire forms follow the servers' own parsers and the models' chat templates: vLLM's
``hermes``, ``qwen3_coder``, ``internlm2``, ``llama3_json``, ``mistral``, ``deepseek_v3`` and
``deepseek_v31`` tool parsers, llama.cpp's Qwen3-Coder XML and Mistral ``[ARGS]`` formats.
"""

from __future__ import annotations

import json
import random

import pytest

from plait.exceptions import UserError
from plait.llms.text_tool_calls import FORMATS, Offered, TextCallStream, TextToolCalls, find_tool_calls

OFFERED = ["get_weather", "search"]
DS_CALLS = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
DS_CALLS_END = "<\uff5ctool\u2581calls\u2581end\uff5c>"
DS_CALL = "<\uff5ctool\u2581call\u2581begin\uff5c>"
DS_CALL_END = "<\uff5ctool\u2581call\u2581end\uff5c>"
DS_SEP = "<\uff5ctool\u2581sep\uff5c>"
Calls = list[tuple[str, dict[str, object], str]]
MARKERS = ["<tool_call>", "<function=", "<|action_start|>", "<|python_tag|>", "[TOOL_CALLS]", DS_CALLS, DS_CALL]


def _stream(text: str, pieces: list[str], offered: Offered, formats: list[str] | None) -> TextToolCalls:
    stream = TextCallStream(offered, formats)
    shown = "".join(stream.feed(piece) for piece in pieces)
    rest, found = stream.finish()
    assert shown + rest == found.text, (pieces, shown, rest, found.text)
    return found


def _pieces(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    out, index = [], 0
    while index < len(text):
        size = rng.randint(1, 7)
        out.append(text[index : index + size])
        index += size
    return out


def found_every_way(text: str, offered: Offered = OFFERED, formats: list[str] | None = None) -> TextToolCalls:
    """The result of `find_tool_calls`, checked equal to the stream's in four chunkings."""
    whole = find_tool_calls(text, offered, formats)
    for pieces in ([text], list(text), _pieces(text, 1), _pieces(text, 2)):
        assert _stream(text, pieces, offered, formats) == whole
    assert all(call.name in offered for call in whole.calls)
    return whole


def calls_of(found: TextToolCalls) -> Calls:
    return [(call.name, json.loads(call.arguments), call.format) for call in found.calls]


PARIS: dict[str, object] = {"city": "Paris"}
HERMES = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'

# (id, reply, calls as (name, arguments, format), the text left)
FORMAT_CASES: list[tuple[str, str, Calls, str]] = [
    ("hermes", HERMES, [("get_weather", PARIS, "hermes")], ""),
    (
        "hermes-thought-and-parallel",
        'Let me look both up.\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "search", "arguments": {"query": "Paris events"}}\n</tool_call>',
        [("get_weather", PARIS, "hermes"), ("search", {"query": "Paris events"}, "hermes")],
        "Let me look both up.",
    ),
    (
        "hermes-stringified-arguments",
        '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}</tool_call>',
        [("get_weather", PARIS, "hermes")],
        "",
    ),
    (
        "qwen3-coder",
        "I'll check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>",
        [("get_weather", {"city": "Paris", "unit": "celsius"}, "qwen3_coder")],
        "I'll check.",
    ),
    (
        "qwen3-coder-without-outer-tags",
        "<function=search>\n<parameter=query>\nmulti\nline\n</parameter>\n</function>\nDone.",
        [("search", {"query": "multi\nline"}, "qwen3_coder")],
        "Done.",
    ),
    (
        "qwen3-coder-stray-closing-tag",
        "<function=search><parameter=query>x</parameter></function>\n</tool_call>",
        [("search", {"query": "x"}, "qwen3_coder")],
        "",
    ),
    (
        "internlm2",
        'I need the weather first.<|action_start|><|plugin|>\n{"name": "get_weather", "parameters": {"city": "Paris"}}'
        "<|action_end|>\n",
        [("get_weather", PARIS, "internlm2")],
        "I need the weather first.",
    ),
    (
        "llama3-python-tag",
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
        [("get_weather", PARIS, "llama3")],
        "",
    ),
    (
        "llama3-two-calls",
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; '
        '{"name": "search", "parameters": {"query": "x"}}',
        [("get_weather", PARIS, "llama3"), ("search", {"query": "x"}, "llama3")],
        "",
    ),
    (
        "llama3-builtin-call",
        '<|python_tag|>search.call(query="weather in Paris")',
        [("search", {"query": "weather in Paris"}, "llama3")],
        "",
    ),
    (
        "llama3-bare-json",
        '{"name": "get_weather", "parameters": {"city": "Paris"}}',
        [("get_weather", PARIS, "bare_json")],
        "",
    ),
    (
        "bare-json-list",
        '\n[{"name": "get_weather", "arguments": {"city": "Paris"}},\n'
        ' {"name": "search", "arguments": {"query": "x"}}]\n',
        [("get_weather", PARIS, "bare_json"), ("search", {"query": "x"}, "bare_json")],
        "",
    ),
    (
        "bare-json-openai-shape",
        '{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}',
        [("get_weather", PARIS, "bare_json")],
        "",
    ),
    (
        "mistral-v3",
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "search", "arguments": {"query": "x"}}]',
        [("get_weather", PARIS, "mistral"), ("search", {"query": "x"}, "mistral")],
        "",
    ),
    (
        "mistral-v11-call-id",
        '[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{"city": "Paris"}',
        [("get_weather", PARIS, "mistral")],
        "",
    ),
    (
        "mistral-v13-args",
        'Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]search[ARGS]{"query": "x"}',
        [("get_weather", PARIS, "mistral"), ("search", {"query": "x"}, "mistral")],
        "Sure.",
    ),
    (
        "deepseek-v3",
        f"Checking.{DS_CALLS}{DS_CALL}function{DS_SEP}get_weather\n```json\n" + '{"city": "Paris"}\n```'
        f"{DS_CALL_END}\n{DS_CALL}function{DS_SEP}search\n```json\n"
        + '{"query": "x"}\n```'
        + f"{DS_CALL_END}{DS_CALLS_END}",
        [("get_weather", PARIS, "deepseek"), ("search", {"query": "x"}, "deepseek")],
        "Checking.",
    ),
    (
        "deepseek-v3.1",
        f'{DS_CALLS}{DS_CALL}get_weather{DS_SEP}{{"city": "Paris"}}{DS_CALL_END}{DS_CALLS_END}',
        [("get_weather", PARIS, "deepseek")],
        "",
    ),
    (
        "fenced-json",
        'I will search.\n\n```json\n{"name": "search", "arguments": {"query": "x"}}\n```\n\nThen summarise.',
        [("search", {"query": "x"}, "fenced_json")],
        "I will search.\n\nThen summarise.",
    ),
    (
        "fenced-without-label-after-code",
        '```python\nprint("hi")\n```\n```\n{"name": "search", "arguments": {}}\n```',
        [("search", {}, "fenced_json")],
        '```python\nprint("hi")\n```',
    ),
]


@pytest.mark.parametrize(
    ("reply", "calls", "text"), [case[1:] for case in FORMAT_CASES], ids=[c[0] for c in FORMAT_CASES]
)
def test_each_format_becomes_calls_whole_and_streamed(reply: str, calls: Calls, text: str) -> None:
    found = found_every_way(reply)
    assert calls_of(found) == calls
    assert found.text == text
    assert found.problems == ()
    assert found.found


def test_every_format_is_covered() -> None:
    assert {fmt for case in FORMAT_CASES for *_, fmt in case[2]} == set(FORMATS)


@pytest.mark.parametrize(
    "reply",
    [
        '<tool_call>{"name": "delete_everything", "arguments": {}}</tool_call>',
        "<function=delete_everything><parameter=path>/</parameter></function>",
        '<|action_start|><|plugin|>{"name": "delete_everything", "parameters": {}}<|action_end|>',
        '<|python_tag|>{"name": "delete_everything", "parameters": {}}',
        '{"name": "delete_everything", "parameters": {}}',
        '[TOOL_CALLS][{"name": "delete_everything", "arguments": {}}]',
        '[TOOL_CALLS]delete_everything[ARGS]{"path": "/"}',
        f"{DS_CALLS}{DS_CALL}delete_everything{DS_SEP}{{}}{DS_CALL_END}{DS_CALLS_END}",
        '```json\n{"name": "delete_everything", "arguments": {}}\n```',
    ],
)
def test_a_tool_that_was_not_offered_is_a_problem_never_a_call(reply: str) -> None:
    found = found_every_way(reply)
    assert found.calls == ()
    assert found.text == ""  # the markup is not shown as the answer either
    assert len(found.problems) == 1
    assert "'delete_everything' is not an offered tool" in found.problems[0]
    assert "\n" not in found.problems[0]


def test_the_problem_names_the_closest_offered_tool() -> None:
    found = found_every_way('<tool_call>{"name": "get_wether", "arguments": {}}</tool_call>')
    assert "did you mean 'get_weather'?" in found.problems[0]
    assert "no tools are offered" in find_tool_calls(HERMES, []).problems[0]


def test_parallel_calls_keep_good_ones_and_report_bad_ones() -> None:
    found = found_every_way(
        HERMES + '\n<tool_call>{"name": "nope", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "search", "arguments": [1, 2]}</tool_call>'
    )
    assert [call.name for call in found.calls] == ["get_weather"]
    assert len(found.problems) == 2
    assert "not an offered tool" in found.problems[0]
    assert "the arguments of 'search' are a JSON array, not an object" in found.problems[1]


REPAIRS = [
    ('<tool_call>{"name": "search", "arguments": {"query": "x",}}</tool_call>', "trailing comma"),
    ('<tool_call>\n{"name": "search", "arguments": {"query": "x"}\n</tool_call>', "closed 1 bracket"),
    ('{"name": "search", "parameters": {"query": "x"', "closed 2 brackets"),
    ("<tool_call>{'name': 'search', 'arguments': {'query': 'x'}}</tool_call>", "Python literal"),
    ('[TOOL_CALLS]search[ARGS]{"query": "x", "exact": True, "limit": None}', "Python literal"),
    ('<tool_call>{"name": "search", "arguments": {"query": "x", "exact": true,}', "trailing comma, closed 1 bracket"),
]


@pytest.mark.parametrize(("reply", "repair"), REPAIRS)
def test_unambiguous_argument_mistakes_are_repaired(reply: str, repair: str) -> None:
    found = found_every_way(reply)
    assert [call.name for call in found.calls] == ["search"], found.problems
    assert json.loads(found.calls[0].arguments)["query"] == "x"
    assert found.calls[0].repair == repair


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ('<tool_call>{"name": "search", "arguments": {"query": "x" "y"}}</tool_call>', "not JSON"),
        ('<tool_call>{"name": "search", "arguments": {"query": "unterminated}}</tool_call>', "not JSON"),
        ('<tool_call>{"name": "search", "arguments": "just words"}</tool_call>', "arguments of 'search' are not JSON"),
        ('<tool_call>{"name": "search", "arguments": {"q": NaN}}</tool_call>', "arguments of 'search' are not JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', "needs the tool's name"),
        ("<tool_call>\n</tool_call>", "empty"),
        ('[TOOL_CALLS]search {"query": __import__("os")}', "not JSON"),
        ("<|python_tag|>import os; os.system('x')", "not a JSON call"),
        ("<|action_start|><|interpreter|>\nprint(1)<|action_end|>", "code blocks are not run"),
        ("<tool_call>" + '{"name": "search", "arguments": ' + "[" * 300 + "]" * 300 + "}</tool_call>", "array"),
        ('<tool_call>{"name": "search", "arguments": {"q": ' + "[" * 300 + "]" * 300 + "}}</tool_call>", "deeply"),
    ],
)
def test_what_cannot_be_repaired_is_a_one_line_problem(reply: str, why: str) -> None:
    found = found_every_way(reply)
    assert found.calls == ()
    assert len(found.problems) == 1 and why in found.problems[0], found.problems
    assert "\n" not in found.problems[0]
    assert found.text == ""


PROSE = [
    "I could call get_weather to check that for you.",
    'The tool answers with {"name": "get_weather", "arguments": {"city": "Paris"}} as an example.',
    '{"city": "Paris", "temperature": 18}',
    '{"name": "Ada Lovelace", "born": 1815}',
    "[1, 2, 3]",
    "[see the docs](https://example.com) and a < b > c, <b>bold</b>, x[0] = {y}",
    '```json\n{"city": "Paris"}\n```',
    '```python\nprint({"name": "search", "arguments": {}})\n```',
    "Use `<function` tags? No: <function=bad name> is not one.",
    '{"name": "get_weather", "arguments": {"city": "Paris"}} and that is what I would send.',
    "   leading and trailing whitespace stays   \n",
    "",
]


@pytest.mark.parametrize("reply", PROSE)
def test_prose_that_mentions_tools_or_json_is_not_a_call(reply: str) -> None:
    found = found_every_way(reply)
    assert found == TextToolCalls((), reply, ())
    assert not found.found


def test_markup_left_unclosed_by_a_stop_word_runs_to_the_end() -> None:
    found = found_every_way('Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n')
    assert calls_of(found) == [("get_weather", PARIS, "hermes")] and found.text == "Checking."


def test_whitespace_around_markup_collapses_to_the_widest_piece() -> None:
    found = found_every_way(f"  Before.\n\n{HERMES}\n{HERMES}\n\nAfter. \n")
    assert found.text == "  Before.\n\nAfter. \n"  # no markup next to the outer whitespace: kept
    assert found_every_way(f"A{HERMES}B").text == "AB"


def test_qwen3_coder_values_are_typed_by_the_offered_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "metric": {"type": "boolean"},
            "hours": {"type": "array"},
            "zip": {"type": "string"},
            "ratio": {"type": ["number", "null"]},
        },
    }
    reply = (
        "<tool_call><function=get_weather><parameter=city>Paris</parameter><parameter=days>3</parameter>"
        "<parameter=metric>True</parameter><parameter=hours>[9, 12]</parameter><parameter=zip>01234</parameter>"
        "<parameter=ratio>0.5</parameter><parameter=extra>7</parameter></function></tool_call>"
    )
    typed = {"city": "Paris", "days": 3, "metric": True, "hours": [9, 12], "zip": "01234", "ratio": 0.5, "extra": "7"}
    assert calls_of(found_every_way(reply, {"get_weather": schema})) == [("get_weather", typed, "qwen3_coder")]
    spec = {"type": "function", "function": {"name": "get_weather", "parameters": schema}}
    assert calls_of(found_every_way(reply, {"get_weather": spec})) == [("get_weather", typed, "qwen3_coder")]
    as_text = {key: str(value) if key != "hours" else "[9, 12]" for key, value in typed.items()}
    as_text["metric"] = "True"
    assert calls_of(found_every_way(reply)) == [("get_weather", as_text, "qwen3_coder")]  # no schema: text


def test_formats_limit_what_is_looked_for() -> None:
    mistral = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'
    assert found_every_way(mistral, formats=["hermes"]) == TextToolCalls((), mistral, ())
    assert found_every_way(HERMES, formats=["hermes"]).calls[0].name == "get_weather"
    with pytest.raises(UserError, match="did you mean 'mistral'"):
        TextCallStream(OFFERED, formats=["mistrall"])
    with pytest.raises(UserError, match="sequence of format names"):
        find_tool_calls(HERMES, OFFERED, formats="hermes")
    with pytest.raises(UserError, match="by name"):
        find_tool_calls(HERMES, [object()])  # type: ignore[list-item]
    with pytest.raises(UserError, match="collection of tool names"):
        find_tool_calls(HERMES, "get_weather")  # a str is a Collection[str]: refused at run time


def test_a_stream_never_shows_the_start_of_a_marker() -> None:
    for marker in MARKERS:
        stream = TextCallStream(OFFERED)
        shown = stream.feed("Let me check. ")
        for end in range(1, len(marker)):
            shown += stream.feed(marker[end - 1 : end])
            assert shown == "Let me check.", (marker, end, shown)


def test_a_stream_shows_prose_as_soon_as_it_cannot_be_markup() -> None:
    stream = TextCallStream(OFFERED)
    assert stream.feed("Hello") == "Hello"
    assert stream.feed(" <") == ""
    assert stream.feed("b>world") == " <b>world"
    assert stream.feed(HERMES[:30]) == ""
    assert stream.feed(HERMES[30:]) == ""
    assert stream.feed("\n\nBye.") == "\n\nBye."
    rest, found = stream.finish()
    assert rest == "" and found.text == "Hello <b>world\n\nBye." and len(found.calls) == 1


def test_a_reply_that_starts_like_a_json_call_is_held_until_the_end() -> None:
    stream = TextCallStream(OFFERED)
    assert stream.feed('{"city": ') == ""
    assert stream.feed('"Paris"}') == ""
    assert stream.finish() == ('{"city": "Paris"}', TextToolCalls((), '{"city": "Paris"}', ()))


def test_a_finished_stream_refuses_more() -> None:
    stream = TextCallStream(OFFERED)
    stream.finish()
    with pytest.raises(UserError, match="finished"):
        stream.feed("x")
    with pytest.raises(UserError, match="already"):
        stream.finish()


def test_the_docstring_examples_hold() -> None:
    found = find_tool_calls(
        'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        offered=["get_weather"],
    )
    assert found.text == "Let me check."
    assert found.calls[0].name == "get_weather" and found.calls[0].arguments == '{"city": "Paris"}'
    stream = TextCallStream(["get_weather"])
    shown = stream.feed("Checking.") + stream.feed("\n<tool_") + stream.feed('call>{"name": "get_weather", ')
    shown += stream.feed('"arguments": {"city": "Paris"}}</tool_call>')
    rest, result = stream.finish()
    assert shown + rest == result.text == "Checking."
    assert [call.name for call in result.calls] == ["get_weather"]


def test_long_streamed_arguments_are_scanned_once_not_per_delta() -> None:
    arguments = json.dumps({"text": "x{y}[z] " * 4000, "rows": [{"i": i} for i in range(2000)]})
    reply = "[TOOL_CALLS]search[ARGS]" + arguments
    stream = TextCallStream(OFFERED)
    walked = 0
    for index in range(0, len(reply), 3):  # ~18,000 deltas, a closing bracket in most
        stream.feed(reply[index : index + 3])
        walked += 1
    _, found = stream.finish()
    assert json.loads(found.calls[0].arguments) == json.loads(arguments)
    walks = list(stream._scanner._walks.values())  # one resumable walk did all the work
    assert len(walks) == 1 and walks[0].end == len(reply) and walked > 10_000
