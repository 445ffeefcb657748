"""Issue 34: the routed tool choice reads every offered tool, not only the Calculator.

Qwen2.5-Coder-1.5B under ``'auto'`` answered "How many bananas do we have?" by asking the user
for the number, and "How many pears and how many plums are in stock?" after the pears alone
(bench/models.py). A routed agent now requires a tool when the question uses a tool's own
words, and requires the tools once more when a later part of the question has no call yet.
Small talk with only the Calculator still gets ``'none'``. Scripted models, sync and async
from one body (the `mode` fixture).
"""

from __future__ import annotations

import json
from typing import Any

from _support import resolve
from plait.actions import BaseAction, tool_api
from plait.agents import AsyncFunctionCallingAgent, FunctionCallingAgent
from plait.agents.routing import ToolRouter
from plait.llms.response import ModelResponse, ToolCall
from plait.testing import scripted_llm

SMALL_TALK = ("Write a short poem about the sea.", "Name three colours.", "My name is Ada.")


class Shop(BaseAction):
    """The shop's records."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    @tool_api
    def stock(self, item: str) -> str:
        """How many units of an item the shop has in stock.

        Args:
            item (str): the item, plural
        """
        self.asked.append(item)
        return json.dumps({"item": item, "in_stock": len(item)})

    @tool_api
    def weather(self, city: str) -> str:
        """The current weather of a city.

        Args:
            city (str): the city
        """
        return json.dumps({"city": city, "temperature_c": 20})


def _calls(*items: str) -> ModelResponse:
    calls = [ToolCall(f"c{item}", "Shop.stock", json.dumps({"item": item})) for item in items]
    return ModelResponse(tool_calls=calls)


def _agent(mode: str, script: list[Any]) -> Any:
    cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
    return cls(scripted_llm(script, mode), [Shop()], max_turn=5, tool_choice="routed")


def _choices(agent: Any) -> list[Any]:
    return [call.params.get("tool_choice") for call in agent.llm.calls]


def test_a_question_in_a_tools_own_words_requires_a_tool(mode: str) -> None:
    agent = _agent(mode, [_calls("bananas"), "We have 7 bananas."])
    reply = resolve(agent("How many bananas do we have?"))  # "how many": the stock tool's description
    assert reply.content == "We have 7 bananas."
    assert _choices(agent) == ["required", "auto"]  # forced once; after the result the model may answer
    assert agent.executor.actions["Shop"].asked == ["bananas"]


def test_a_part_of_the_question_without_a_call_requires_the_tools_again(mode: str) -> None:
    script = [_calls("pears"), _calls("plums"), "5 pears and 5 plums."]
    agent = _agent(mode, script)
    reply = resolve(agent("How many pears and how many plums are in stock?"))
    assert reply.content == "5 pears and 5 plums."
    assert agent.executor.actions["Shop"].asked == ["pears", "plums"]
    assert _choices(agent) == ["required", "required", "auto"]


def test_the_tools_are_required_again_once_per_round_of_new_calls(mode: str) -> None:
    """A model that repeats its call when pressed is not pressed again: the answer is asked for."""
    agent = _agent(mode, [_calls("pears"), _calls("pears"), "Only pears: 5."])
    reply = resolve(agent("How many pears and how many plums are in stock?"))
    assert reply.content == "Only pears: 5." and agent.executor.actions["Shop"].asked == ["pears"]
    assert _choices(agent) == ["required", "required", "none"]


def test_a_covered_question_is_not_pressed(mode: str) -> None:
    agent = _agent(mode, [_calls("pears"), "5 pears."])
    resolve(agent("How many pears are in stock?"))
    assert _choices(agent) == ["required", "auto"]
    agent = _agent(
        mode,
        [
            ModelResponse(
                tool_calls=[
                    ToolCall("a", "Shop.weather", '{"city": "Rome"}'),
                    ToolCall("b", "Shop.weather", '{"city": "Oslo"}'),
                ]
            ),
            "Rome.",
        ],
    )
    resolve(agent("Which is warmer right now, Rome or Oslo?"))  # the first part asks about the results
    assert _choices(agent) == ["auto", "auto"]  # no tool's words: the model decides, and is not pressed


def test_small_talk_still_reaches_no_tool() -> None:
    router = ToolRouter()
    for question in SMALL_TALK:
        assert router(question, ["Calculator"]) == "none", question
    assert router("What is 37 * 91?", ["Calculator"]) == "required"
    shop = FunctionCallingAgent(scripted_llm([]), [Shop()]).executor
    tools, names = shop.openai_tools(), list(shop.keys())
    for question in (*SMALL_TALK, "Who wrote Romeo and Juliet?", "Translate 'good morning' into French."):
        assert router(question, names, tools) == "auto", question  # the model may still decide
    assert router("What's the weather in Oslo?", names, tools) == "required"  # a word of the tool's name
    assert router("Is it sunny?", names) == "auto"  # names alone: only their words count
