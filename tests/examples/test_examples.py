"""Every script in examples/ runs end to end on a scripted model (no network, no GPU)."""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from plait.llms.response import ModelResponse, ToolCall
from plait.testing import AsyncFunctionLLM, ScriptedLLM
from plait.testing.fake_http import Canned, FakeHTTPServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(EXAMPLES))

    def load(name: str) -> Any:
        sys.modules.pop(name, None)
        return importlib.import_module(name)

    return load


def test_coder(example: Any, capsys: pytest.CaptureFixture[str]) -> None:
    llm = ScriptedLLM(["Compute it.\n```python\nprint(pow(2, 100, 17))\n```\n", "The answer is 16."])
    coder = example("coder").main("What is 2**100 mod 17?", llm=llm)
    steps = coder.state_dict()["agent.memory"]
    assert steps[2]["content"] == "16" and steps[-1]["content"] == "The answer is 16."
    assert "The answer is 16." in capsys.readouterr().out


def test_async_blogger(example: Any) -> None:
    def reply(messages: Any, params: Any) -> str:
        return f"draft {len(messages)}" if "write" in messages[0]["content"] else "needs more depth"

    replies = asyncio.run(example("async_blogger").run(AsyncFunctionLLM(reply), topics=("AI", "Music")))
    assert [r.sender for r in replies] == ["writer", "writer"]


def test_env_checker(example: Any) -> None:
    llm = ScriptedLLM(
        [ModelResponse(tool_calls=[ToolCall("1", "EnvChecker__check_torch_env", "{}")]), "PyTorch: see report."]
    )
    assert example("env_checker").main(llm=llm) == "PyTorch: see report."
    tool_result = llm.calls[1].messages[-1]["content"]
    assert "python:" in tool_result and "torch:" in tool_result


def test_weather_query(example: Any) -> None:
    module = example("weather_query")
    with FakeHTTPServer() as server:
        server.route("GET", "/v2/city/lookup", Canned.json({"code": "200", "location": [{"id": "101010100"}]}))
        now = {"text": "晴", "temp": "6", "feelsLike": "2", "humidity": "30"}
        server.route("GET", "/v7/weather/now", Canned.json({"code": "200", "now": now}))
        tool = module.WeatherQuery(
            key="test-key",
            location_query_url=server.url("/v2/city/lookup"),
            weather_query_url=server.url("/v7/weather/now"),
        )
        llm = ScriptedLLM([ModelResponse(tool_calls=[ToolCall("1", "WeatherQuery", '{"query": "北京"}')]), "Sunny."])
        assert module.main("北京", llm=llm, tool=tool) == "Sunny."
    assert llm.calls[1].messages[-1]["content"] == "晴, 6°C (feels like 2°C), humidity 30%"


def test_payments_asks_before_a_large_payment(example: Any, tmp_path: Path) -> None:
    def turn(name: str, arguments: str) -> ModelResponse:
        return ModelResponse("", [ToolCall(id=f"c-{name}", name=name, arguments=arguments)], "tool_calls")

    script = [
        turn("Payments.pay", '{"to": "bob", "amount": 250}'),
        ModelResponse("Bob was not paid: the transfer was refused.", [], "stop"),
        turn("Payments.pay", '{"to": "ann", "amount": 20}'),
        ModelResponse("Paid 20 EUR to ann.", [], "stop"),
    ]
    asked: list[Any] = []

    def decide(call: Any) -> str:
        asked.append(call)
        return "The user said no."

    payments = example("payments")
    assert payments.main("Pay bob 250", ScriptedLLM(script[:2]), str(tmp_path / "p.db"), decide).startswith("Bob")
    assert [(c.name, c.arguments) for c in asked] == [("Payments.pay", {"to": "bob", "amount": 250})]
    assert payments.main("Pay ann 20", ScriptedLLM(script[2:]), str(tmp_path / "q.db"), decide) == "Paid 20 EUR to ann."
    assert len(asked) == 1  # 20 is under the rule's limit: no question


def test_book_cards(example: Any, capsys: pytest.CaptureFixture[str]) -> None:
    llm = ScriptedLLM(
        [
            '{"title": "Dune", "author": "Frank Herbert", "year": "sixty-five"}',  # invalid: sent back
            '{"title": "Dune", "author": "Frank Herbert", "year": 1965}',
        ]
    )
    (card,) = example("book_cards").main(["Dune"], llm=llm)
    assert (card.title, card.year) == ("Dune", 1965)
    assert "year" in llm.calls[1].messages[-1]["content"]  # the error named the field
    assert "Dune | Frank Herbert | 1965" in capsys.readouterr().out
