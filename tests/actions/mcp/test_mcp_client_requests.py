"""A server's elicitation and sampling requests while a tool runs (asking_server.py, official SDK, stdio).

Every behaviour runs in sync (`MCPToolkit`) and async (`AsyncMCPToolkit`) mode from one body.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from _support import resolve
from plait.actions.mcp import Elicitation, MCPToolkit, Sampling
from plait.exceptions import UserError
from plait.schema import ActionStatusCode
from plait.testing import ScriptedLLM

ASKING = str(Path(__file__).with_name("asking_server.py"))


@pytest.fixture
def asking(make_toolkit: Callable[..., MCPToolkit], tmp_path: Path) -> Callable[..., tuple[MCPToolkit, Path]]:
    """``asking(**kwargs)``: a toolkit on the asking server, and the file its bookings are written to."""
    bookings = tmp_path / "bookings.txt"

    def make(**kwargs: Any) -> tuple[MCPToolkit, Path]:
        return make_toolkit(args=[ASKING], env={"BOOKINGS": str(bookings)}, **kwargs), bookings

    return make


def _text(result: Any) -> str:
    return "\n".join(str(item["content"]) for item in result.result or []) or str(result.errmsg)


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        ({"action": "accept", "content": {"guests": 4, "vegetarian": True}}, 'accept {"guests":4,"vegetarian":true}'),
        ("decline", "decline"),
        ("cancel", "cancel"),
    ],
)
def test_each_elicitation_answer_reaches_the_server_once(
    asking: Callable[..., tuple[MCPToolkit, Path]], answer: object, outcome: str
) -> None:
    asked: list[Elicitation] = []

    def elicit(question: Elicitation) -> object:
        asked.append(question)
        return answer

    toolkit, bookings = asking(elicit=elicit)
    assert _text(resolve(toolkit({"table": "7"}, "book"))) == outcome
    [question] = asked
    assert question.message == "How many guests at table 7?" and question.server == "asking-server"
    properties = question.requested_schema["properties"]
    assert isinstance(properties, dict) and set(properties) == {"guests", "vegetarian"}
    assert bookings.read_text().splitlines() == [f"7: {outcome}"]  # the call ran exactly once


def test_an_answer_that_does_not_fit_the_schema_is_not_sent(asking: Callable[..., tuple[MCPToolkit, Path]]) -> None:
    toolkit, bookings = asking(elicit=lambda question: {"action": "accept", "content": {"guest": 4}})
    result = resolve(toolkit({"table": "1"}, "book"))
    assert "no field 'guest'; did you mean 'guests'" in _text(result)  # the server reports the error
    assert result.state != ActionStatusCode.ARGS_ERROR  # not blamed on the model's arguments
    assert not bookings.exists()


def test_without_an_answerer_the_server_is_told_elicitation_is_not_offered(
    asking: Callable[..., tuple[MCPToolkit, Path]],
) -> None:
    toolkit, bookings = asking()
    result = resolve(toolkit({"table": "2"}, "book"))
    assert result.errmsg and not bookings.exists()


def test_sampling_is_refused_by_default(asking: Callable[..., tuple[MCPToolkit, Path]]) -> None:
    toolkit, _ = asking()
    assert _text(resolve(toolkit({"text": "long text", "max_tokens": 10}, "summarize"))).startswith("refused -32601")


def test_sampling_is_answered_within_its_budget(asking: Callable[..., tuple[MCPToolkit, Path]]) -> None:
    llm = ScriptedLLM(["short", "shorter"])
    toolkit, _ = asking(sampling=Sampling(llm, max_requests=2, max_tokens=30))
    assert _text(resolve(toolkit({"text": "long text", "max_tokens": 10}, "summarize"))) == "ScriptedLLM: short"
    assert llm.calls[0].messages[0] == {"role": "system", "content": "Summarize."}  # the server's system prompt
    over_tokens = _text(resolve(toolkit({"text": "t", "max_tokens": 25}, "summarize")))
    assert over_tokens.startswith("refused -1: sampling budget spent: 25 tokens asked, 20 left")
    assert _text(resolve(toolkit({"text": "t", "max_tokens": 20}, "summarize"))) == "ScriptedLLM: shorter"
    over_requests = _text(resolve(toolkit({"text": "t", "max_tokens": 1}, "summarize")))
    assert over_requests.startswith("refused -1: sampling budget spent: 2 of 2 requests")
    llm.assert_complete()


def test_a_sampling_request_is_put_to_its_approver(asking: Callable[..., tuple[MCPToolkit, Path]]) -> None:
    seen: list[Any] = []
    toolkit, _ = asking(sampling={"llm": ScriptedLLM([]), "approve": lambda params: seen.append(params) or False})
    result = _text(resolve(toolkit({"text": "secret", "max_tokens": 5}, "summarize")))
    assert result == "refused -1: User rejected sampling request"
    assert seen[0]["maxTokens"] == 5


def test_a_misspelt_sampling_setting_is_a_user_error() -> None:
    with pytest.raises(UserError, match="did you mean 'max_tokens'"):
        MCPToolkit(sys.executable, [ASKING], sampling={"llm": ScriptedLLM([]), "max_token": 5})
    with pytest.raises(UserError, match="Sampling needs a model"):
        Sampling(object())
