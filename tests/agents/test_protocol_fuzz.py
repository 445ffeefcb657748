"""Hostile model replies through every text protocol's whole tool loop (issue 15): never a crash.

A model that answers with fragments of the protocols' own syntax (``Action:``, JSON braces,
InternLM action tokens, ReWOO plans), huge numbers, deep nesting and lone surrogates drives
ReAct (text and JSON), AutoGPT, ConversationalAgent, ReWOO and AgentForInternLM through their
loops. Every call must end with a reply message — an unparsable reply is an observation for
the model, and running out of turns a final answer — and the session must stay usable.
2,000 cases per paradigm by default (10,000 in all); ``PLAIT_FUZZ_EXAMPLES`` scales it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from plait.actions import Calculator
from plait.agents import AgentForInternLM, AutoGPT, ConversationalAgent, ReAct, ReWOO
from plait.schema import AgentMessage
from plait.testing import FunctionLLM

PER_PARADIGM = max(1, int(os.environ.get("PLAIT_FUZZ_EXAMPLES", "10000")) // 5)

FRAGMENTS = [
    "Thought:",
    "Action:",
    "Action Input:",
    "Final Answer:",
    "Observation:",
    "Calculator",
    "Calculator.run",
    '{"name": "Calculator.run", "parameters": {"expression": "1+1"}}',
    '{"action": "Calculator", "action_input": ',
    '"command": {"name": ',
    '"args": {',
    '"thoughts": {"text": "x"}',
    "#E1 = Calculator[1+1]",
    "Plan:",
    "<|action_start|><|plugin|>\n",
    "<|action_start|><|interpreter|>\n",
    "<|action_end|>\n",
    "```json\n",
    "```",
    "{",
    "}",
    "[",
    "]",
    '"',
    ":",
    ",",
    "\n",
    "9" * 5000,
    "[" * 3000,
    "\ud800",
    "\x00",
    "null",
    "finish",
]

REPLIES = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)), max_size=12).map("".join)

PARADIGMS: dict[str, Callable[[Any], Any]] = {
    "react-text": lambda llm: ReAct(llm, [Calculator()], max_turn=3),
    "react-json": lambda llm: ReAct(llm, [Calculator()], output_format="json", max_turn=3),
    "autogpt": lambda llm: AutoGPT(llm, [Calculator()], max_turn=3),
    "conversational": lambda llm: ConversationalAgent(llm, [Calculator()], max_iterations=3),
    "rewoo": lambda llm: ReWOO(llm, [Calculator()], max_turn=3),
    "internlm": lambda llm: AgentForInternLM(llm, plugins=[Calculator()], max_turn=3),
}


@pytest.mark.parametrize("paradigm", sorted(PARADIGMS))
def test_hostile_replies_never_crash_a_text_protocol(paradigm: str) -> None:
    reply: list[str] = [""]
    seen: list[int] = []

    def model(messages: Any, params: Any) -> str:
        seen.append(len(messages))
        return reply[0]

    agent = PARADIGMS[paradigm](FunctionLLM(model))
    examples = PER_PARADIGM if paradigm != "react-json" else max(1, PER_PARADIGM // 4)

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(REPLIES)
    def run(text: str) -> None:
        reply[0] = text
        answer = agent("What is 1+1?", session_id="fuzz")
        assert isinstance(answer, AgentMessage) and isinstance(answer.content, (str, list, dict))
        assert "\ud800" not in str(answer.content)  # cleaned where it entered
        agent.reset("fuzz", recursive=True)

    run()
    assert len(seen) >= examples  # every case reached the model (several calls for most)
