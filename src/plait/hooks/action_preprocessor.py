"""Hooks that adapt agent messages to the action executor and tool results back to text.

`ActionPreprocessor` reads the tool call an output parser put in ``message.formatted``
and hands the executor ``{'name', 'parameters'}``; afterwards it replaces the
`ActionReturn` with text for the next model turn. `InternLMActionProcessor` additionally
understands ``ToolParser``-style ``formatted`` dicts whose ``action`` is raw interpreter
code. Neither modifies the messages it is given: they return copies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..schema import ActionReturn, ActionStatusCode, AgentMessage, FunctionCall, replaced
from ..types import SessionId
from .hook import Hook

if TYPE_CHECKING:
    from ..actions.action_executor import ActionExecutorCore

__all__ = ["ActionPreprocessor", "InternLMActionProcessor"]


def _as_call(value: object) -> dict[str, object] | None:
    """``{'name', 'parameters'}`` from a FunctionCall, a call dict, ``{'action': call}`` or its JSON."""
    if isinstance(value, FunctionCall):
        return {"name": value.name, "parameters": value.parameters}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    if not isinstance(value, (dict, Mapping)):
        return None
    if "name" in value:
        parameters = value["parameters"] if "parameters" in value else value.get("arguments", {})
        return {"name": value["name"], "parameters": parameters}
    if "action" in value:
        return _as_call(value["action"])
    return None


def _text_of(action_return: ActionReturn) -> str:
    if action_return.state == ActionStatusCode.SUCCESS:
        return action_return.format_result()
    if action_return.errmsg:
        return action_return.errmsg
    try:
        state = ActionStatusCode(action_return.state).name
    except ValueError:
        state = str(action_return.state)
    return action_return.format_result() or f"The tool call failed ({state})."


class ActionPreprocessor(Hook):
    """Moves the parsed tool call from ``formatted`` into ``content``; turns results into text.

    ``formatted`` may be a `FunctionCall`, ``{'name', 'parameters'}``, ``{'action':
    {'name', 'parameters'}}`` or the JSON text of either. When it holds no tool call, the
    message is passed on unchanged and the executor answers with a `NoAction` error.
    After the call, a successful `ActionReturn` becomes its `format_result()`, a failed one
    its ``errmsg``.
    """

    def before_action(
        self, executor: ActionExecutorCore, message: object, session_id: SessionId
    ) -> AgentMessage | None:
        """Return a copy of `message` whose content is the tool call, or None to leave it."""
        if not isinstance(message, AgentMessage):
            return None
        call = _as_call(message.formatted)
        if call is None:
            return None
        return replaced(message, content=call)

    def after_action(self, executor: ActionExecutorCore, message: object, session_id: SessionId) -> AgentMessage | None:
        """Return a copy of `message` with the `ActionReturn` replaced by text."""
        if not isinstance(message, AgentMessage) or not isinstance(message.content, ActionReturn):
            return None
        return replaced(message, content=_text_of(message.content))


class InternLMActionProcessor(ActionPreprocessor):
    """`ActionPreprocessor` for ``ToolParser``/``MixedToolParser`` output (InternLM style).

    ``formatted`` is ``{'tool_type', 'thought', 'action', 'status'}``. A dict (or JSON)
    ``action`` is a plugin call; any other non-empty string (unless ``tool_type`` names a
    plugin) is interpreter code, sent as ``{code_parameter: code}`` to the interpreter
    tool. The executor passes the session id to tools that accept one, so no tool is
    special-cased by name.

    Args:
        code_parameter: The interpreter API's code parameter.
        interpreter: The tool that runs code; by default the first tool whose API has a
            `code_parameter` parameter (else the executor's first tool).
    """

    def __init__(self, code_parameter: str = "command", interpreter: str | None = None) -> None:
        self.code_parameter = code_parameter
        self.interpreter = interpreter

    def _interpreter_name(self, executor: ActionExecutorCore) -> str | None:
        if self.interpreter is not None:
            return self.interpreter
        infos = executor.description() if hasattr(executor, "description") else []
        for info in infos:
            if any(p.get("name") == self.code_parameter for p in info.get("parameters", [])):
                return str(info["name"])
        actions = getattr(executor, "actions", {})
        return next(iter(actions), None)

    def before_action(
        self, executor: ActionExecutorCore, message: object, session_id: SessionId
    ) -> AgentMessage | None:
        """Turn interpreter code into a call of the interpreter, then defer to `ActionPreprocessor`."""
        if not isinstance(message, AgentMessage) or not isinstance(message.formatted, (dict, Mapping)):
            return super().before_action(executor, message, session_id)
        action = message.formatted.get("action")
        is_plugin = "plugin" in str(message.formatted.get("tool_type") or "")
        if isinstance(action, str) and action.strip() and not is_plugin and _as_call(action) is None:
            name = self._interpreter_name(executor)
            if name is None:
                return None
            formatted = {**message.formatted, "action": {"name": name, "parameters": {self.code_parameter: action}}}
            message = replaced(message, formatted=formatted)
        return super().before_action(executor, message, session_id)
