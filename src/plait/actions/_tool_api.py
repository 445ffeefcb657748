"""`tool_api`: mark a function or method as a tool API, described from its docstring and hints.

Which calls of the API need a person's approval first is declared here too
(``requires_approval``: an `ApprovalRule`); `plait.actions.base_action` reads both when a
tool class is defined.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, Union, overload

from ..exceptions import UserError
from ._description import build_api_description

__all__ = ["ApprovalRule", "tool_api"]

F = TypeVar("F", bound=Callable[..., object])
ApprovalRule = Union[bool, Callable[[str, Mapping[str, Any]], bool]]
"""Whether calls need a person's approval: always (True), never (False), or per call (``rule(name, arguments)``)."""


@overload
def tool_api(func: F) -> F: ...


@overload
def tool_api(
    func: None = None,
    *,
    explode_return: bool = False,
    returns_named_value: bool = False,
    include_arguments: Iterable[str] | None = None,
    exclude_arguments: Iterable[str] | None = None,
    requires_approval: ApprovalRule = False,
) -> Callable[[F], F]: ...


def tool_api(
    func: Callable[..., object] | None = None,
    *,
    explode_return: bool = False,
    returns_named_value: bool = False,
    include_arguments: Iterable[str] | None = None,
    exclude_arguments: Iterable[str] | None = None,
    requires_approval: ApprovalRule = False,
) -> Callable[..., object]:
    """Mark a function or method (sync or ``async def``) as a tool API and describe it.

    The description is stored on the function as ``api_description``: its name, the first
    paragraph(s) of the Google-style docstring, one entry per parameter (type from the
    hint, else from the docstring; ``Annotated[T, "text"]`` supplies the description) and
    the names of the required ones.

    Args:
        func: The function (when used bare, ``@tool_api``).
        explode_return: Describe each bullet (``- name (type): text``) under the Returns
            description as a ``return_data`` entry.
        returns_named_value: Read Returns entries as ``name (type): text`` into ``return_data``.
        include_arguments: Describe only these parameters.
        exclude_arguments: Do not describe these parameters.
        requires_approval: A person must approve each call before it runs (a tool-using
            agent pauses, see `plait.agents.tool_loop`): True, or a rule
            ``(tool name, arguments) -> bool`` deciding per call.

    Example:
        ```python
        @tool_api
        def bold(text: Annotated[str, 'input text']) -> str:
            \"\"\"make text bold\"\"\"
            return '**' + text + '**'

        bold.api_description['parameters']  # [{'name': 'text', 'type': 'STRING', 'description': 'input text'}]
        ```
    """

    def decorate(fn: F) -> F:
        target = fn.__func__ if isinstance(fn, (staticmethod, classmethod)) else fn
        if not callable(target):
            raise UserError(f"tool_api decorates functions and methods, not {type(fn).__name__}")
        target.__dict__["api_description"] = build_api_description(
            target,
            explode_return=explode_return,
            returns_named_value=returns_named_value,
            include_arguments=include_arguments,
            exclude_arguments=exclude_arguments,
        )
        if requires_approval:
            target.__dict__["requires_approval"] = requires_approval
        return fn

    return decorate(func) if func is not None else decorate
