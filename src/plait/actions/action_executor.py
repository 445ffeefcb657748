"""`ActionExecutor` / `AsyncActionExecutor`: a set of tools behind one callable.

Two call forms:

* ``executor('Toolkit.api', parameters, session_id=0) -> ActionReturn`` (no hooks);
* ``executor(message, session_id=0) -> AgentMessage(sender='ActionExecutor', content=ActionReturn)``:
  ``before_action`` hooks -> the content (a `FunctionCall` or ``{'name', 'parameters'}``)
  is dispatched -> the result is wrapped -> ``after_action`` hooks. A hook that returns
  something other than None replaces the message.

Neither form raises for the model's mistakes: an unknown tool gives an `InvalidAction`
return whose message lists the tools that exist, content that is not a tool call gives a
`NoAction` return, and tool errors come back as described in `plait.actions.base_action`.
Using an ``async def`` tool or hook with the sync executor raises `UserError`.

Both executors run the same flow (`call_flow`, see `plait.effects`); the async one awaits
async tools and hooks and runs sync tools in a worker thread, so the event loop never
blocks. Agents run that flow in their own driver (a `ToolCall` effect), each tool API as an
`ActionCall` effect that interceptors (replay, tracing) see.

Example:
    ```python
    executor = ActionExecutor(actions=[Bold(), PhraseEmphasis()])
    executor.get_actions_info()  # [{'name': 'Bold', ...}, {'name': 'PhraseEmphasis.bold', ...}, ...]
    executor('PhraseEmphasis.bold', '{"text": "hi"}').result  # [{'type': 'text', 'content': '**hi**'}]
    ```
"""

from __future__ import annotations

import difflib
from abc import ABCMeta
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeAlias, Union

from ..driver import run_async, run_sync
from ..effects import ActionCall, Flow, HookCall, runs_in_place
from ..exceptions import UserError
from ..hooks.hook import Hook, RemovableHandle
from ..schema import ActionReturn, AgentMessage, FunctionCall
from ..untrusted import decode_arguments
from ..utils.config import create_object
from ._schema import openai_name, openai_tool
from .base_action import BaseAction
from .builtin_actions import FinishAction, FunctionAction, InvalidAction, NoAction

__all__ = ["ActionExecutor", "ActionExecutorCore", "AsyncActionExecutor"]

ActionLike: TypeAlias = Union[BaseAction, type[BaseAction], Mapping[str, object], Callable[..., object]]
"""What executors accept as a tool: an instance, a class, a config dict ``{'type': ...}`` or a function."""

_UNSET: Final = object()


def _build_action(config: object) -> BaseAction:
    action = create_object(config)
    if isinstance(action, type) and issubclass(action, BaseAction):
        action = action()
    if isinstance(action, BaseAction):
        return action
    if callable(action) and hasattr(action, "__name__"):
        return FunctionAction(action)
    raise UserError(f"an action must be a BaseAction, a config dict or a function, not {type(action).__name__}")


def _extract_call(content: object) -> tuple[str, object, str | None]:
    """``(name, parameters, error)`` of a tool-call message content."""
    name: object
    parameters: object
    if isinstance(content, FunctionCall):
        name, parameters = content.name, content.parameters
    elif isinstance(content, (dict, Mapping)) and "name" in content:
        name = content["name"]
        parameters = content["parameters"] if "parameters" in content else content.get("arguments")
    else:
        kind = type(content).__name__
        return (
            "",
            None,
            (
                "A tool call must be a FunctionCall or a dict {'name': <tool name>, 'parameters': {...}}; "
                f"got {kind}. Please follow the format."
            ),
        )
    if not isinstance(name, str):
        return "", None, f"The tool name must be a string, not {type(name).__name__}. Please follow the format."
    return name, parameters, None


class ActionExecutorCore(metaclass=ABCMeta):  # noqa: B024 - ABCMeta for register(), nothing abstract
    """Dispatches tool calls to a set of actions: everything but how it is called.

    `ActionExecutor` (sync) and `AsyncActionExecutor` add ``__call__`` and ``forward`` in
    their mode; the async one is registered as a virtual subclass of the sync one, so
    ``isinstance(executor, ActionExecutor)`` holds for both.

    Args:
        actions: Actions (instances, config dicts ``{'type': ...}``, classes or plain
            functions), or a single one. The given list is not modified.
        invalid_action: Answers calls of unknown tools (default `InvalidAction`).
        no_action: Answers messages without a usable tool call (default `NoAction`).
        finish_action: Answers calls of ``FinishAction`` (default `FinishAction`).
        finish_in_action: Also list the finish action among the tools models see.
        hooks: `Hook` instances or config dicts with ``before_action``/``after_action``.

    Attributes:
        name: The sender of the messages it returns: ``'ActionExecutor'`` for both executors.

    Raises:
        UserError: Two actions share a name, or an item is not an action.
    """

    name = "ActionExecutor"

    def __init__(
        self,
        actions: ActionLike | Sequence[ActionLike] | None = None,
        invalid_action: ActionLike | None = None,
        no_action: ActionLike | None = None,
        finish_action: ActionLike | None = None,
        finish_in_action: bool = False,
        hooks: Sequence[Hook | Mapping[str, object]] | None = None,
    ) -> None:
        items = [] if actions is None else list(actions) if isinstance(actions, (list, tuple)) else [actions]
        self.actions: dict[str, BaseAction] = {}
        for item in items:
            action = _build_action(item)
            if action.name in self.actions:
                raise UserError(f"two actions are named {action.name!r}; tool names must be unique")
            self.actions[action.name] = action
        self.invalid_action = _build_action(invalid_action if invalid_action is not None else {"type": InvalidAction})
        self.no_action = _build_action(no_action if no_action is not None else {"type": NoAction})
        self.finish_action = _build_action(finish_action if finish_action is not None else {"type": FinishAction})
        if finish_in_action:
            self.actions.setdefault(self.finish_action.name, self.finish_action)
        self._hooks: dict[int, Hook] = {}
        for hook in hooks or ():
            self.register_hook(hook)

    # -- the tool set --------------------------------------------------------------------------
    def description(self) -> list[dict[str, Any]]:
        """The enabled tools' descriptions, toolkit APIs flattened to ``Toolkit.api``."""
        result: list[dict[str, Any]] = []
        for name, action in self.actions.items():
            if not action.enable:
                continue
            if action.is_toolkit:
                for api in action.description["api_list"]:
                    result.append({**api, "name": f"{name}.{api['name']}"})
            else:
                result.append(dict(action.description))
        return result

    def get_actions_info(self) -> list[dict[str, Any]]:
        """Same as `description` (the tool meta prompt fed to models)."""
        return self.description()

    def action_names(self, only_enable: bool = True) -> list[str]:
        """Names of the actions (only the enabled ones by default)."""
        return [name for name, action in self.actions.items() if action.enable or not only_enable]

    def is_valid(self, name: str) -> bool:
        """Whether `name` (a tool or ``Toolkit.api``) is an enabled tool."""
        action, _ = self._lookup(name)
        return action is not None and action.enable

    def keys(self) -> list[str]:
        """Names of all actions."""
        return list(self.actions)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._lookup(name)[0] is not None

    def __getitem__(self, name: str) -> BaseAction:
        return self.actions[name]

    def __setitem__(self, name: str, action: ActionLike) -> None:
        built = _build_action(action)
        if built.name != name:
            raise UserError(f"action {built.name!r} cannot be stored under another name ({name!r})")
        self.actions[name] = built

    def __delitem__(self, name: str) -> None:
        del self.actions[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.actions)

    def __len__(self) -> int:
        return len(self.actions)

    def add_action(self, action: ActionLike) -> BaseAction:
        """Add (or replace) an action; return the built instance."""
        built = _build_action(action)
        self.actions[built.name] = built
        return built

    def del_action(self, name: str) -> None:
        """Remove the action `name` (no error when absent)."""
        self.actions.pop(name, None)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(actions={list(self.actions)})"

    # -- JSON Schema ---------------------------------------------------------------------------
    def _openai_table(self) -> tuple[dict[str, str], list[dict[str, Any]]]:
        """(OpenAI-safe name -> flattened name, OpenAI ``tools`` entries), cached until the tool set changes."""
        key = tuple((name, id(action), action.enable) for name, action in self.actions.items())
        cached = self.__dict__.get("_openai_cache")
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        names: dict[str, str] = {}
        tools: list[dict[str, Any]] = []
        for api in self.description():
            safe = base = openai_name(api["name"])
            counter = 2
            while safe in names:
                safe, counter = f"{base[:60]}_{counter}", counter + 1
            names[safe] = api["name"]
            tool = openai_tool(api, api["name"])
            tool["function"]["name"] = safe
            tools.append(tool)
        self.__dict__["_openai_cache"] = (key, names, tools)
        return names, tools

    def _openai_names(self) -> dict[str, str]:
        """OpenAI-safe name -> flattened tool name, collisions made unique."""
        return self._openai_table()[0]

    def openai_tools(self) -> list[dict[str, Any]]:
        """The enabled tools as OpenAI ``tools`` entries (treat as read-only); calls may use these names directly."""
        return list(self._openai_table()[1])

    def resolve_name(self, name: str) -> str:
        """The flattened tool name (``Toolkit.api``) for an OpenAI-safe one; other names unchanged."""
        return self._openai_names().get(name, name)

    # -- hooks -----------------------------------------------------------------------------------
    def register_hook(self, hook: Hook | Mapping[str, object]) -> RemovableHandle:
        """Add a hook (an object with ``before_action``/``after_action``, or a config dict)."""
        handle = RemovableHandle(self._hooks)
        self._hooks[handle.id] = create_object(hook)
        return handle

    # -- calling (the flows; `ActionExecutor` / `AsyncActionExecutor` drive them) ------------------
    def call_flow(
        self, message: object, parameters: object = _UNSET, session_id: Hashable = 0, call_id: str | None = None
    ) -> Flow[object]:
        """Both call forms, written once (``call_flow(message, session_id=...)`` for the message form).

        `call_id` is the model's id for the call, when a tool loop made it: the tool's `ActionCall` carries it.
        """
        if isinstance(message, str):
            params = None if parameters is _UNSET else parameters
            return (yield from self.dispatch_flow(message, params, session_id, call_id))
        if parameters is not _UNSET:  # executor(message, session_id) with the id given positionally
            session_id = parameters
        if not isinstance(message, AgentMessage):
            message = AgentMessage(sender="user", content=message)
        return (yield from self.message_flow(message, session_id, call_id))

    def message_flow(self, message: AgentMessage, session_id: Hashable, call_id: str | None = None) -> Flow[object]:
        """before_action hooks -> dispatch the content -> wrap as a message -> after_action hooks."""
        current: object = message
        for hook in list(self._hooks.values()):
            replaced = yield HookCall(hook.before_action, (self, current, session_id))
            if replaced is not None:
                current = replaced
        content = current.content if isinstance(current, AgentMessage) else current
        name, parameters, error = _extract_call(content)
        if error is not None:
            result = yield from self._action_flow(self.no_action, {"err_msg": error}, "run", None)
        else:
            result = yield from self.dispatch_flow(name, parameters, session_id, call_id)
        response: object = AgentMessage(sender=self.name, content=result)
        for hook in list(self._hooks.values()):
            replaced = yield HookCall(hook.after_action, (self, response, session_id))
            if replaced is not None:
                response = replaced
        return response

    def needs_approval(self, name: str, arguments: object) -> bool:
        """Whether a call of tool `name` (as a model names it) must wait for a person's approval.

        `arguments` may be JSON text, as models write them. An unknown or disabled tool
        needs none: it does not run (the model is told it does not exist).
        """
        action, api = self._lookup(self.resolve_name(name))
        if action is None or not action.enable:
            return False
        if type(action).needs_approval is BaseAction.needs_approval:
            rule = action.approval_rule(api)
            if not callable(rule):  # a fixed answer: the arguments need no decoding
                return bool(rule)
        decoded = decode_arguments(arguments)
        return action.needs_approval(api, decoded if isinstance(decoded, dict) else {"input": decoded})

    def _lookup(self, name: str) -> tuple[BaseAction | None, str]:
        if name in self.actions:
            return self.actions[name], "run"
        tool, dot, api = name.partition(".")
        if dot and tool in self.actions:
            return self.actions[tool], api
        flat = self._openai_names().get(name)
        if flat is not None and flat != name:
            return self._lookup(flat)
        return None, "run"

    def _available(self, name: str) -> str:
        valid = [api["name"] for api in self.description()]
        if not valid:
            return "No tools are available."
        close = difflib.get_close_matches(name, valid, n=1)
        hint = f"Did you mean {close[0]!r}? " if close and close[0] != name else ""
        return f"{hint}Available tools: {', '.join(valid)}."

    def dispatch_flow(
        self, name: object, parameters: object, session_id: Hashable, call_id: str | None = None
    ) -> Flow[ActionReturn]:
        """Look the tool up and run it; unknown or disabled tools go to the built-in actions."""
        if isinstance(name, str):
            action, api = self._lookup(name)
            if action is not None and action.enable:
                return (yield from self._action_flow(action, parameters, api, session_id, call_id))
            if action is None and name == self.no_action.name:
                return (yield from self._action_flow(self.no_action, parameters, "run", None))
            if action is None and name == self.finish_action.name:
                return (yield from self._action_flow(self.finish_action, parameters, "run", None))
            problem = f"The tool {name!r} is disabled." if action is not None else f"There is no tool named {name!r}."
            message = f"{problem} {self._available(name)}"
        else:
            message = f"The tool name must be a string, not {type(name).__name__}. {self._available('')}"
        result = yield from self._action_flow(self.invalid_action, {"err_msg": message}, "run", None)
        result.args = {"name": name, "parameters": parameters}
        return result

    def _action_flow(
        self, action: BaseAction, parameters: object, api: str, session_id: Hashable | None, call_id: str | None = None
    ) -> Flow[ActionReturn]:
        result: ActionReturn = yield ActionCall(action, parameters, api, session_id, call_id)
        return result


class ActionExecutor(ActionExecutorCore):
    """Dispatches tool calls to a set of actions, called synchronously (arguments: `ActionExecutorCore`)."""

    @runs_in_place
    def __call__(self, message: object, parameters: object = _UNSET, session_id: Hashable = 0) -> Any:
        """``executor(name, parameters) -> ActionReturn`` or ``executor(message) -> AgentMessage``."""
        return run_sync(self.call_flow(message, parameters, session_id))

    def forward(self, name: str, parameters: object = None, session_id: Hashable = 0) -> ActionReturn:
        """Dispatch one tool call by name (no hooks)."""
        return run_sync(self.dispatch_flow(name, parameters, session_id))


class AsyncActionExecutor(ActionExecutorCore):
    """`ActionExecutor` whose calls are awaited; sync tools run in a worker thread, hooks may be async."""

    @runs_in_place
    async def __call__(self, message: object, parameters: object = _UNSET, session_id: Hashable = 0) -> Any:
        """``await executor(name, parameters)`` or ``await executor(message, session_id=0)``."""
        return await run_async(self.call_flow(message, parameters, session_id))

    async def forward(self, name: str, parameters: object = None, session_id: Hashable = 0) -> ActionReturn:
        """Dispatch one tool call by name (no hooks)."""
        return await run_async(self.dispatch_flow(name, parameters, session_id))


ActionExecutor.register(AsyncActionExecutor)
