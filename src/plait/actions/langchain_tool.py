"""`LangChainTool`: a LangChain tool as a plait action, and `as_langchain_tool`: a plait action as a LangChain tool.

```python
from langchain_core.tools import tool
from plait.actions import ActionExecutor, Calculator, LangChainTool

@tool
def search(query: str) -> str:
    \"\"\"Search the news.\"\"\"
    return f'no news about {query}'

executor = ActionExecutor([LangChainTool(search)])     # the tool's name, description and JSON Schema
Calculator().as_langchain_tool().invoke({'expression': '37 * 91'})   # '3367', called by LangChain
```

A LangChain ``BaseTool`` (a subclass with ``_run``, a ``@tool`` function, a
``StructuredTool``) becomes a simple plait tool with the single API ``run``: its name and
description, and one parameter per property of the schema LangChain itself sends to models
(``tool_call_schema``, ``$ref``s inlined), each keeping its JSON Schema for native tool
calling. `LangChainTool` calls ``tool.invoke``; its twin `AsyncLangChainTool` awaits
``tool.ainvoke`` (a tool whose ``_arun`` raises ``NotImplementedError``, as many sync-only
tools do, runs ``invoke`` in a worker thread instead). Arguments LangChain rejects become an
``ARGS_ERROR`` return and a ``ToolException`` (or any other exception) an ``API_ERROR``
return, both written for the model.

Needs the ``langchain`` extra (``pip install 'plait[langchain]'``); this module imports
LangChain only when a tool is built.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..exceptions import ToolArgumentError, UserError
from ..llms._optional import import_optional
from ..schema import ActionReturn, ActionStatusCode
from ._foreign_tool import ForeignToolCore
from ._json_schema import api_description
from .base_action import ActionCore, AsyncActionMixin, BaseAction

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

__all__ = ["AsyncLangChainTool", "LangChainTool", "as_langchain_tool"]


def _tools(feature: str) -> Any:
    """``langchain_core.tools``, or `MissingDependencyError` naming the ``langchain`` extra."""
    return import_optional("langchain_core.tools", "langchain", feature)


@contextlib.contextmanager
def _argument_errors(label: str) -> Iterator[None]:
    """Arguments the tool's schema rejects (pydantic's ``ValidationError``) as `ToolArgumentError` for the model."""
    from pydantic import ValidationError

    try:
        yield
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, error['loc'])) or 'input'}: {error['msg']}" for error in exc.errors(include_url=False)
        )
        raise ToolArgumentError(f"invalid arguments: {problems}", tool=label) from exc


class _LangChainToolCore(ForeignToolCore, register=False):
    """What `LangChainTool` and `AsyncLangChainTool` share (the arguments are `LangChainTool`'s)."""

    requires = (("langchain_core", "langchain"),)

    def _adopt(self, tool: Any) -> Any:
        if not isinstance(tool, _tools(type(self).__name__).BaseTool):
            raise UserError(
                f"{type(self).__name__} wraps a LangChain BaseTool (a subclass or a @tool function), "
                f"not {type(tool).__name__}"
            )
        return tool

    def _describe(self, tool: Any, name: str | None) -> dict[str, Any]:
        """The schema LangChain sends to models (``tool_call_schema``, ``$ref``s inlined), through `api_description`."""
        convert = import_optional("langchain_core.utils.function_calling", "langchain", type(self).__name__)
        function = convert.convert_to_openai_tool(tool)["function"]
        schema = {
            "name": name or tool.name,
            "description": function.get("description") or tool.description or "",
            "inputSchema": function.get("parameters") or {},
        }
        return api_description(schema)


class LangChainTool(_LangChainToolCore, BaseAction):
    """A LangChain tool (``BaseTool`` subclass, ``@tool`` function, ``StructuredTool``) as a plait tool.

    Args:
        tool: The LangChain tool.
        name: The name models see (default: the tool's ``name``).
        parser: The argument parser class.
        enable: Whether executors offer this tool.
        requires_approval: Each call needs a person's approval first: True, or a rule
            ``(tool name, arguments) -> bool``.

    Raises:
        UserError: `tool` is not a LangChain ``BaseTool``.
        MissingDependencyError: ``langchain-core`` is not installed.
    """

    def run(self, **arguments: Any) -> Any:
        """Call the LangChain tool with the model's arguments (``tool.invoke``)."""
        with _argument_errors(self.name):
            return self.tool.invoke(arguments)


class AsyncLangChainTool(AsyncActionMixin, _LangChainToolCore, sibling_of=LangChainTool):
    """The async twin of `LangChainTool` (same arguments): ``await tool(inputs)`` awaits ``tool.ainvoke``."""

    async def run(self, **arguments: Any) -> Any:
        """Await the LangChain tool (``tool.ainvoke``; ``invoke`` in a thread when it has no async path)."""
        with _argument_errors(self.name):
            try:
                return await self.tool.ainvoke(arguments)
            except NotImplementedError:  # a sync-only tool whose _arun refuses (seed 004's CustomSearchTool)
                return await asyncio.to_thread(self.tool.invoke, arguments)


# -- the reverse: plait actions as LangChain tools ----------------------------------------------
def _observation(ret: ActionReturn) -> str:
    """The text LangChain gets for a tool call; a failed call raises ``ToolException`` with the message."""
    from langchain_core.tools import ToolException

    if ret.state != ActionStatusCode.SUCCESS:
        raise ToolException(ret.errmsg or "the tool call failed")
    return ret.format_result()


def as_langchain_tool(action: ActionCore, api: str | None = None) -> BaseTool:
    """One API of a plait tool as a LangChain ``StructuredTool`` (see `ActionCore.as_langchain_tool`).

    Raises:
        UserError: `api` is missing for a toolkit with several APIs, or names no API of it.
        MissingDependencyError: ``langchain-core`` is not installed.
    """
    _tools("as_langchain_tool")
    from langchain_core.tools import StructuredTool

    apis = action.api_names
    if api is None:
        if len(apis) != 1:
            raise UserError(f"{action.name} is a toolkit: pass api= one of {apis}")
        api = apis[0]
    if api not in apis:
        raise UserError(f"{action.name} has no API {api!r}; its APIs: {apis}")
    chosen = api
    function: Mapping[str, Any] = action.to_openai_tools()[apis.index(chosen)]["function"]

    async def arun(**arguments: Any) -> str:
        return _observation(await action.acall(arguments, chosen))

    run: Callable[..., str] | None = None
    if isinstance(action, BaseAction) and not inspect.iscoroutinefunction(type(action).__call__):
        sync_action = action  # async tools (AsyncActionMixin) are only awaited

        def run(**arguments: Any) -> str:
            return _observation(sync_action(arguments, chosen))

    return StructuredTool(
        name=function["name"],
        description=function["description"] or function["name"],
        args_schema=function["parameters"],
        func=run,
        coroutine=arun,
        handle_tool_error=True,  # a failed call is the model's observation, as in plait
    )
