"""OpenRouter's ``reasoning_details`` (issue 37): read whole or from fragments, kept opaque, sent back unchanged.

OpenRouter (https://openrouter.ai/docs/use-cases/reasoning-tokens) returns a reasoning model's
thinking twice: as text in ``reasoning`` and as a ``reasoning_details`` array of items
(``reasoning.text`` with an optional ``signature``, ``reasoning.summary``, ``reasoning.encrypted``
with opaque ``data``), streamed as fragments that share an ``index``. Some models need the array
of a tool-call turn passed back unchanged in the next request. The three-turn tool loops on its wire
format are in test_reasoning_fixtures.py; these pin the pieces.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from plait.llms import GPTAPI
from plait.llms._openai_protocol import StreamAccumulator, build_payload, parse_completion
from plait.llms.profiles import PROFILES, profile_for
from plait.schema import AgentMessage, Reasoning

SUMMARY = {"type": "reasoning.summary", "summary": "Look it up.", "format": "openai-responses-v1", "index": 0}
SECRET = {
    "type": "reasoning.encrypted",
    "data": "gAAAA+opaque==",
    "id": "rs_1",
    "format": "openai-responses-v1",
    "index": 1,
}
ITEMS = [SUMMARY, SECRET]


def test_openrouters_url_chooses_its_profile_whatever_the_model() -> None:
    for url in ("https://openrouter.ai/api/v1", "https://eu.openrouter.ai/api/v1/chat/completions"):
        assert profile_for("anthropic/claude-sonnet-4", server=url) is PROFILES["openrouter"]
    assert profile_for("anthropic/claude-sonnet-4", server="https://notopenrouter.ai/v1").family == "claude"
    llm = GPTAPI("deepseek/deepseek-r1", api_base="https://openrouter.ai/api/v1", key=None)
    assert (llm.profile.family, llm.profile.reasoning_replay) == ("openrouter", "field")
    llm.close()


def test_a_whole_reply_keeps_the_items_and_reads_their_text_when_no_field_carries_it() -> None:
    message = {"role": "assistant", "content": "Hi!", "reasoning": "Look it up.", "reasoning_details": ITEMS}
    response = parse_completion({"choices": [{"message": message, "finish_reason": "stop"}]})
    assert response.content == "Hi!"
    assert response.reasoning is not None and response.reasoning.text == "Look it up."
    assert json.loads(response.reasoning.details or "") == ITEMS
    bare = {"role": "assistant", "content": "Hi!", "reasoning_details": ITEMS}  # no `reasoning` text beside them
    reasoning = parse_completion({"choices": [{"message": bare}]}).reasoning
    assert reasoning is not None and reasoning.text == "Look it up."


def test_streamed_fragments_merge_into_the_items_a_whole_reply_carries() -> None:
    claude = {"type": "reasoning.text", "text": "", "signature": "", "format": "anthropic-claude-v1", "index": 0}
    deltas: list[dict[str, Any]] = [
        {"reasoning_details": [claude]},
        {"reasoning_details": [{"type": "reasoning.text", "text": "Call ", "index": 0}]},
        {"reasoning_details": [{"type": "reasoning.text", "text": "the tool.", "index": 0}]},
        {"reasoning_details": [{"type": "reasoning.text", "signature": "sig==", "index": 0}]},
        {"content": "Hi!"},
    ]
    acc = StreamAccumulator()
    shown = []
    for delta in deltas:
        acc.feed({"choices": [{"index": 0, "delta": delta}]})
        shown.append(acc.reasoning)
    assert shown == ["", "Call ", "Call the tool.", "Call the tool.", "Call the tool."]  # streamed as it came
    reasoning = acc.response().reasoning
    assert reasoning is not None and reasoning.text == "Call the tool."
    assert json.loads(reasoning.details or "") == [{**claude, "text": "Call the tool.", "signature": "sig=="}]


@pytest.mark.parametrize("junk", [None, "text", 3, {"type": "reasoning.text"}, [1, "x", None], []])
def test_junk_reasoning_details_are_ignored(junk: object) -> None:
    message = {"role": "assistant", "content": "Hi!", "reasoning": "Greet.", "reasoning_details": junk}
    assert parse_completion({"choices": [{"message": message}]}).reasoning == Reasoning("Greet.")
    acc = StreamAccumulator()
    acc.feed({"choices": [{"index": 0, "delta": message}]})
    assert acc.response().reasoning == Reasoning("Greet.")


CALL = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}


def _sent(reasoning: Reasoning, replay: Any, field: str | None) -> dict[str, object]:
    history = [
        {"role": "user", "content": "Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL], "reasoning": reasoning.to_wire()},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    messages = build_payload("m", history, {}, reasoning_replay=replay, reasoning_field=field)["messages"]
    assert isinstance(messages, list)
    turn: dict[str, object] = messages[1]
    return turn


def test_the_items_go_back_unchanged_under_field_replay_and_never_otherwise() -> None:
    reasoning = Reasoning("Look it up.", details=json.dumps(ITEMS))
    assert _sent(reasoning, "field", "reasoning_details")["reasoning_details"] == ITEMS
    assert "reasoning" not in _sent(reasoning, "field", "reasoning_details")  # nothing beside the items
    assert _sent(reasoning, "field", "reasoning_content")["reasoning_details"] == ITEMS  # the items win
    assert "reasoning_content" not in _sent(reasoning, "field", "reasoning_content")
    for replay in ("drop", "tags"):
        assert "reasoning_details" not in _sent(reasoning, replay, "reasoning_details")
    text_only = _sent(Reasoning("Look it up."), "field", "reasoning_details")  # no items: nothing to send
    assert not set(text_only) & {"reasoning_details", "reasoning"}
    corrupt = _sent(Reasoning("Look it up.", details="{not json"), "field", "reasoning_details")
    assert "reasoning_details" not in corrupt  # an edited state file sends nothing rather than crash


def test_the_items_survive_a_message_dump_and_load() -> None:
    reasoning = Reasoning("Look it up.", details=json.dumps(ITEMS))
    assert Reasoning.from_wire(json.loads(json.dumps(reasoning.to_wire()))) == reasoning
    message = AgentMessage(sender="agent", content="Hi!", reasoning=reasoning)
    assert AgentMessage.model_validate_json(message.model_dump_json()).reasoning == reasoning
