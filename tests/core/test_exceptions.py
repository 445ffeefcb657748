"""plait's exceptions form one tree in one module; the web and sandbox errors are part of it."""

from __future__ import annotations

import inspect

import plait.exceptions as exceptions
from plait.actions import web
from plait.actions.web import error_return
from plait.schema import ActionStatusCode


def test_every_exported_exception_is_a_plait_error_defined_in_the_one_module() -> None:
    classes = [getattr(exceptions, name) for name in exceptions.__all__]
    assert all(inspect.isclass(cls) and issubclass(cls, exceptions.PlaitError) for cls in classes)
    assert {cls.__module__ for cls in classes} == {"plait.exceptions"}
    for name in exceptions.__all__:  # the tree drawn in the module docstring names every class
        assert f" {name} " in exceptions.__doc__ or f"{name}\n" in exceptions.__doc__, name


def test_web_errors_are_the_tree_s_and_report_their_action_status() -> None:
    assert web.WebError is exceptions.WebError and issubclass(web.WebError, exceptions.ToolExecutionError)
    expected = {
        exceptions.HTTPStatusError: ActionStatusCode.HTTP_ERROR,
        exceptions.WebTimeoutError: ActionStatusCode.HTTP_ERROR,
        exceptions.WebConnectionError: ActionStatusCode.HTTP_ERROR,
        exceptions.BlockedURLError: ActionStatusCode.ARGS_ERROR,
        exceptions.APIResponseError: ActionStatusCode.API_ERROR,
    }
    for cls, state in expected.items():
        error = cls("boom", status=503) if cls is exceptions.HTTPStatusError else cls("boom")
        ret = error_return(error, {"q": "x"}, "Search")
        assert (ret.state, ret.errmsg, ret.args, ret.type) == (state, "boom", {"q": "x"}, "Search")


def test_sandbox_error_is_in_the_tree() -> None:
    from plait.sandbox import SandboxError

    assert SandboxError is exceptions.SandboxError
