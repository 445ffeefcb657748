"""Sync tools and their async siblings: the relations and call modes users rely on, pinned.

Every class exported from `plait.actions` and `plait.distributed` is listed with the sync
classes it counts as (``issubclass`` and ``isinstance``), its public methods that are
coroutine functions, and its public sync methods. The async tools are siblings of the sync
ones over shared cores, registered as virtual subclasses, so ``isinstance(AsyncGoogleSearch(),
GoogleSearch)`` and ``isinstance(tool, BaseAction)`` hold as they always did.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Hashable

import pytest

import plait.actions
import plait.distributed
from plait.actions import ActionExecutor, AsyncActionExecutor, AsyncActionMixin, BaseAction, get_tool_cls, tool_api
from plait.exceptions import ModeError
from plait.schema import ActionStatusCode

# class -> (sync classes it is a subclass/instance of, async public methods, sync public methods)
TRUTH_TABLE: dict[str, tuple[str, str, str]] = {
    "actions.ActionExecutor": (
        "ActionExecutor",
        "",
        (
            "__call__ action_names add_action call_flow del_action description dispatch_flow forward "
            "get_actions_info is_valid keys message_flow needs_approval openai_tools register_hook "
            "resolve_name"
        ),
    ),
    "actions.AgentLegoTool": (
        "AgentLegoTool BaseAction",
        "acall",
        (
            "__call__ approval_rule as_langchain_tool call_flow clear_session_state needs_approval "
            "resolve_api run session_state to_openai_tools wrap_result"
        ),
    ),
    "actions.ArxivSearch": (
        "ArxivSearch BaseAction",
        "acall aclose",
        (
            "__call__ approval_rule as_langchain_tool build_request call_flow clear_session_state close "
            "get_arxiv_article_information needs_approval parse_response resolve_api run_io session_state "
            "to_openai_tools web_clients wrap_result"
        ),
    ),
    "actions.AsyncActionExecutor": (
        "ActionExecutor",
        "__call__ forward",
        (
            "action_names add_action call_flow del_action description dispatch_flow get_actions_info "
            "is_valid keys message_flow needs_approval openai_tools register_hook resolve_name"
        ),
    ),
    "actions.AsyncActionMixin": (
        "",
        "__call__",
        "",
    ),
    "actions.AsyncAgentLegoTool": (
        "AgentLegoTool BaseAction",
        "__call__ acall",
        (
            "approval_rule as_langchain_tool call_flow clear_session_state needs_approval resolve_api run "
            "session_state to_openai_tools wrap_result"
        ),
    ),
    "actions.AsyncArxivSearch": (
        "ArxivSearch BaseAction",
        "__call__ acall aclose get_arxiv_article_information",
        (
            "approval_rule as_langchain_tool build_request call_flow clear_session_state close "
            "needs_approval parse_response resolve_api run_io session_state to_openai_tools web_clients "
            "wrap_result"
        ),
    ),
    "actions.AsyncBINGMap": (
        "BINGMap BaseAction",
        "__call__ acall aclose get_coordinates get_distance get_route search_nearby",
        (
            "approval_rule as_langchain_tool build_request call_flow clear_session_state close "
            "needs_approval resolve_api run_io session_state to_openai_tools web_clients wrap_result"
        ),
    ),
    "actions.AsyncGoogleScholar": (
        "BaseAction GoogleScholar",
        "__call__ acall aclose get_author_id get_author_information get_citation_format search_google_scholar",
        (
            "approval_rule as_langchain_tool build_request call_flow clear_session_state close "
            "needs_approval resolve_api run_io session_state to_openai_tools web_clients wrap_result"
        ),
    ),
    "actions.AsyncGoogleSearch": (
        "BaseAction GoogleSearch",
        "__call__ acall aclose run",
        (
            "approval_rule as_langchain_tool build_request call_flow clear_session_state close "
            "needs_approval parse_response resolve_api run_io session_state to_openai_tools web_clients "
            "wrap_result"
        ),
    ),
    "actions.AsyncIPythonInteractive": (
        "BaseAction IPythonInteractive",
        "__call__ acall run",
        (
            "approval_rule as_langchain_tool call_flow clear_session_state close_session needs_approval "
            "reset resolve_api session_dir session_state shutdown to_openai_tools wrap_result"
        ),
    ),
    "actions.AsyncIPythonInterpreter": (
        "BaseAction IPythonInterpreter",
        "__call__ acall run",
        (
            "approval_rule as_langchain_tool call_flow clear_session_state close_session needs_approval "
            "prewarm reset resolve_api session_dir session_state shutdown to_openai_tools wrap_result"
        ),
    ),
    "actions.AsyncLangChainTool": (
        "BaseAction LangChainTool",
        "__call__ acall run",
        (
            "approval_rule as_langchain_tool call_flow clear_session_state needs_approval resolve_api "
            "session_state to_openai_tools wrap_result"
        ),
    ),
    "actions.AsyncMCPToolkit": (
        "BaseAction MCPToolkit",
        "__aenter__ __aexit__ __call__ acall aclose get_prompt list_prompts list_resources read_resource",
        (
            "__enter__ __exit__ approval_rule as_langchain_tool call_flow clear_session_state close "
            "from_spec needs_approval refresh resolve_api session_state to_openai_tools wrap_result"
        ),
    ),
    "actions.AsyncPPT": (
        "BaseAction PPT",
        "__call__ acall",
        (
            "add_first_page add_text_image_page add_text_page approval_rule as_langchain_tool call_flow "
            "clear_session_state create_file document needs_approval resolve_api session_state submit_file "
            "to_openai_tools wrap_result"
        ),
    ),
    "actions.AsyncPythonInterpreter": (
        "BaseAction PythonInterpreter",
        "__call__ acall run",
        (
            "approval_rule as_langchain_tool call_flow clear_session_state needs_approval resolve_api "
            "session_state shutdown to_openai_tools wrap_result"
        ),
    ),
    "actions.AsyncWebBrowser": (
        "BaseAction WebBrowser",
        "__call__ acall aclose open_url search select",
        (
            "approval_rule as_langchain_tool call_flow clear_session_state close needs_approval resolve_api "
            "results run_io session_state to_openai_tools web_clients wrap_result"
        ),
    ),
    "actions.BINGMap": (
        "BINGMap BaseAction",
        "acall aclose",
        (
            "__call__ approval_rule as_langchain_tool build_request call_flow clear_session_state close "
            "get_coordinates get_distance get_route needs_approval resolve_api run_io search_nearby "
            "session_state to_openai_tools web_clients wrap_result"
        ),
    ),
    "actions.BaseAction": (
        "BaseAction",
        "acall",
        (
            "__call__ approval_rule as_langchain_tool call_flow clear_session_state needs_approval "
            "resolve_api session_state to_openai_tools wrap_result"
        ),
    ),
    "actions.BaseParser": (
        "BaseParser",
        "",
        "__call__ check_arguments example parameters parse_inputs parse_outputs required",
    ),
    "actions.Calculator": (
        "BaseAction Calculator",
        "acall",
        (
            "__call__ approval_rule as_langchain_tool call_flow clear_session_state needs_approval "
            "resolve_api run session_state to_openai_tools wrap_result"
        ),
    ),
    "actions.FinishAction": (
        "BaseAction FinishAction",
        "acall",
        (
            "__call__ approval_rule as_langchain_tool call_flow clear_session_state needs_approval "
            "resolve_api run session_state to_openai_tools wrap_result"
        ),
    ),
    "actions.FunctionAction": (
        "BaseAction FunctionAction",
        "acall",
        (
            "__call__ approval_rule as_langchain_tool call_flow clear_session_state needs_approval "
            "resolve_api session_state to_openai_tools wrap_result"
        ),
    ),
    "actions.GoogleScholar": (
        "BaseAction GoogleScholar",
        "acall aclose",
        (
            "__call__ approval_rule as_langchain_tool build_request call_flow clear_session_state close "
            "get_author_id get_author_information get_citation_format needs_approval resolve_api run_io "
            "search_google_scholar session_state to_openai_tools web_clients wrap_result"
        ),
    ),
    "actions.GoogleSearch": (
        "BaseAction GoogleSearch",
        "acall aclose",
        (
            "__call__ approval_rule as_langchain_tool build_request call_flow clear_session_state close "
            "needs_approval parse_response resolve_api run run_io session_state to_openai_tools web_clients "
            "wrap_result"
        ),
    ),
    "actions.IPythonInteractive": (
        "BaseAction IPythonInteractive",
        "acall",
        (
            "__call__ approval_rule as_langchain_tool call_flow clear_session_state close_session "
            "needs_approval reset resolve_api run session_dir session_state shutdown to_openai_tools "
            "wrap_result"
        ),
    ),
    "actions.IPythonInteractiveManager": (
        "BaseAction IPythonInteractiveManager",
        "acall acall_batch",
        (
            "__call__ approval_rule as_langchain_tool call_flow clear clear_session_state needs_approval "
            "reset resolve_api session_state to_openai_tools wrap_result"
        ),
    ),
    "actions.IPythonInterpreter": (
        "BaseAction IPythonInterpreter",
        "acall",
        (
            "__call__ approval_rule as_langchain_tool call_flow clear_session_state close_session "
            "needs_approval prewarm reset resolve_api run session_dir session_state shutdown "
            "to_openai_tools wrap_result"
        ),
    ),
    "actions.InvalidAction": (
        "BaseAction InvalidAction",
        "acall",
        (
            "__call__ approval_rule as_langchain_tool call_flow clear_session_state needs_approval "
            "resolve_api run session_state to_openai_tools wrap_result"
        ),
    ),
    "actions.JsonParser": (
        "BaseParser JsonParser",
        "",
        "__call__ check_arguments example parameters parse_inputs parse_outputs required",
    ),
    "actions.LangChainTool": (
        "BaseAction LangChainTool",
        "acall",
        (
            "__call__ approval_rule as_langchain_tool call_flow clear_session_state needs_approval "
            "resolve_api run session_state to_openai_tools wrap_result"
        ),
    ),
    "actions.MCPToolkit": (
        "BaseAction MCPToolkit",
        "acall",
        (
            "__call__ __enter__ __exit__ approval_rule as_langchain_tool call_flow clear_session_state "
            "close from_spec get_prompt list_prompts list_resources needs_approval read_resource refresh "
            "resolve_api session_state to_openai_tools wrap_result"
        ),
    ),
    "actions.NoAction": (
        "BaseAction NoAction",
        "acall",
        (
            "__call__ approval_rule as_langchain_tool call_flow clear_session_state needs_approval "
            "resolve_api run session_state to_openai_tools wrap_result"
        ),
    ),
    "actions.PPT": (
        "BaseAction PPT",
        "acall",
        (
            "__call__ add_first_page add_text_image_page add_text_page approval_rule as_langchain_tool "
            "call_flow clear_session_state create_file document needs_approval resolve_api session_state "
            "submit_file to_openai_tools wrap_result"
        ),
    ),
    "actions.ParseError": (
        "ParseError",
        "",
        "__call__ add_note with_traceback",
    ),
    "actions.PythonInterpreter": (
        "BaseAction PythonInterpreter",
        "acall",
        (
            "__call__ approval_rule as_langchain_tool call_flow clear_session_state needs_approval "
            "resolve_api run session_state shutdown to_openai_tools wrap_result"
        ),
    ),
    "actions.TupleParser": (
        "BaseParser TupleParser",
        "",
        "__call__ check_arguments example parameters parse_inputs parse_outputs required",
    ),
    "actions.WebBrowser": (
        "BaseAction WebBrowser",
        "acall aclose",
        (
            "__call__ approval_rule as_langchain_tool call_flow clear_session_state close needs_approval "
            "open_url resolve_api results run_io search select session_state to_openai_tools web_clients "
            "wrap_result"
        ),
    ),
    "distributed.AgentAPIServer": (
        "AgentAPIServer",
        "chat_completion forget health_check memory resume start_async stop_async",
        "__call__ __enter__ __exit__ serve_forever start stop",
    ),
    "distributed.AgentRayActor": (
        "AgentRayActor",
        "",
        "__call__ kill reset state_dict",
    ),
    "distributed.AsyncAgentRayActor": (
        "AgentRayActor",
        "__call__ state_dict",
        "kill reset",
    ),
    "distributed.AsyncHTTPAgentClient": (
        "",
        "__call__ astate_dict close resume",
        "state_dict stream",
    ),
    "distributed.AsyncHTTPAgentServer": (
        "",
        "__aenter__ __aexit__ __call__ astate_dict close resume",
        "shutdown state_dict stream",
    ),
    "distributed.HTTPAgentClient": (
        "HTTPAgentClient",
        "",
        "__call__ close resume state_dict stream",
    ),
    "distributed.HTTPAgentServer": (
        "HTTPAgentClient HTTPAgentServer",
        "",
        "__call__ __enter__ __exit__ close resume shutdown state_dict stream",
    ),
}
_DUNDERS = ("__call__", "__enter__", "__exit__", "__aenter__", "__aexit__")


def _exported() -> dict[str, type]:
    classes: dict[str, type] = {}
    for module, names in ((plait.actions, dir(plait.actions)), (plait.distributed, plait.distributed.__all__)):
        for name in names:
            value = getattr(module, name)
            if isinstance(value, type):
                classes[f"{module.__name__.removeprefix('plait.')}.{name}"] = value
    return classes


def _sync_classes() -> dict[str, type]:
    exported = {cls.__name__: cls for cls in _exported().values()}
    return {name: cls for name, cls in exported.items() if not name.startswith("Async")} | {"BaseAction": BaseAction}


def _members(cls: type) -> tuple[str, str]:
    names = sorted(name for name in dir(cls) if not name.startswith("_")) + [n for n in _DUNDERS if hasattr(cls, n)]
    modes: dict[str, list[str]] = {"async": [], "sync": []}
    for name in names:
        value = inspect.getattr_static(cls, name)
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            continue
        if inspect.iscoroutinefunction(value) or inspect.isasyncgenfunction(value):
            modes["async"].append(name)
        elif callable(value):
            modes["sync"].append(name)
    return " ".join(sorted(modes["async"])), " ".join(sorted(modes["sync"]))


def test_every_exported_class_is_in_the_table() -> None:
    assert sorted(_exported()) == sorted(TRUTH_TABLE)


@pytest.mark.parametrize("key", sorted(TRUTH_TABLE))
def test_relations_and_call_modes_are_unchanged(key: str) -> None:
    cls = _exported()[key]
    relations, coroutines, functions = TRUTH_TABLE[key]
    targets = _sync_classes()
    assert " ".join(sorted(name for name, target in targets.items() if issubclass(cls, target))) == relations
    instance = cls.__new__(cls)
    assert " ".join(sorted(name for name, target in targets.items() if isinstance(instance, target))) == relations
    assert _members(cls) == (coroutines, functions)


_TWINS = [
    ("ArxivSearch", "AsyncArxivSearch"),
    ("BINGMap", "AsyncBINGMap"),
    ("GoogleScholar", "AsyncGoogleScholar"),
    ("GoogleSearch", "AsyncGoogleSearch"),
    ("IPythonInteractive", "AsyncIPythonInteractive"),
    ("IPythonInterpreter", "AsyncIPythonInterpreter"),
    ("PPT", "AsyncPPT"),
    ("PythonInterpreter", "AsyncPythonInterpreter"),
    ("WebBrowser", "AsyncWebBrowser"),
    ("MCPToolkit", "AsyncMCPToolkit"),
]


def _tool_cls(name: str) -> type[BaseAction]:
    """The class plait exports under `name` (other tests register classes of the same name)."""
    exported = getattr(plait.actions, name, None)
    return exported if isinstance(exported, type) else get_tool_cls(name)


@pytest.mark.parametrize(("sync_name", "async_name"), _TWINS)
def test_twins_describe_the_same_apis(sync_name: str, async_name: str) -> None:
    sync_cls, async_cls = _tool_cls(sync_name), _tool_cls(async_name)
    assert async_cls.__name__ == async_name and async_cls.__tool_description__["name"] == async_name
    sync_description, async_description = dict(sync_cls.__tool_description__), dict(async_cls.__tool_description__)
    sync_text, async_text = sync_description.pop("description"), async_description.pop("description")
    if sync_name != "MCPToolkit":  # a toolkit's description comes from its server
        assert async_text.startswith(sync_text)  # AsyncPPT's adds a paragraph
    assert {**async_description, "name": sync_name} == sync_description
    assert async_cls._is_toolkit == sync_cls._is_toolkit
    assert issubclass(async_cls, sync_cls) and not issubclass(sync_cls, async_cls)
    assert inspect.iscoroutinefunction(async_cls.__call__) and not inspect.iscoroutinefunction(sync_cls.__call__)
    apis = [api["name"] for api in sync_cls.__tool_description__.get("api_list", [])] or ["run"]
    for api in apis if hasattr(sync_cls, apis[0]) else []:  # an MCP toolkit's APIs come from its server
        sync_params = inspect.signature(getattr(sync_cls, api)).parameters
        async_params = inspect.signature(getattr(async_cls, api)).parameters
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in async_params.values()):  # Scholar takes **params
            shape = [(p.name, p.kind, p.default) for p in sync_params.values()]
            assert [(p.name, p.kind, p.default) for p in async_params.values()] == shape, api


def test_twins_share_a_core_and_override_nothing_with_async() -> None:
    for sync_name, async_name in _TWINS:
        sync_cls, async_cls = _tool_cls(sync_name), _tool_cls(async_name)
        assert sync_cls not in async_cls.__mro__ and BaseAction not in async_cls.__mro__
        assert next(k for k in async_cls.__mro__[1:] if k in sync_cls.__mro__).__name__.endswith("Core")
        mro = async_cls.__mro__
        for index, klass in enumerate(mro):
            for name, value in vars(klass).items():
                if inspect.iscoroutinefunction(value):
                    below = [vars(k)[name] for k in mro[index + 1 :] if name in vars(k)]
                    assert not any(callable(v) and not inspect.iscoroutinefunction(v) for v in below), name


def test_a_shared_core_is_not_a_tool() -> None:
    from plait.actions.base_action import ActionCore
    from plait.exceptions import UserError

    class _Core(ActionCore, register=False):
        def run(self, text: str) -> str:
            return text

    with pytest.raises(UserError, match="not a tool"):
        _Core()
    with pytest.raises(UserError, match="not a BaseAction"):

        class Stray(ActionCore):
            def run(self, text: str) -> str:
                return text


# -- Lagent's spelling of a user's async tool keeps working ---------------------------------------
class AsyncShout(AsyncActionMixin, BaseAction, register=False):
    """Shout a text."""

    async def run(self, text: str) -> str:
        """Make text loud.

        Args:
            text: what to shout
        """
        await asyncio.sleep(0)
        return text.upper() + "!"


class AsyncEmphasis(AsyncActionMixin, BaseAction, register=False):
    """Emphasise text."""

    @tool_api
    async def bold(self, text: str, session_id: Hashable = 0) -> str:
        """Make text bold.

        Args:
            text: the text
        """
        return f"**{text}** ({session_id})"


def test_lagent_style_async_tools_run_and_describe_themselves() -> None:
    shout, emphasis = AsyncShout(), AsyncEmphasis()
    assert isinstance(shout, BaseAction) and isinstance(emphasis, AsyncActionMixin)
    assert inspect.iscoroutinefunction(AsyncShout.__call__)
    assert shout.description["parameters"] == [{"name": "text", "type": "STRING", "description": "what to shout"}]
    assert emphasis.is_toolkit and emphasis.api_names == ["bold"]
    ret = asyncio.run(shout({"text": "hi"}))
    assert ret.result == [{"type": "text", "content": "HI!"}] and ret.state == ActionStatusCode.SUCCESS
    ret = asyncio.run(emphasis('{"text": "x"}', "bold", session_id=3))
    assert ret.result == [{"type": "text", "content": "**x** (3)"}] and ret.type == "AsyncEmphasis.bold"
    assert repr(shout) == "AsyncShout(name='AsyncShout', enable=True)"


def test_lagent_style_async_tools_in_executors() -> None:
    executor = AsyncActionExecutor([AsyncShout(), AsyncEmphasis()])
    ret = asyncio.run(executor("AsyncShout", {"text": "go"}))
    assert ret.result == [{"type": "text", "content": "GO!"}]
    ret = asyncio.run(executor("AsyncEmphasis.bold", {"text": "y"}, session_id=5))
    assert ret.result == [{"type": "text", "content": "**y** (5)"}]
    with pytest.raises(ModeError, match="async"):
        ActionExecutor([AsyncShout()])("AsyncShout", {"text": "no"})
