r"""`PythonInterpreter` / `AsyncPythonInterpreter`: stateless Python, one sandboxed process per call.

Each call runs the code in a fresh confined process (see `plait.sandbox`), never in the
caller's interpreter, and reads the answer the Lagent way: the value of ``answer_expr``
(``solution()`` by default), the global ``answer_symbol``, or the last line printed
(``answer_from_stdout``). The process and everything it started are killed afterwards.

Example:
    ```python
    tool = PythonInterpreter(timeout=5)
    tool({'command': '```python\ndef solution():\n    return 6 * 7\n```'}).result
    # [{'type': 'text', 'content': '42'}]
    ```
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..sandbox import Child, Limits, adrive, drive
from ..sandbox.sessions import Sessions
from ..sandbox.text import extract_code, join_output
from ..sandbox.worker import ExecResult
from ..schema import ActionReturn, ActionStatusCode
from ..types import JSONValue
from ._sandboxed import SandboxedTool
from .base_action import AsyncActionMixin, BaseAction
from .parser import BaseParser, JsonParser

__all__ = ["DEFAULT_DESCRIPTION", "AsyncPythonInterpreter", "PythonInterpreter"]

DEFAULT_DESCRIPTION: dict[str, JSONValue] = {
    "name": "PythonInterpreter",
    "description": (
        "用来执行Python代码。代码需要定义一个名为 'solution' 的函数, 函数体写出你的思考步骤, "
        "并返回最终结果, 例如:\n```python\n# 导入依赖\nimport math\ndef solution():\n"
        "    # 按步骤计算\n    value = math.sqrt(16)\n    # 返回最终答案\n    return value\n```"
    ),
    "parameters": [{"name": "command", "type": "STRING", "description": "Python code snippet"}],
    "required": ["command"],
}


class _PythonInterpreterCore(SandboxedTool[Child], register=False):
    """What `PythonInterpreter` and `AsyncPythonInterpreter` share (the arguments are `PythonInterpreter`'s)."""

    def __init__(
        self,
        answer_symbol: str | None = None,
        answer_expr: str | None = "solution()",
        answer_from_stdout: bool = False,
        timeout: float | None = None,
        description: Mapping[str, object] | None = None,
        parser: type[BaseParser] | Callable[[BaseAction], BaseParser] = JsonParser,
        enable: bool = True,
        limits: Limits | None = None,
        pool_size: int = 1,
    ) -> None:
        super().__init__(description or DEFAULT_DESCRIPTION, parser, enable, timeout=timeout, limits=limits)
        self.answer_symbol = answer_symbol
        self.answer_expr = answer_expr
        self.answer_from_stdout = answer_from_stdout
        self.pool_size = pool_size

    def _new_sessions(self) -> Sessions[Child]:
        return Sessions("worker", self.limits, spares=self.pool_size, max_live=None)

    def _request(self, command: str) -> dict[str, JSONValue]:
        answer = {"from_stdout": self.answer_from_stdout, "symbol": self.answer_symbol, "expr": self.answer_expr}
        return {"op": "exec", "mode": "script", "code": extract_code(command), "answer": answer}

    def _to_return(self, outcome: ExecResult) -> ActionReturn:
        if outcome.ok:
            if self.answer_from_stdout:
                lines = outcome.output.rstrip("\n").split("\n")
                answer = lines[-1] if lines else ""
            else:
                answer = outcome.result if outcome.result is not None else ""
            return ActionReturn(type=self.name, result=[{"type": "text", "content": answer}])
        return ActionReturn(
            type=self.name, errmsg=join_output(outcome.output, outcome.error), state=ActionStatusCode.API_ERROR
        )


class PythonInterpreter(_PythonInterpreterCore, BaseAction):
    """Runs a Python snippet in a fresh sandboxed process and returns its answer.

    Args:
        answer_symbol: Read the answer from this global variable.
        answer_expr: Evaluate this expression for the answer (default ``'solution()'``).
        answer_from_stdout: The answer is the last line the code printed.
        timeout: Wall-clock seconds per call (default: ``limits.timeout`` if `limits` is
            given, else 20).
        description: The tool description (default: `DEFAULT_DESCRIPTION`).
        parser: The argument parser class.
        enable: Whether executors offer the tool.
        limits: Resource limits (a `timeout` given overrides their wall clock).
        pool_size: Processes kept started for the next calls.
    """

    def run(self, command: str) -> ActionReturn:
        """Run a Python snippet and return its answer.

        Args:
            command: Python code snippet
        """
        return self._to_return(drive(self.sessions.once_op(self._request(command))))


class AsyncPythonInterpreter(AsyncActionMixin, _PythonInterpreterCore, sibling_of=PythonInterpreter):
    """`PythonInterpreter` for async agents: ``await tool(...)`` never blocks the event loop."""

    async def run(self, command: str) -> ActionReturn:  # noqa: D102
        return self._to_return(await adrive(self.sessions.once_op(self._request(command))))
