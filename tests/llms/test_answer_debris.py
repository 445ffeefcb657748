"""Issue 34: after a tool result, an embedded model's answer is never a bare ``{`` or other JSON debris.

Qwen2.5-Coder-0.5B asked for the answer after a JSON weather result (``tool_choice='none'``,
constrained to ``{"answer": "..."}``) starts writing JSON inside the answer string; the grammar
ends the string at its first quote and the answer was ``{``. Such a fragment now makes the
engine ask once more, in plain words.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_llama_cpp import WEATHER, FakeServer, _with_fake_engine

from _support import resolve
from plait.llms._llama_tools import PLAIN_ANSWER, is_json_debris


@pytest.fixture
def fake_model(tmp_path: Path, mode: str) -> Iterator[tuple[Any, FakeServer]]:
    """An embedded model over a scripted engine (sync or async, as `mode` says)."""
    model, server = _with_fake_engine(mode, tmp_path)
    yield model, server
    model.close()


AFTER_TOOL = [
    {"role": "user", "content": "What's the weather in Paris right now?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c0", "content": '{"city": "Paris", "temperature_c": 18, "condition": "rain"}'},
]


@pytest.mark.parametrize("text", ["{", "[", '{"city": "Par', '[{"a": 1}, ', "  {  "])
def test_fragments_of_json_are_debris(text: str) -> None:
    assert is_json_debris(text)


@pytest.mark.parametrize("text", ["", "18", "true", '{"a": 1}', "[1, 2]", "It rains in Paris.", "{Paris} is wet"])
def test_answers_and_whole_values_are_not(text: str) -> None:
    assert is_json_debris(text) is (text == "{Paris} is wet")  # a brace that starts no JSON is debris too


def test_a_debris_answer_after_a_tool_result_is_asked_again_in_words(fake_model: tuple[Any, FakeServer]) -> None:
    model, server = fake_model
    server.replies = [json.dumps({"answer": "{"}), "It is 18 C and raining in Paris."]
    response = resolve(model.complete(AFTER_TOOL, tools=[WEATHER], tool_choice="none"))
    assert response.content == "It is 18 C and raining in Paris." and not response.tool_calls
    assert len(server.requests) == 2 and "json_schema" in server.requests[0]
    assert server.requests[1]["messages"][-1] == {"role": "user", "content": PLAIN_ANSWER}
    assert "json_schema" not in server.requests[1]


def test_a_whole_answer_is_kept(fake_model: tuple[Any, FakeServer]) -> None:
    model, server = fake_model
    server.replies = [json.dumps({"answer": "18"})]
    assert resolve(model.complete(AFTER_TOOL, tools=[WEATHER], tool_choice="none")).content == "18"
    assert len(server.requests) == 1


@pytest.mark.slow
@pytest.mark.big_model
def test_the_0_5b_weather_answer_is_words_not_a_brace(tmp_path: Path) -> None:
    """Needs ``pip install "plait[qwen2-5-coder-0-5b]"``: fails with that command when it is missing."""
    from plait.actions import BaseAction, tool_api
    from plait.agents import FunctionCallingAgent
    from plait.exceptions import ModelNotInstalledError
    from plait.llms.llama_cpp import LlamaCppModel

    class Weather(BaseAction):
        """Weather service."""

        @tool_api
        def now(self, city: str) -> str:
            """The current weather of a city.

            Args:
                city (str): the city name
            """
            return json.dumps({"city": city, "temperature_c": 18, "condition": "light rain"})

    try:
        llm = LlamaCppModel(model="qwen2.5-coder-0.5b", temperature=0, max_new_tokens=128)
    except ModelNotInstalledError as exc:
        pytest.fail(f"the 0.5B model is not installed: {exc}")
    try:
        agent = FunctionCallingAgent(llm, [Weather()], max_turn=2, tool_choice="required")
        answer = agent("What's the weather in Paris right now?").content
        assert not is_json_debris(answer) and "rain" in answer.lower(), answer
    finally:
        llm.close()
