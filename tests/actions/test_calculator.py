from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from _support import resolve
from plait.actions.calculator import Calculator, evaluate
from plait.exceptions import ToolArgumentError
from plait.schema import ActionStatusCode


@pytest.mark.parametrize(
    ("expression", "value"),
    [("37 * 91", 3367), ("2^10", 1024), ("-(3 + 4) * 2", -14), ("sqrt(16) + pi - pi", 4.0), ("7 // 2 % 3", 0)],
)
def test_evaluates_arithmetic(expression: str, value: float) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os')",
        "open('x')",
        "2 ** 99999",
        "(99**999)**999",
        "factorial(10**6)",
        "1/0",
        "",
        "a + 1",
        "x" * 600,
    ],
)
def test_refuses_everything_else(expression: str) -> None:
    with pytest.raises(ToolArgumentError):
        evaluate(expression)


def test_tool_results_and_errors_are_action_returns(mode: str) -> None:
    tool = Calculator()
    call = tool.acall if mode == "async" else tool
    ok = resolve(call({"expression": "6 * 7.0"}))
    assert ok.result == [{"type": "text", "content": "42"}]
    bad = resolve(call({"expression": "import os"}))
    assert bad.state != ActionStatusCode.SUCCESS and "arithmetic" in bad.errmsg


@given(st.text(max_size=60))
def test_never_raises_anything_but_argument_errors(text: str) -> None:
    try:
        evaluate(text)
    except ToolArgumentError:
        pass
