"""Garbage replies through the function-calling agent's text tool-call layer (issue 37, item 3).

Each reply is made of fragments of every format's markup (whole calls to offered and
unoffered tools, lone and half tags, broken JSON, deep brackets, lone surrogates) and random
text. It goes through a real `FunctionCallingAgent` and a real `StreamingFunctionCallingAgent`
(the model answers it on every turn). For each: nothing raises, a reply message comes back,
every call the agent dispatched names an offered tool, and the streamed agent ends where the
whole one does (same answer, same tools run).

Hypothesis explores ``PLAIT_AGENT_FUZZ`` cases (300 by default, to keep the suite fast);
``PLAIT_AGENT_FUZZ=10000`` is the issue's run of 10,000 replies.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from plait.agents.function_calling import FunctionCallingAgent, StreamingFunctionCallingAgent
from plait.schema import AgentMessage
from plait.testing import FunctionLLM

EXAMPLES = int(os.environ.get("PLAIT_AGENT_FUZZ", "300"))
OFFERED = ("get_weather", "search")
DS = (
    "<\uff5ctool\u2581calls\u2581begin\uff5c>",
    "<\uff5ctool\u2581call\u2581begin\uff5c>",
    "<\uff5ctool\u2581sep\uff5c>",
)

FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
    '<tool_call>{"name": "rm_rf", "arguments": {"path": "/"}}</tool_call>',
    "<function=get_weather>",
    "<function=rm_rf>",
    "<parameter=city>",
    "</parameter>",
    "</function>",
    "<|action_start|>",
    "<|plugin|>",
    "<|action_end|>",
    "<|python_tag|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[TOOL_CALLS]search[ARGS]",
    *DS,
    "<\uff5ctool\u2581call\u2581end\uff5c>",
    "<\uff5ctool\u2581calls\u2581end\uff5c>",
    "```json\n",
    "```",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    '{"name": "rm_rf", "parameters": {"path": "/"}}',
    "{'name': 'search', 'arguments': {'query': True}}",
    '{"name": ',
    '"arguments": ',
    '"get_weather"',
    "search.call(query='x')",
    "rm_rf",
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    ":",
    ",",
    ";",
    "\n",
    " ",
    "<",
    "<|",
    "\\",
    "null",
    "\ud800",
    "9" * 5000,
    "[" * 400,
]

REPLIES = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)), max_size=14).map("".join)


def get_weather(city: str = "") -> str:
    """The weather.

    Args:
        city: the city
    """
    return f"sunny in {city}"


def search(query: str = "") -> str:
    """Search.

    Args:
        query: what to look for
    """
    return f"results for {query}"


def _dispatched(agent: Any) -> list[str]:
    """The names of every call the agent dispatched (its stored tool-call turns)."""
    names = []
    for message in agent.memory.get("fuzz").get_memory():
        calls = message.formatted.get("tool_calls") if isinstance(message.formatted, dict) else None
        names += [call["name"] for call in calls or ()]
        if calls:
            assert all(isinstance(json.loads(call["arguments"]), dict) for call in calls)
    return names


def test_fuzzed_replies_through_the_agent_never_crash_nor_call_an_unoffered_tool() -> None:
    reply = [""]
    counts = {"cases": 0, "calls": 0, "observed": 0}
    whole = FunctionCallingAgent(FunctionLLM(lambda m, p: reply[0]), [get_weather, search], max_turn=3)
    streamed = StreamingFunctionCallingAgent(FunctionLLM(lambda m, p: reply[0]), [get_weather, search], max_turn=3)

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(REPLIES)
    def case(text: str) -> None:
        reply[0] = text
        answer = whole("hi", session_id="fuzz")
        chunks = list(streamed("hi", session_id="fuzz"))
        assert isinstance(answer, AgentMessage) and isinstance(answer.content, str)
        assert chunks[-1].content == answer.content  # streamed or not, the same answer
        assert all(isinstance(chunk.content, str) for chunk in chunks)
        names = _dispatched(whole)
        assert set(names) <= set(OFFERED)
        assert _dispatched(streamed) == names
        counts["cases"] += 1
        counts["calls"] += len(names)
        counts["observed"] += sum(
            m.sender == "ActionExecutor" and not m.extra_info for m in whole.memory.get("fuzz").get_memory()
        )
        whole.reset("fuzz")
        streamed.reset("fuzz")

    case()
    print(f"agent text-call fuzz: {counts}")
    assert counts["cases"] >= EXAMPLES
    # the generator reaches both paths: calls that run, and markup told to the model
    assert counts["calls"] > 0 and counts["observed"] > 0, counts
