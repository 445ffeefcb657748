"""The tool registry: every `BaseAction` subclass is recorded by class name when it is defined.

Redefining a class with the same name (a notebook cell run twice, a test) replaces the
entry in place. `list_tools` and `get_tool` also see plait's own tools that have not been
imported yet: they import them on demand.
"""

from __future__ import annotations

import importlib
import inspect
import threading
from typing import TYPE_CHECKING, Any, Literal, overload

from ..exceptions import ToolNotFoundError
from ..utils.names import did_you_mean

if TYPE_CHECKING:
    from .base_action import BaseAction

__all__ = ["TOOL_REGISTRY", "get_tool", "get_tool_cls", "list_tools", "register_tool", "user_tools"]

TOOL_REGISTRY: dict[str, type[BaseAction]] = {}
_LOCK = threading.Lock()


def register_tool(cls: type[BaseAction]) -> type[BaseAction]:
    """Record `cls` under its class name (replacing an earlier class of that name); return it."""
    with _LOCK:
        TOOL_REGISTRY[cls.__name__] = cls
    return cls


def _load_builtin_tools() -> None:
    """Import plait's lazily exported tool modules so their classes register themselves."""
    from . import _LAZY

    for module in sorted(set(_LAZY.values())):
        try:
            importlib.import_module(module, "plait.actions")
        except ImportError:  # a tool whose optional dependency is missing is simply not listed
            continue


@overload
def list_tools(with_class: Literal[False] = False) -> list[str]: ...


@overload
def list_tools(with_class: Literal[True]) -> list[tuple[str, type[BaseAction]]]: ...


def list_tools(with_class: bool = False) -> list[str] | list[tuple[str, type[BaseAction]]]:
    """Names of all registered tools, in registration order (built-ins first).

    Args:
        with_class: Return ``(name, class)`` pairs instead of names.
    """
    _load_builtin_tools()
    with _LOCK:
        items = list(TOOL_REGISTRY.items())
    return items if with_class else [name for name, _ in items]


_INTERNAL = frozenset({"BaseAction", "InvalidAction", "NoAction", "FinishAction", "IPythonInteractiveManager"})
"""Registered classes that are no tool a user picks by name: the agents' own control actions, and bases."""
_NEEDS_ARGUMENTS = frozenset({"MCPToolkit"})  # a server to connect to: given its own way (--mcp, the web's MCP box)


def user_tools() -> dict[str, type[BaseAction]]:
    """The registered tools a user can pick by name (the CLI's ``--tools``, the web demo's plugins).

    Synchronous, self-contained tools in registration order: plait's own first, then any
    imported so far; not the agents' control actions, nor tools that need constructor
    arguments to work (`MCPToolkit`, and adapters such as `LangChainTool` that wrap a tool
    given to them), nor the async siblings.
    """
    return {
        name: cls
        for name, cls in list_tools(with_class=True)
        if name not in _INTERNAL | _NEEDS_ARGUMENTS
        and not _required_arguments(cls)
        and not inspect.iscoroutinefunction(cls.__call__)
    }


def _required_arguments(cls: type) -> bool:
    """Whether building `cls` needs an argument (one without a default), so no name alone makes it."""
    try:
        parameters = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return False
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_ONLY)
    return any(p.default is inspect.Parameter.empty and p.kind in kinds for p in parameters)


def get_tool_cls(name: str) -> type[BaseAction]:
    """The registered tool class called `name`.

    Raises:
        ToolNotFoundError: No tool has that name; the message lists the close matches.
    """
    cls = TOOL_REGISTRY.get(name)
    if cls is None:
        _load_builtin_tools()
        cls = TOOL_REGISTRY.get(name)
    if cls is None:
        known = list(TOOL_REGISTRY)
        close = did_you_mean(str(name), known, n=3)
        hint = f"; {close}" if close else f"; registered tools: {', '.join(known)}"
        raise ToolNotFoundError(f"no tool named {name!r}{hint}", tool=str(name))
    return cls


def get_tool(name: str, *args: Any, **kwargs: Any) -> BaseAction:
    """Instantiate the registered tool `name` with the given constructor arguments."""
    return get_tool_cls(name)(*args, **kwargs)
