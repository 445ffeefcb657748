"""`Calculator`: exact arithmetic for models, evaluated safely (no `eval`)."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Union

from ..exceptions import ToolArgumentError
from .base_action import BaseAction, tool_api

__all__ = ["Calculator", "evaluate"]

Number = Union[int, float]

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "floor": math.floor,
    "ceil": math.ceil,
    "factorial": math.factorial,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
_MAX_EXPONENT = 10_000
_MAX_RESULT_BITS = 100_000
_MAX_FACTORIAL = 1_000
_MAX_LENGTH = 500


_BRACKETS = str.maketrans("{}[]", "()()")


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression (numbers, + - * / // % **, brackets, common math functions).

    Raises:
        ToolArgumentError: The expression is not arithmetic, too long, or cannot be computed.
    """
    text = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/")
    text = text.translate(_BRACKETS)  # {1234} + 5678, [2 + 3] * 4: grouping as written by hand (or a small model)
    if not text or len(text) > _MAX_LENGTH:
        raise ToolArgumentError(f"give an arithmetic expression of 1 to {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ToolArgumentError(f"{expression!r} is not an arithmetic expression, e.g. '37 * 91'") from None
    try:
        return _eval(tree.body)
    except (ArithmeticError, ValueError, TypeError) as exc:
        raise ToolArgumentError(f"cannot compute {expression!r}: {exc}") from None


def _too_big(base: Number, exponent: Number) -> bool:
    if abs(exponent) > _MAX_EXPONENT:
        return True
    return isinstance(base, int) and base.bit_length() * abs(exponent) > _MAX_RESULT_BITS


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and _too_big(left, right):
            raise ValueError(f"{left} ** {right} is too large")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        if node.keywords:
            raise ValueError("keyword arguments are not supported")
        args = [_eval(arg) for arg in node.args]
        if node.func.id == "factorial" and args and abs(args[0]) > _MAX_FACTORIAL:
            raise ValueError(f"factorial is limited to {_MAX_FACTORIAL}")
        return _FUNCTIONS[node.func.id](*args)
    allowed = ", ".join(sorted(_FUNCTIONS))
    raise ValueError(f"only numbers, + - * / // % ** and the functions {allowed} are allowed")


class Calculator(BaseAction):
    """Evaluates arithmetic exactly; use it instead of computing numbers in your head."""

    run_in_thread = False  # pure, bounded CPU work: no need for a worker thread

    @tool_api
    def run(self, expression: str) -> str:
        """Evaluate an arithmetic expression and return the result.

        Args:
            expression: the expression to compute, for example `37 * 91` or `sqrt(2) / 3`
        """
        value = evaluate(expression)
        if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
            value = int(value)
        return str(value)
