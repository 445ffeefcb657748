"""`tool_api` and `BaseAction`: turn functions and classes into tools a model can call.

A *simple tool* implements ``run`` (decorated with `tool_api` or not); a *toolkit*
implements several `tool_api` methods. Each class gets a ``__tool_description__`` built
from its docstrings and type hints when it is defined, and is registered by class name
(`list_tools`, `get_tool`).

Calling a tool never raises for the model's mistakes: an unknown API, bad arguments or
an exception inside the tool come back as an `ActionReturn` with a state and an
``errmsg`` written for the model.

Sessions: an API that declares a ``session_id`` parameter receives the caller's session
id (``action(inputs, session_id=...)``; executors always pass theirs). The parameter is
hidden from the description, so a model cannot choose it. Per-session state can live in
`BaseAction.session_state`, which hands out one dict per session id.

Sync and async: ``action(...)`` runs sync APIs; ``await action.acall(...)`` runs sync APIs
in a worker thread (unless the class sets ``run_in_thread = False``) and awaits ``async
def`` APIs. Calling an ``async def`` API synchronously raises `UserError`: use
`acall`, an `AsyncActionExecutor`, or mix in `AsyncActionMixin` (whose ``__call__`` is
async, as in Lagent).

`ActionCore` is everything a tool is except its ``__call__``; `BaseAction` adds the sync
``__call__``. plait's own async tools are siblings of their sync tools over a shared core
(``class AsyncX(AsyncActionMixin, _XCore, sibling_of=X)``): no async method overrides a sync
one, and ``isinstance(AsyncX(), X)`` holds because the sibling is registered on ``X``.

Example:
    ```python
    class PhraseEmphasis(BaseAction):
        \"\"\"a toolkit which provides different styles of text emphasis\"\"\"

        @tool_api
        def bold(self, text: Annotated[str, 'input text']) -> str:
            \"\"\"make text bold\"\"\"
            return '**' + text + '**'

    PhraseEmphasis()({'text': 'hi'}, 'bold').result  # [{'type': 'text', 'content': '**hi**'}]
    ```
"""

from __future__ import annotations

import abc
import copy
import functools
import importlib.util
import inspect
import logging
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..driver import run_async, run_sync
from ..effects import ActionCall, Call, Flow
from ..exceptions import (
    MissingDependencyError,
    ParseError,
    ToolArgumentError,
    ToolError,
    ToolNotFoundError,
    UserError,
)
from ..schema import ActionReturn, ActionStatusCode
from ._description import SESSION_PARAMETER, build_class_description
from ._registry import register_tool
from ._schema import openai_tool
from ._tool_api import ApprovalRule, tool_api
from .parser import BaseParser, JsonParser

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool as LangChainBaseTool

__all__ = ["SESSION_PARAMETER", "ActionCore", "AsyncActionMixin", "BaseAction", "check_dependencies", "tool_api"]

logger = logging.getLogger(__name__)

_RESULT_KEYS = frozenset({"text", "image", "audio", "video", "file", "error"})
_ALL: Hashable = object()


@functools.lru_cache(maxsize=2048)
def _accepts_session(fn: Callable[..., object]) -> bool:
    try:
        return SESSION_PARAMETER in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _clean(text: str) -> str:
    """Make `text` encodable as UTF-8 (lone surrogates become U+FFFD); everything else is kept."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")
    return text


def _utf8_safe(ret: ActionReturn) -> ActionReturn:
    if isinstance(ret.errmsg, str):
        ret.errmsg = _clean(ret.errmsg)
    if isinstance(ret.result, list):
        ret.result = [
            {**item, "content": _clean(item["content"])}
            if isinstance(item, dict) and isinstance(item.get("content"), str)
            else item
            for item in ret.result
        ]
    return ret


def describe_exception(exc: BaseException) -> str:
    """``'TypeError: message'`` (just the type name when the message is empty)."""
    try:
        message = str(exc)
    except Exception:
        message = ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def check_dependencies(tool: type[ActionCore]) -> None:
    """Raise if a module `tool` requires is not installed (before it is offered to a model).

    Raises:
        MissingDependencyError: Naming the module and the extra to install.
    """
    for module, extra in tool.requires:
        if importlib.util.find_spec(module) is None:
            raise MissingDependencyError(module, extra=extra, feature=tool.__name__)


class ActionCore(metaclass=abc.ABCMeta):
    """Everything a tool is except how it is called: `BaseAction` adds the sync ``__call__``.

    A class is described (``__tool_description__``) and registered when it is defined.
    ``class X(..., register=False)`` stays out of the registry (shared cores, abstract
    bases); ``class AsyncX(AsyncActionMixin, _XCore, sibling_of=X)`` makes the async
    sibling count as an ``X`` (``isinstance``, ``issubclass``) and gives its undocumented
    APIs the descriptions of ``X``'s APIs of the same name. The constructor's arguments
    are documented on `BaseAction`.

    Attributes:
        run_in_thread: Async callers run this tool's sync APIs in a worker thread so the
            event loop never blocks (set False for trivial, non-blocking tools).
        requires: The optional modules the tool needs, as ``(module, plait extra)`` pairs
            (see `check_dependencies`).
    """

    __tool_description__: ClassVar[dict[str, Any]]
    requires: ClassVar[tuple[tuple[str, str], ...]] = ()
    _is_toolkit: ClassVar[bool]
    _plait_base: ClassVar[bool] = True
    run_in_thread: ClassVar[bool] = True
    _session_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init_subclass__(
        cls, register: bool = True, sibling_of: type[ActionCore] | None = None, **kwargs: object
    ) -> None:
        """Describe the new class and register it (``class X(BaseAction, register=False)`` opts out).

        Args:
            register: Record the class in the tool registry.
            sibling_of: The sync class this one is the async sibling of: the new class is
                registered as its virtual subclass and inherits its API descriptions.
            **kwargs: Passed on to the next ``__init_subclass__``.

        Raises:
            UserError: A registered class is neither a `BaseAction` nor a sibling of one.
        """
        super().__init_subclass__(**kwargs)
        twins = () if sibling_of is None else (sibling_of,)
        cls.__tool_description__, cls._is_toolkit = build_class_description(cls, tool_api, twins)
        if sibling_of is not None:
            sibling_of.register(cls)
        if register:
            if not issubclass(cls, BaseAction):
                raise UserError(f"{cls.__name__} is not a BaseAction: subclass it, or declare sibling_of=<sync tool>")
            register_tool(cls)

    def __init__(
        self,
        description: Mapping[str, object] | None = None,
        parser: type[BaseParser] | Callable[[BaseAction], BaseParser] = JsonParser,
        enable: bool = True,
        *,
        requires_approval: ApprovalRule = False,
    ) -> None:
        self.requires_approval = requires_approval
        if description is None:
            description = self.__tool_description__
        if not isinstance(description, Mapping) or not isinstance(description.get("name"), str):
            raise UserError(f"a tool description must be a dict with a 'name'; got {description!r}")
        self._description: dict[str, Any] = copy.deepcopy(dict(description))
        self._name: str = self._description["name"]
        self._enable = bool(enable)
        self._parser: BaseParser = self._bind_parser(parser)

    def _bind_parser(self, parser: type[BaseParser] | Callable[[BaseAction], BaseParser]) -> BaseParser:
        """`parser` built for this tool (it reads the tool's description)."""
        if isinstance(parser, BaseParser):
            raise UserError("pass the parser class (e.g. parser=JsonParser), not an instance")
        if not callable(parser):
            raise UserError(f"parser must be a BaseParser subclass, not {parser!r}")
        if not isinstance(self, BaseAction):  # a shared core built directly, not a tool
            raise UserError(f"{type(self).__name__} is not a tool: build BaseAction subclasses or their siblings")
        return parser(self)

    # -- identity ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The tool name (the class name unless the description says otherwise)."""
        return self._name

    @property
    def description(self) -> dict[str, Any]:
        """The tool description shown to models (with the parser's ``parameter_description``)."""
        return self._description

    @property
    def is_toolkit(self) -> bool:
        """Whether the tool has several named APIs (``api_list``) rather than one ``run``."""
        return "api_list" in self._description

    @property
    def enable(self) -> bool:
        """Whether executors offer and run this tool."""
        return self._enable

    @enable.setter
    def enable(self, value: bool) -> None:
        self._enable = bool(value)

    @property
    def parser(self) -> BaseParser:
        """The argument parser bound to this action."""
        return self._parser

    @property
    def api_names(self) -> list[str]:
        """The callable API names: the toolkit's APIs, or ``['run']``."""
        if self.is_toolkit:
            return [api["name"] for api in self._description["api_list"]]
        return ["run"]

    def __repr__(self) -> str:
        apis = f", apis={self.api_names}" if self.is_toolkit else ""
        return f"{type(self).__name__}(name={self._name!r}{apis}, enable={self._enable})"

    # -- sessions ---------------------------------------------------------------------------
    def session_state(self, session_id: Hashable = 0) -> dict[str, Any]:
        """A mutable dict private to `session_id`, created on first use (thread-safe)."""
        with self._session_lock:
            states: dict[Hashable, dict[str, Any]] = self.__dict__.setdefault("_session_states", {})
            return states.setdefault(session_id, {})

    def clear_session_state(self, session_id: Hashable = _ALL) -> None:
        """Forget the state of `session_id` (of every session when omitted)."""
        with self._session_lock:
            states = self.__dict__.setdefault("_session_states", {})
            if session_id is _ALL:
                states.clear()
            else:
                states.pop(session_id, None)

    # -- JSON Schema --------------------------------------------------------------------------
    def to_openai_tools(self) -> list[dict[str, Any]]:
        """This tool's APIs as OpenAI ``tools`` entries (``Toolkit.api`` names made OpenAI-safe)."""
        if self.is_toolkit:
            return [
                openai_tool(api, f"{self._name}.{api['name']}", self._description.get("description", ""))
                for api in self._description["api_list"]
            ]
        return [openai_tool(self._description, self._name)]

    def as_langchain_tool(self, api: str | None = None) -> LangChainBaseTool:
        """API `api` of this tool (its only one by default) as a LangChain ``StructuredTool`` (``plait[langchain]``).

        The tool has this API's OpenAI name, description and JSON Schema; LangChain's
        ``invoke``/``ainvoke`` call the plait tool, and a failed call is returned to LangChain
        as its error message. For every API of a toolkit:
        ``[toolkit.as_langchain_tool(api) for api in toolkit.api_names]``.

        Raises:
            UserError: A toolkit with several APIs needs `api`, or `api` is not one of them.
            MissingDependencyError: ``langchain-core`` is not installed.
        """
        from .langchain_tool import as_langchain_tool

        return as_langchain_tool(self, api)

    # -- calling ------------------------------------------------------------------------------
    async def acall(self, inputs: object = None, name: str = "run", session_id: Hashable | None = None) -> ActionReturn:
        """Async `__call__`: awaits async APIs, runs sync ones in a worker thread."""
        return await run_async(_single(ActionCall(self, inputs, name, session_id)))

    def needs_approval(self, api: str, arguments: Mapping[str, Any]) -> bool:
        """Whether a call of API `api` with `arguments` must wait for a person's approval.

        The API's own rule (``@tool_api(requires_approval=...)``) decides when it has one,
        else the tool's (``requires_approval=`` when it was built). A rule that raises
        counts as "needs approval": a broken policy must not let a call through.
        """
        rule = self.approval_rule(api)
        if not callable(rule):
            return bool(rule)
        name = self._name if api == "run" and not self.is_toolkit else f"{self._name}.{api}"
        try:
            return bool(rule(name, arguments))
        except Exception:  # a broken rule fails closed
            return True

    def approval_rule(self, api: str) -> object:
        """API `api`'s approval rule: its own (``@tool_api(requires_approval=...)``), else the tool's.

        A bool, or a callable ``(name, arguments) -> bool`` that `needs_approval` asks.
        """
        fn = self._api_callable(api)
        rule = getattr(getattr(fn, "__func__", fn), "requires_approval", None)
        return getattr(self, "requires_approval", False) if rule is None else rule

    def _api_callable(self, api: str) -> Callable[..., object] | None:
        """The callable behind API `api` (a method of the same name by default)."""
        if api.startswith("_"):
            return None
        fn = getattr(self, api, None)
        return fn if callable(fn) else None

    def resolve_api(self, name: object) -> tuple[str, str, Callable[..., object]]:
        """``(api, label, callable)`` for an API name (``'run'``, ``'bold'``, ``'Toolkit.bold'``).

        Raises:
            ToolNotFoundError: The tool has no such API; the message lists the valid ones.
            ToolError: The API has no implementation.
        """
        if not isinstance(name, str):
            raise ToolNotFoundError(f"the API name must be a string, not {type(name).__name__}", tool=self._name)
        valid = self.api_names
        if self.is_toolkit:
            api = name[len(self._name) + 1 :] if name.startswith(self._name + ".") else name
            if api not in valid:
                raise ToolNotFoundError(
                    f"{self._name} has no API {name!r}; valid APIs: {', '.join(map(repr, valid))}", tool=self._name
                )
            label = f"{self._name}.{api}"
        else:
            if name not in ("run", self._name, f"{self._name}.run"):
                raise ToolNotFoundError(
                    f"{self._name} is a simple tool with the single API 'run'; it has no API {name!r}", tool=self._name
                )
            api, label = "run", self._name
        fn = self._api_callable(api)
        if fn is None:
            raise ToolError(f"{label} has no implementation (no method {api!r})", tool=label)
        return api, label, fn

    def call_flow(
        self, inputs: object, name: str, session_id: Hashable | None, call_id: str | None = None
    ) -> Flow[ActionReturn]:
        """The one implementation of a tool call, as a flow (see `plait.effects`) yielding the API call.

        Run it as an `ActionCall` effect, so interceptors see the tool call (`call_id`: see `AgentTool`).
        """
        if "_parser" not in self.__dict__:
            raise UserError(f"{type(self).__name__}.__init__ must call super().__init__()")
        fallback = {"inputs": inputs, "name": name}
        try:
            api, label, fn = self.resolve_api(name)
        except ToolError as exc:
            return _error(fallback, self._name, str(exc), ActionStatusCode.API_ERROR)
        try:
            args = self._parser.parse_inputs(inputs, api)
            if not isinstance(args, (dict, Mapping)):
                raise ParseError(f"the parser returned {type(args).__name__}, not a dict of arguments")
        except ParseError as exc:
            return _error(fallback, label, exc.err_msg, ActionStatusCode.ARGS_ERROR)
        except Exception as exc:
            message = f"could not parse the arguments: {describe_exception(exc)}"
            return _error(fallback, label, message, ActionStatusCode.ARGS_ERROR)
        kwargs = dict(args)
        if session_id is not None and _accepts_session(getattr(fn, "__func__", fn)):
            kwargs[SESSION_PARAMETER] = session_id
        try:
            result = yield Call(fn, kwargs=kwargs, offload=self.run_in_thread)
        except Exception as exc:
            logger.debug("tool %s raised", label, exc_info=True)
            state = ActionStatusCode.ARGS_ERROR if isinstance(exc, ToolArgumentError) else ActionStatusCode.API_ERROR
            return _error(dict(args), label, describe_exception(exc), state)
        return self.wrap_result(result, dict(args), label)

    def wrap_result(self, result: object, args: dict[str, object], label: str) -> ActionReturn:
        """Normalise what an API returned into an `ActionReturn`.

        An `ActionReturn` is passed through (``args``/``type`` filled in when empty); a dict
        such as ``{'error': msg}`` whose keys are all result kinds (``text``, ``image``, ...,
        ``error``) with a non-empty error becomes an ``API_ERROR``; anything else goes
        through the parser's ``parse_outputs``. Text is made UTF-8 safe, nothing is dropped.
        """
        if isinstance(result, ActionReturn):
            if not result.args:
                result.args = args
            if not result.type:
                result.type = label
            return _utf8_safe(result)
        if isinstance(result, (dict, Mapping)) and "error" in result and all(k in _RESULT_KEYS for k in result):
            error = result["error"]
            if error not in (None, "", False):
                return _error(args, label, error if isinstance(error, str) else str(error), ActionStatusCode.API_ERROR)
            result = {key: value for key, value in result.items() if key != "error"}
        try:
            items = self._parser.parse_outputs(result)
        except Exception as exc:
            message = f"the tool's return value could not be converted: {describe_exception(exc)}"
            return _error(args, label, message, ActionStatusCode.API_ERROR)
        return _utf8_safe(ActionReturn(args=args, type=label, result=items))


class BaseAction(ActionCore, register=False):
    """Base class of every tool.

    Args:
        description: The tool description; defaults to a copy of the class's
            ``__tool_description__`` (built from its `tool_api` methods and docstrings).
        parser: The argument parser class, instantiated with the action; it adds a
            ``parameter_description`` to each API.
        enable: Whether executors offer and run this tool.
        requires_approval: Each call of this tool (every API of a toolkit) must be approved
            by a person before it runs: True, or a rule ``(tool name, arguments) -> bool``
            (e.g. only amounts over 100). ``@tool_api(requires_approval=...)`` sets it per API.

    Example:
        ```python
        class Bold(BaseAction):
            def run(self, text: str):
                \"\"\"make text bold\"\"\"
                return '**' + text + '**'

        Bold()('{"text": "hi"}').result  # [{'type': 'text', 'content': '**hi**'}]
        ```
    """

    _plait_base: ClassVar[bool] = True  # its docstring is not a tool's description

    def __call__(self, inputs: object = None, name: str = "run", session_id: Hashable | None = None) -> ActionReturn:
        """Call API `name` with `inputs` (parsed by the action's parser); never raises for bad input.

        Raises:
            UserError: The API is ``async def`` (use `acall` or an async executor).
        """
        return run_sync(_single(ActionCall(self, inputs, name, session_id)))


register_tool(BaseAction)


def _single(effect: ActionCall) -> Flow[ActionReturn]:
    result: ActionReturn = yield effect
    return result


def _error(args: dict[str, object], label: str, message: str, state: int) -> ActionReturn:
    return _utf8_safe(ActionReturn(args=args, type=label, errmsg=message, state=state))


if TYPE_CHECKING:
    # For type checkers the mixin is a BaseAction, so Lagent's spelling ``class AsyncBold(
    # AsyncActionMixin, BaseAction)`` type-checks (the mixin's ``__call__`` comes first in the
    # MRO); at run time it is a plain mixin and plait's async tools do not inherit BaseAction.
    _MixinBase = BaseAction
else:
    _MixinBase = object


class AsyncActionMixin(_MixinBase):
    """Makes a tool's ``__call__`` async (Lagent's spelling for async tools).

    Example:
        ```python
        class AsyncBold(AsyncActionMixin, BaseAction):
            async def run(self, text: str) -> str:
                \"\"\"make text bold\"\"\"
                return '**' + text + '**'

        ret = await AsyncBold()({'text': 'hi'})
        ```
    """

    async def __call__(  # type: ignore[override]  # the one async __call__ over BaseAction's, by Lagent's contract
        self, inputs: object = None, name: str = "run", session_id: Hashable | None = None
    ) -> ActionReturn:
        """Await the tool call (same contract as `BaseAction.acall`)."""
        return await self.acall(inputs, name, session_id=session_id)


_STANDARD_CALLS = (BaseAction.__call__, AsyncActionMixin.__call__)


@functools.lru_cache(maxsize=1024)
def _own_call(cls: type) -> Any:
    """The ``__call__`` a tool class defines or inherits (looked up once per class)."""
    return next((klass.__dict__["__call__"] for klass in cls.__mro__ if "__call__" in klass.__dict__), None)


def action_flow(
    action: ActionCore, inputs: object, api: str, session_id: Hashable | None, call_id: str | None = None
) -> Flow[ActionReturn]:
    """One tool call as a flow, whatever the tool (what an `ActionCall` effect runs).

    Tools with plait's own ``__call__`` run `BaseAction.call_flow` (given `call_id`); one that overrides ``__call__``
    is called as ``action(inputs, api[, session_id=...])``, its result wrapped alike (an exception: ``API_ERROR``).
    """
    call = _own_call(type(action))
    if call is None or call in _STANDARD_CALLS:
        return (yield from action.call_flow(inputs, api, session_id, call_id))
    fn: Callable[..., object] = call.__get__(action, type(action))  # bound, as ``action.__call__``
    accepts = session_id is not None and _accepts_session(call)
    kwargs = {"session_id": session_id} if accepts else {}
    args = {"inputs": inputs, "name": api}
    try:
        result = yield Call(fn, (inputs, api), kwargs, offload=getattr(action, "run_in_thread", True))
    except Exception as exc:
        return ActionReturn(
            args=args, type=action.name, errmsg=describe_exception(exc), state=ActionStatusCode.API_ERROR
        )
    if isinstance(result, ActionReturn):
        return result
    return action.wrap_result(result, args, action.name)
