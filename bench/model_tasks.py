"""The tool-calling task set of bench/models.py: 40 tasks over five small tools.

* ``simple`` (10): one tool offered, one obvious call; scored on the first reply's call and arguments.
* ``several`` (10): all five tools offered, one fits; scored on the first reply.
* ``parallel`` (5): two calls are needed; scored on the first reply making both (any order).
* ``irrelevant`` (5): tools offered, none fits; scored on the first reply making no call.
* ``end_to_end`` (10): the tools run (deterministic results below), their results go back,
  and the final answer must hold the expected facts.

The tools are plain functions over fixed tables, so every run sees the same results.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

WEATHER = {
    "paris": ("light rain", 18),
    "rome": ("sunny", 24),
    "oslo": ("snow", 3),
    "tokyo": ("cloudy", 21),
    "cairo": ("sunny", 33),
    "london": ("fog", 11),
    "berlin": ("windy", 14),
}
STOCK = {"apples": 42, "bananas": 17, "pears": 8, "plums": 5, "oranges": 0, "lemons": 31}
RATES = {("USD", "EUR"): 0.92, ("EUR", "USD"): 1.09, ("EUR", "JPY"): 160.0, ("GBP", "USD"): 1.27, ("USD", "JPY"): 150.0}
TIMES = {"tokyo": "21:30", "new york": "07:30", "london": "12:30", "sydney": "23:30", "paris": "13:30"}


def _fn(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(properties)},
        },
    }


TOOLS = {
    "get_weather": _fn(
        "get_weather", "The current weather of a city.", {"city": {"type": "string", "description": "the city name"}}
    ),
    "Calculator": _fn(
        "Calculator",
        "Evaluate an arithmetic expression with numbers and + - * / ( ).",
        {"expression": {"type": "string", "description": "the expression, e.g. 2 * (3 + 4)"}},
    ),
    "convert_currency": _fn(
        "convert_currency",
        "Convert an amount of money from one currency to another (ISO codes such as USD, EUR, JPY, GBP).",
        {
            "amount": {"type": "number"},
            "from_currency": {"type": "string", "description": "ISO code of the currency to convert from"},
            "to_currency": {"type": "string", "description": "ISO code of the currency to convert to"},
        },
    ),
    "get_stock": _fn(
        "get_stock",
        "How many units of an item the shop has in stock.",
        {"item": {"type": "string", "description": "the item, plural, e.g. apples"}},
    ),
    "get_time": _fn(
        "get_time", "The current local time in a city.", {"city": {"type": "string", "description": "the city name"}}
    ),
}
ALL = list(TOOLS)

_OPS: dict[type, Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
}


def arithmetic(expression: str) -> float:
    """The value of an expression of numbers, + - * / and brackets; ValueError otherwise."""

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.operand))
        raise ValueError(f"not arithmetic: {ast.dump(node)}")

    try:
        return value(ast.parse(expression.replace("×", "*").replace("^", "**"), mode="eval").body)
    except (SyntaxError, ZeroDivisionError) as exc:
        raise ValueError(str(exc)) from exc


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"


def run_tool(name: str, arguments: dict[str, Any]) -> str:
    """The tool's result as the model sees it (JSON text), or an error text."""
    try:
        if name == "get_weather":
            condition, celsius = WEATHER[str(arguments["city"]).strip().lower()]
            return json.dumps({"city": arguments["city"], "condition": condition, "temperature_c": celsius})
        if name == "Calculator":
            return _number(arithmetic(str(arguments["expression"])))
        if name == "convert_currency":
            pair = (str(arguments["from_currency"]).upper(), str(arguments["to_currency"]).upper())
            return json.dumps({"amount": _number(float(arguments["amount"]) * RATES[pair]), "currency": pair[1]})
        if name == "get_stock":
            return json.dumps({"item": arguments["item"], "in_stock": STOCK[str(arguments["item"]).strip().lower()]})
        if name == "get_time":
            return json.dumps({"city": arguments["city"], "time": TIMES[str(arguments["city"]).strip().lower()]})
    except (KeyError, ValueError, TypeError) as exc:
        return f"error: {type(exc).__name__}: {exc}"
    return f"error: no tool {name!r}"


def same_call(name: str, arguments: dict[str, Any], expected: tuple[str, dict[str, Any]]) -> bool:
    """Whether a call matches the expected one (names exact; text case-insensitive, numbers by value)."""
    want_name, want = expected
    if name != want_name or set(arguments) != set(want):
        return False
    for key, wanted in want.items():
        got = arguments[key]
        if key == "expression":
            try:
                if abs(arithmetic(str(got)) - arithmetic(str(wanted))) > 1e-9:
                    return False
            except ValueError:
                return False
        elif isinstance(wanted, (int, float)):
            try:
                if abs(float(got) - float(wanted)) > 1e-9:
                    return False
            except (TypeError, ValueError):
                return False
        elif str(got).strip().lower() != str(wanted).strip().lower():
            return False
    return True


@dataclass(frozen=True)
class Task:
    """One task: the question, the tools offered, and what counts as right."""

    kind: str
    question: str
    tools: list[str] = field(default_factory=lambda: ALL)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    answer: list[str] = field(default_factory=list)


def _simple(question: str, tool: str, arguments: dict[str, Any]) -> Task:
    return Task("simple", question, [tool], [(tool, arguments)])


def _several(question: str, tool: str, arguments: dict[str, Any]) -> Task:
    return Task("several", question, ALL, [(tool, arguments)])


TASKS: list[Task] = [
    _simple("What's the weather like in Oslo?", "get_weather", {"city": "Oslo"}),
    _simple("Compute 17 * 23 for me.", "Calculator", {"expression": "17 * 23"}),
    _simple(
        "Convert 50 euros to US dollars.",
        "convert_currency",
        {"amount": 50, "from_currency": "EUR", "to_currency": "USD"},
    ),
    _simple("How many lemons do we have in stock?", "get_stock", {"item": "lemons"}),
    _simple("What time is it in Sydney right now?", "get_time", {"city": "Sydney"}),
    _simple("Is it raining in London at the moment?", "get_weather", {"city": "London"}),
    _simple("What is (120 + 80) / 4?", "Calculator", {"expression": "(120 + 80) / 4"}),
    _simple(
        "How much is 20 pounds sterling in US dollars?",
        "convert_currency",
        {"amount": 20, "from_currency": "GBP", "to_currency": "USD"},
    ),
    _simple("Check the stock of oranges, please.", "get_stock", {"item": "oranges"}),
    _simple("Tell me the local time in New York.", "get_time", {"city": "New York"}),
    _several("What's the temperature in Cairo today?", "get_weather", {"city": "Cairo"}),
    _several("Multiply 345 by 12.", "Calculator", {"expression": "345 * 12"}),
    _several(
        "I have 300 US dollars. How many yen is that?",
        "convert_currency",
        {"amount": 300, "from_currency": "USD", "to_currency": "JPY"},
    ),
    _several("Do we still have bananas in stock?", "get_stock", {"item": "bananas"}),
    _several("What's the time in London?", "get_time", {"city": "London"}),
    _several("How's the weather in Berlin?", "get_weather", {"city": "Berlin"}),
    _several("What is 9999 - 1234?", "Calculator", {"expression": "9999 - 1234"}),
    _several(
        "Convert 75 US dollars into euros.",
        "convert_currency",
        {"amount": 75, "from_currency": "USD", "to_currency": "EUR"},
    ),
    _several("How many pears are left?", "get_stock", {"item": "pears"}),
    _several("What time is it in Tokyo?", "get_time", {"city": "Tokyo"}),
    Task(
        "parallel",
        "What's the weather in Paris and in Rome?",
        ALL,
        [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})],
    ),
    Task(
        "parallel",
        "How many apples and how many plums do we have?",
        ALL,
        [("get_stock", {"item": "apples"}), ("get_stock", {"item": "plums"})],
    ),
    Task(
        "parallel",
        "What time is it in Tokyo and in Paris?",
        ALL,
        [("get_time", {"city": "Tokyo"}), ("get_time", {"city": "Paris"})],
    ),
    Task(
        "parallel",
        "Compute 12 * 12 and 15 * 15.",
        ALL,
        [("Calculator", {"expression": "12 * 12"}), ("Calculator", {"expression": "15 * 15"})],
    ),
    Task(
        "parallel",
        "Give me the weather in Oslo and the time in Sydney.",
        ALL,
        [("get_weather", {"city": "Oslo"}), ("get_time", {"city": "Sydney"})],
    ),
    Task("irrelevant", "Write a short poem about the sea."),
    Task("irrelevant", "Who wrote Romeo and Juliet?"),
    Task("irrelevant", "Hi! My name is Ada."),
    Task("irrelevant", "Name three primary colours."),
    Task("irrelevant", "Translate 'good morning' into French."),
    Task("end_to_end", "What is 23 * 47 + 12?", answer=["1093"]),
    Task("end_to_end", "How many apples are in stock?", answer=["42"]),
    Task("end_to_end", "What's the weather in Paris right now?", answer=["18"]),
    Task("end_to_end", "Convert 250 US dollars to euros.", answer=["230"]),
    Task("end_to_end", "What time is it in Tokyo?", answer=["21:30"]),
    Task("end_to_end", "How many bananas do we have?", answer=["17"]),
    Task("end_to_end", "Which is warmer right now, Rome or Oslo?", answer=["rome", "24"]),
    Task("end_to_end", "What is 1234 divided by 2?", answer=["617"]),
    Task("end_to_end", "How much is 100 euros in Japanese yen?", answer=["16000"]),
    Task("end_to_end", "How many pears and how many plums are in stock?", answer=["8", "5"]),
]
assert len(TASKS) == 40
