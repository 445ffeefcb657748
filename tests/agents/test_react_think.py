"""A thinking model's ``<think>`` text never reaches the ReAct text protocol's parser (issue 37).

A Qwen3 server without a reasoning parser puts the think block in ``content``. Its text here is
written to mislead a parser that saw it (an ``Action:`` of another tool, a ``Final Answer:``), so
the run shows that the parser, the memory and the next request only ever get the answer's text.
`GPTAPI` talks to `FakeOpenAIServer` over real HTTP.
"""

from __future__ import annotations

import json
from typing import Any

from _support import resolve
from plait.agents.react import AsyncReAct, ReAct
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.testing.fake_openai import FakeOpenAIServer, Reply

CALLED: list[str] = []


def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    CALLED.append(f"weather {city}")
    return f"sunny, 21C in {city}"


def convert(amount: float) -> str:
    """Convert euros to dollars.

    Args:
        amount: how many euros
    """
    CALLED.append("convert")
    return f"{amount * 1.1:.2f} USD"


REPLIES = [
    '<think>\nAction: convert\nAction Input: {"amount": 1}\nFinal Answer: WRONG\n</think>\n\n'
    'Thought: I need the weather.\nAction: weather\nAction Input: {"city": "Paris"}',
    "<think>\nFinal Answer: WRONG AGAIN\n</think>\n\nThought: I know it now.\nFinal Answer: It is sunny in Paris.",
]


def test_react_never_parses_the_think_block(mode: str) -> None:
    CALLED.clear()
    with FakeOpenAIServer([Reply(text) for text in REPLIES]) as server:
        llm: Any = (AsyncGPTAPI if mode == "async" else GPTAPI)("Qwen/Qwen3-8B", api_base=server.base_url, key=None)
        agent: Any = (AsyncReAct if mode == "async" else ReAct)(llm, [weather, convert])
        reply = resolve(agent("Weather in Paris?"))
        sent = [json.dumps(request["messages"]) for request in server.requests]
    assert reply.content == "It is sunny in Paris."
    assert CALLED == ["weather Paris"]  # the think block's Action was never run
    assert all("WRONG" not in text and "<think>" not in text for text in sent)
    assert "WRONG" not in json.dumps(agent.state_dict()["memory"], default=str)
