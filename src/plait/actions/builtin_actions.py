"""The executor's built-in actions (`InvalidAction`, `NoAction`, `FinishAction`) and `FunctionAction`."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..schema import ActionReturn, ActionStatusCode, ActionValidCode
from ._description import build_api_description
from .base_action import BaseAction, tool_api
from .parser import BaseParser, JsonParser

__all__ = ["FinishAction", "FunctionAction", "InvalidAction", "NoAction"]


class _ErrorAction(BaseAction, register=False):
    """An action whose only API reports an error (a given message, or the action's default).

    Args:
        err_msg: The default message.
    """

    run_in_thread = False

    def __init__(
        self, err_msg: str, description: Mapping[str, object] | None = None, parser: type[BaseParser] = BaseParser
    ) -> None:
        super().__init__(description, parser)
        self._err_msg = err_msg

    @tool_api
    def run(self, err_msg: str | None = None) -> ActionReturn:
        """Report a call that could not be carried out.

        Args:
            err_msg (str, optional): What went wrong; the action's default message when None.
        """
        return ActionReturn(
            args={"text": err_msg},
            type=self.name,
            errmsg=err_msg or self._err_msg,
            valid=ActionValidCode.INVALID,
            state=ActionStatusCode.API_ERROR,
        )


class InvalidAction(_ErrorAction):
    """The answer to a call of a tool that does not exist (or is disabled).

    Args:
        err_msg: The default message; executors pass a specific one naming the valid tools.
    """

    def __init__(
        self,
        err_msg: str = "The action is invalid, please check the action name.",
        description: Mapping[str, object] | None = None,
        parser: type[BaseParser] = BaseParser,
    ) -> None:
        super().__init__(err_msg, description, parser)


class NoAction(_ErrorAction):
    """The answer to a message that holds no usable tool call.

    Args:
        err_msg: The default message.
    """

    def __init__(
        self,
        err_msg: str = "Please follow the format",
        description: Mapping[str, object] | None = None,
        parser: type[BaseParser] = BaseParser,
    ) -> None:
        super().__init__(err_msg, description, parser)


class FinishAction(BaseAction):
    """Ends the task: the response is the final answer."""

    run_in_thread = False

    def __init__(self, description: Mapping[str, object] | None = None, parser: type[BaseParser] = BaseParser) -> None:
        super().__init__(description, parser)

    @tool_api
    def run(self, response: str) -> ActionReturn:
        """End the task with `response` as the answer.

        Args:
            response (str): The answer to give.
        """
        text = response if isinstance(response, str) else str(response)
        return ActionReturn(
            args={"text": response},
            result=[{"type": "text", "content": text}],
            type=self.name,
            valid=ActionValidCode.FINISH,
            state=ActionStatusCode.SUCCESS,
        )


class FunctionAction(BaseAction, register=False):
    """A plain function (decorated with `tool_api` or not) as a simple tool named after it.

    Executors wrap functions given in ``actions`` with it. Not in the registry (it needs a
    function to be built).

    Args:
        fn: The function, sync or ``async def``.
        parser: The argument parser class.
        enable: Whether executors offer it.
        name: The tool name (default: the function's name).

    Example:
        ```python
        def add(a: int, b: int) -> int:
            \"\"\"Add two numbers.\"\"\"
            return a + b

        FunctionAction(add)({'a': 1, 'b': 2}).result  # [{'type': 'text', 'content': '3'}]
        ```
    """

    def __init__(
        self,
        fn: Callable[..., object],
        parser: type[BaseParser] = JsonParser,
        enable: bool = True,
        *,
        name: str | None = None,
    ) -> None:
        api = getattr(fn, "api_description", None) or build_api_description(fn)
        description = {key: value for key, value in api.items() if key != "parameter_description"}
        description["name"] = name or api["name"]
        self._fn = fn
        super().__init__(description, parser, enable)

    def _api_callable(self, api: str) -> Callable[..., object] | None:
        return self._fn if api == "run" else None
