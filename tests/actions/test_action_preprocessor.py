"""ActionPreprocessor and InternLMActionProcessor through an executor."""

from __future__ import annotations

from typing import Any

import pytest
from _action_support import call_executor, make_executor

from plait.actions import BaseAction, tool_api
from plait.hooks.action_preprocessor import ActionPreprocessor, InternLMActionProcessor
from plait.schema import AgentMessage, FunctionCall


class Search(BaseAction, register=False):
    """Search."""

    @tool_api
    def query(self, q: str) -> str:
        """Search for q."""
        return f"results for {q}"


class Interpreter(BaseAction, register=False):
    def run(self, command: str, session_id: int = 0) -> str:
        """Run code.

        Args:
            command: code
        """
        return f"ran {command!r} in session {session_id}"


@pytest.mark.parametrize(
    "formatted",
    [
        FunctionCall("Search.query", {"q": "x"}),
        {"name": "Search.query", "parameters": {"q": "x"}},  # crashed Lagent's ActionPreprocessor
        {"action": {"name": "Search.query", "parameters": {"q": "x"}}},
        '{"name": "Search.query", "parameters": {"q": "x"}}',
    ],
)
def test_action_preprocessor_forms(mode: str, formatted: Any) -> None:
    executor = make_executor(mode, actions=[Search()], hooks=[ActionPreprocessor()])
    message = AgentMessage(sender="agent", content="I will search", formatted=formatted)
    response = call_executor(executor, message)
    assert response.content == "results for x" and response.sender == "ActionExecutor"
    assert message.content == "I will search"  # not modified


def test_action_preprocessor_errors_become_text(mode: str) -> None:
    executor = make_executor(mode, actions=[Search()], hooks=[ActionPreprocessor()])
    response = call_executor(
        executor, AgentMessage(sender="a", content="x", formatted={"name": "Nope", "parameters": {}})
    )
    assert response.content == "There is no tool named 'Nope'. Available tools: Search.query."
    response = call_executor(executor, AgentMessage(sender="a", content="no call here", formatted=None))
    assert "Please follow the format" in response.content


def test_internlm_processor(mode: str) -> None:
    executor = make_executor(mode, actions=[Search(), Interpreter()], hooks=[InternLMActionProcessor()])
    code = {"tool_type": "interpreter", "thought": "t", "action": "print(1)", "status": 1}
    response = call_executor(executor, AgentMessage(sender="a", content="c", formatted=code), session_id=4)
    # the interpreter is found by its 'command' parameter (not by being first), the session id is passed on
    assert response.content == "ran 'print(1)' in session 4"
    plugin = {
        "tool_type": "plugin",
        "thought": "t",
        "action": {"name": "Search.query", "parameters": {"q": "y"}},
        "status": 1,
    }
    assert call_executor(executor, AgentMessage(sender="a", content="c", formatted=plugin)).content == "results for y"
    plugin_json = {**plugin, "action": '{"name": "Search.query", "parameters": {"q": "z"}}'}
    assert (
        call_executor(executor, AgentMessage(sender="a", content="c", formatted=plugin_json)).content == "results for z"
    )
    broken_plugin = {**plugin, "action": "{not json"}
    assert (
        "Please follow the format"
        in call_executor(executor, AgentMessage(sender="a", content="c", formatted=broken_plugin)).content
    )


def test_internlm_processor_explicit_interpreter(mode: str) -> None:
    hook = InternLMActionProcessor(code_parameter="q", interpreter="Search.query")
    executor = make_executor(mode, actions=[Search()], hooks=[hook])
    formatted = {"tool_type": "interpreter", "thought": "", "action": "abc", "status": 1}
    assert (
        call_executor(executor, AgentMessage(sender="a", content="", formatted=formatted)).content == "results for abc"
    )
