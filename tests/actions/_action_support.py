"""Helpers for the action tests: one body drives the sync and the async API."""

from __future__ import annotations

from typing import Any

from _support import resolve
from plait.actions import ActionExecutor, AsyncActionExecutor, BaseAction


def call_action(mode: str, action: BaseAction, *args: Any, **kwargs: Any) -> Any:
    """``action(...)`` in sync mode, ``await action.acall(...)`` in async mode."""
    if mode == "sync":
        return action(*args, **kwargs)
    return resolve(action.acall(*args, **kwargs))


def make_executor(mode: str, *args: Any, **kwargs: Any) -> ActionExecutor:
    """`ActionExecutor` or `AsyncActionExecutor`."""
    cls = ActionExecutor if mode == "sync" else AsyncActionExecutor
    return cls(*args, **kwargs)


def call_executor(executor: ActionExecutor, *args: Any, **kwargs: Any) -> Any:
    """Call either executor and return the finished result."""
    return resolve(executor(*args, **kwargs))


def same(actual: Any, expected: Any) -> bool:
    """Equal, key order included (what printing shows)."""
    return bool(actual == expected and repr(actual) == repr(expected))
