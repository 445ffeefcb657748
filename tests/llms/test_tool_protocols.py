"""Issue 34 item 2: the embedded engine's two tool protocols, plait's ``'json'`` and the model's own ``'template'``.

Under ``tool_protocol='template'`` the model's chat template (Qwen2.5's here, from
tests/fixtures/templates/qwen2.5.jinja) shows the tools, calls and results, and the reply is
decoded under a grammar of ``<tool_call>{...}</tool_call>`` lines (parallel calls) or a text
answer that cannot start as JSON or markup.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_llama_cpp import WEATHER, FakeServer, _with_fake_engine, local_model_available

from _support import resolve
from plait.exceptions import ParseError, UserError
from plait.llms._llama_protocols import MAX_PARALLEL_CALLS, JsonProtocol, TemplateProtocol, check_tool_protocol
from plait.llms._llama_tools import InvalidToolReply, ToolPlan
from plait.llms.llama_cpp import LlamaCppModel

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QWEN = (FIXTURES / "templates" / "qwen2.5.jinja").read_text()
TOOLS_TEMPLATE = (FIXTURES / "llama_server" / "chatml_tools.jinja").read_text()
CALCULATOR = {
    "type": "function",
    "function": {
        "name": "Calculator",
        "description": "Evaluate arithmetic",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    },
}
PARIS = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
ROME = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>'


def protocol() -> TemplateProtocol:
    return TemplateProtocol(QWEN, "", "<|im_end|>")


def test_the_template_shows_tools_calls_and_results_in_its_own_words() -> None:
    plan = ToolPlan([WEATHER, CALCULATOR])
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c0", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}],
        },
        {"role": "tool", "tool_call_id": "c0", "content": '{"condition": "rain"}'},
    ]
    prompt = protocol().prompt(plan, messages)
    assert isinstance(prompt, str)
    assert "<tools>" in prompt and '"name": "get_weather"' in prompt and '"name": "Calculator"' in prompt
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in prompt
    assert '<tool_response>\n{"condition": "rain"}\n</tool_response>' in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


@pytest.mark.parametrize(
    ("choice", "calls", "answer"),
    [
        ("auto", ["get_weather", "Calculator"], True),
        ("required", ["get_weather", "Calculator"], False),
        ("Calculator", ["Calculator"], False),
        ("none", [], True),
    ],
)
def test_the_grammar_allows_what_tool_choice_allows(choice: str, calls: list[str], answer: bool) -> None:
    grammar = str(protocol().constraint(ToolPlan([WEATHER, CALCULATOR], choice))["grammar"])
    assert grammar.startswith("%llguidance {}\n")
    start = grammar.splitlines()[1]
    assert ("calls" in start) == bool(calls) and ("answer" in start) == answer
    for name in ["get_weather", "Calculator"]:
        assert (f'"const": "{name}"' in grammar) == (name in calls)
    if calls:
        assert f"{{0,{MAX_PARALLEL_CALLS - 1}}}" in grammar  # parallel calls, capped
        assert '"whitespace_flexible": false' in grammar  # one line, as the template writes calls


def test_a_typed_answer_is_held_to_its_schema() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    grammar = str(protocol().constraint(ToolPlan([WEATHER], "none", schema))["grammar"])
    assert f"answer: %json {json.dumps(schema)}" in grammar
    assert protocol().parse(ToolPlan([WEATHER], "none", schema), '{"n": 3}') == '{"n": 3}'


def test_replies_parse_to_calls_or_an_answer() -> None:
    plan = ToolPlan([WEATHER, CALCULATOR])
    calls = protocol().parse(plan, f"{PARIS}\n{ROME}\n{PARIS}")
    assert isinstance(calls, list)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Rome"}),
    ]  # the repeated Paris call is made once
    assert len({c.id for c in calls}) == 2
    assert protocol().parse(plan, "It is sunny.") == "It is sunny."


@pytest.mark.parametrize(
    "reply",
    [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',  # cut off
        '<tool_call>\n{"name": "launch", "arguments": {}}\n</tool_call>',  # not offered
        '<tool_call>\n{"name": "get_weather", "arguments": {"town": "Paris"}}\n</tool_call>',  # wrong argument
        "<tool_call>\n[1, 2]\n</tool_call>",
    ],
)
def test_broken_calls_are_invalid(reply: str) -> None:
    with pytest.raises(InvalidToolReply):
        protocol().parse(ToolPlan([WEATHER]), reply)


def test_a_required_call_is_not_an_answer() -> None:
    with pytest.raises(InvalidToolReply):
        protocol().parse(ToolPlan([WEATHER], "required"), "It is sunny.")


def test_streamed_answer_text_never_shows_markup() -> None:
    assert protocol().answer_so_far("<tool_call>\n{") is None
    assert protocol().answer_so_far("Rain") == "Rain"
    assert JsonProtocol().answer_so_far('{"answer": "Ra') == "Ra"


def test_a_template_without_tool_call_syntax_is_refused() -> None:
    with pytest.raises(UserError, match="tool_protocol='json'"):
        TemplateProtocol("{% for m in messages %}{{ m.content }}{% endfor %}")


def test_a_misspelt_protocol_names_the_closest(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="did you mean 'template'"):
        check_tool_protocol("templte")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(UserError, match="did you mean 'json'"):
        LlamaCppModel(path=str(gguf), tool_protocol="jsn")
    assert LlamaCppModel(path=str(gguf)).tool_protocol == "json"


@pytest.fixture
def template_model(tmp_path: Path, mode: str) -> Iterator[tuple[Any, FakeServer]]:
    """An embedded model over a scripted engine, under the template protocol with Qwen2.5's template."""
    model, server = _with_fake_engine(mode, tmp_path)
    model.tool_protocol = "template"
    model._protocol = protocol()
    yield model, server
    model.close()


def test_parallel_calls_come_back_as_one_response(template_model: tuple[Any, FakeServer]) -> None:
    model, server = template_model
    server.replies = [f"{PARIS}\n{ROME}"]
    response = resolve(model.complete([{"role": "user", "content": "Paris and Rome?"}], tools=[WEATHER]))
    assert [json.loads(c.arguments)["city"] for c in response.tool_calls] == ["Paris", "Rome"]
    request = server.requests[0]
    assert request["prompt"].startswith("<|im_start|>system\n") and "messages" not in request
    assert request["grammar"].startswith("%llguidance")
    assert "json_schema" not in request


def test_a_cut_off_call_is_tried_again(template_model: tuple[Any, FakeServer]) -> None:
    model, server = template_model
    server.replies = [(PARIS[:30], "length"), PARIS]
    response = resolve(model.complete([{"role": "user", "content": "Paris?"}], tools=[WEATHER], tool_choice="required"))
    assert [c.name for c in response.tool_calls] == ["get_weather"]
    assert len(server.requests) == 2 and server.requests[1]["max_tokens"] > server.requests[0]["max_tokens"]


def test_no_valid_required_call_is_a_parse_error(template_model: tuple[Any, FakeServer]) -> None:
    model, server = template_model
    server.replies = [(PARIS[:30], "length")] * 3
    with pytest.raises(ParseError):
        resolve(model.complete([{"role": "user", "content": "Paris?"}], tools=[WEATHER], tool_choice="required"))


@pytest.mark.skipif(not local_model_available(), reason="the default model is installed by the test setup")
def test_the_real_engine_decodes_a_template_call(mode: str) -> None:
    """SmolLM2 with a ChatML template that has a tools section: the grammar makes a valid call."""
    cls: Any = LlamaCppModel if mode == "sync" else __import__("plait.llms", fromlist=["x"]).AsyncLlamaCppModel
    model = cls(chat_template=TOOLS_TEMPLATE, tool_protocol="template", temperature=0, max_new_tokens=64)
    try:
        question = [{"role": "user", "content": "What is the weather in Paris?"}]
        response = resolve(model.complete(question, tools=[WEATHER, CALCULATOR], tool_choice="required"))
        assert response.tool_calls and {c.name for c in response.tool_calls} <= {"get_weather", "Calculator"}
        for call in response.tool_calls:
            assert isinstance(json.loads(call.arguments), dict)
    finally:
        model.close()


def test_the_answer_turn_shows_no_tools() -> None:
    """Shown tools, the 0.5B answered a weather result with ``({"name": "get_weather", ...`` (bench/models.py)."""
    question = [{"role": "user", "content": "Weather in Paris?"}]
    assert "<tools>" in str(protocol().prompt(ToolPlan([WEATHER]), question))
    assert "<tools>" not in str(protocol().prompt(ToolPlan([WEATHER], "none"), question))


def test_a_call_written_as_text_is_a_call_where_calls_may_be_made() -> None:
    reply = 'Here is the call:\n```json\n{"name": "Calculator", "arguments": {"expression": "2+2"}}\n```'
    calls = protocol().parse(ToolPlan([WEATHER, CALCULATOR]), reply)
    assert isinstance(calls, list) and [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("Calculator", {"expression": "2+2"})
    ]


@pytest.mark.parametrize(
    "reply",
    [
        '({"name": "Calculator", "arguments": {"expression": "1093"}}',
        'Sure:\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
    ],
)
def test_a_call_written_into_an_answer_is_invalid(reply: str) -> None:
    with pytest.raises(InvalidToolReply, match="written into the answer"):
        protocol().parse(ToolPlan([WEATHER, CALCULATOR], "none"), reply)
    assert protocol().parse(ToolPlan([WEATHER], "none"), "It is 18 degrees.") == "It is 18 degrees."


def test_each_catalogue_model_has_its_measured_protocol() -> None:
    from plait.llms.catalogue import get_model

    assert get_model("smollm2-135m").tool_protocol == "json"  # its template has no tool syntax
    assert get_model("qwen2.5-coder-0.5b").tool_protocol == "template"
    assert get_model("qwen2.5-coder-1.5b").tool_protocol == "template"
