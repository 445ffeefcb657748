"""Stream items of `GPTAPI`/`AsyncGPTAPI` carry the native tool calls being written (`ToolCallsSoFar`).

With ``tools=``, an item whose call grew carries every call so far (id, name, arguments text
so far) and the reasoning so far; the text never holds the call's JSON. A stream cut while a
call was being written and retried only ever extends what was shown: the repeated part is
held back, and a retry whose call differs is an `LLMConnectionError`, as for text.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from _support import collect
from plait.exceptions import LLMConnectionError
from plait.llms._openai_core import _held_back
from plait.llms.response import ModelResponse, ToolCallsSoFar
from plait.schema import ModelStatusCode, Reasoning
from plait.testing.fake_openai import RawSSE, Reply

HI = [{"role": "user", "content": "Weather in Oslo?"}]
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
ARGS = '{"city": "Oslo"}'


def sse(*deltas: dict[str, Any], finish: str | None = None, done: bool = False) -> str:
    """An SSE transcript of chat-completion chunks with `deltas` (cut off unless `done`)."""
    chunks = [{"choices": [{"index": 0, "delta": delta, "finish_reason": None}]} for delta in deltas]
    if finish:
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    text = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks)
    return text + ("data: [DONE]\n\n" if done else "")


def call_delta(arguments: str, head: bool = False) -> dict[str, Any]:
    call: dict[str, Any] = {"index": 0, "function": {"arguments": arguments}}
    if head:
        call.update(id="call_a", type="function", function={"name": "weather", "arguments": arguments})
    return {"tool_calls": [call]}


def calls_of(items: list[Any]) -> list[tuple[str, str, str]]:
    """Each streaming item's first call so far, as (id, name, arguments)."""
    out = []
    for status, text, extra in items:
        if status != ModelStatusCode.END and isinstance(extra, ToolCallsSoFar):
            assert "city" not in text
            (call,) = extra.tool_calls
            out.append((call.id, call.name, call.arguments))
    return out


def test_items_carry_the_calls_and_the_reasoning_so_far(mode: str, fake_server: Any, make_llm: Any) -> None:
    transcript = sse(
        {"role": "assistant", "reasoning_content": "Need the "},
        {"reasoning_content": "weather."},
        call_delta("", head=True),
        call_delta('{"city": '),
        call_delta('"Oslo"}'),
        finish="tool_calls",
        done=True,
    )
    items = collect(make_llm(fake_server([RawSSE(transcript)])).stream_chat(HI, tools=TOOLS))
    assert calls_of(items) == [
        ("call_a", "weather", ""),
        ("call_a", "weather", '{"city": '),
        ("call_a", "weather", ARGS),
    ]
    reasoning = [extra.reasoning if isinstance(extra, ToolCallsSoFar) else extra for _, _, extra in items[:-1]]
    assert reasoning[-1] == Reasoning("Need the weather.")  # still carried beside the calls
    status, text, response = items[-1]
    assert status == ModelStatusCode.END and text == "" and isinstance(response, ModelResponse)
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [("call_a", "weather", ARGS)]


def test_a_stream_without_tools_keeps_its_items(mode: str, fake_server: Any, make_llm: Any) -> None:
    items = collect(make_llm(fake_server([Reply("It is sunny.")])).stream_chat(HI))
    assert all(extra is None for _, _, extra in items[:-1])


def test_cut_while_writing_a_call_then_the_same_call_only_grows(mode: str, fake_server: Any, make_llm: Any) -> None:
    cut = sse({"role": "assistant"}, call_delta("", head=True), call_delta('{"city": '), call_delta('"Os'))
    server = fake_server([RawSSE(cut), Reply(tool_calls=[("weather", ARGS)])])
    items = collect(make_llm(server).stream_chat(HI, tools=TOOLS))
    assert len(server.requests) == 2
    arguments = [arguments for _, _, arguments in calls_of(items)]
    assert arguments[:3] == ["", '{"city": ', '{"city": "Os']  # the first attempt's, before the cut
    assert all(b.startswith(a) and b != a for a, b in itertools.pairwise(arguments))  # then only more
    assert arguments[-1] == ARGS and items[-1][2].tool_calls[0].arguments == ARGS


def test_cut_while_writing_a_call_then_another_call_is_a_connection_error(
    mode: str, fake_server: Any, make_llm: Any
) -> None:
    cut = sse({"role": "assistant"}, call_delta("", head=True), call_delta('{"city": "Os'))
    server = fake_server([RawSSE(cut), Reply(tool_calls=[("weather", '{"city": "Bergen"}')])])
    with pytest.raises(LLMConnectionError, match="retried answer differs"):
        collect(make_llm(server).stream_chat(HI, tools=TOOLS))
    assert len(server.requests) == 2


def test_held_back_rule_on_text_and_calls() -> None:
    shown = ("Checking.", "weather", '{"city": "Os')
    assert _held_back(shown, ("Checking.",)) is True  # no call yet: behind
    assert _held_back(shown, ("Checking.", "weather", '{"ci')) is True
    assert _held_back(shown, shown) is True
    assert _held_back(shown, ("Checking.", "weather", '{"city": "Oslo"}')) is False
    assert _held_back(shown, ("Checking. More", "weather", '{"ci')) is True  # ahead in one part, behind in another
    assert _held_back(shown, ("Checking.", "weather", '{"city": "Be')) is None
    assert _held_back(shown, ("Checking.", "search", "")) is None
