"""BaseAction calls: error returns, result normalisation, UTF-8, sessions, sync/async."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from _action_support import call_action
from pydantic import BaseModel

from _support import resolve
from plait.actions import AsyncActionMixin, BaseAction, FunctionAction, TupleParser, get_tool, get_tool_cls, tool_api
from plait.exceptions import ToolArgumentError, ToolNotFoundError, UserError
from plait.schema import ActionReturn, ActionStatusCode, ActionValidCode

OK, ARGS, API_ERROR = ActionStatusCode.SUCCESS, ActionStatusCode.ARGS_ERROR, ActionStatusCode.API_ERROR


class Reading(BaseModel):
    """A typed result: a pydantic model."""

    city: str
    degrees: float


@dataclasses.dataclass
class Spot:
    """A typed result: a dataclass."""

    name: str
    tags: list[str]


class ArithKit(BaseAction):
    """Arithmetic."""

    @tool_api
    def add(self, a: int, b: int = 0) -> int:
        """Add.

        Args:
            a: first
            b: second
        """
        return a + b

    @tool_api
    def divide(self, a: float, b: float) -> float:
        """Divide."""
        return a / b

    @tool_api
    def echo(self, value: Any) -> Any:
        """Return the value as is."""
        return value


class SessionCounter(BaseAction):
    """Counts calls, per session."""

    def run(self, step: int = 1, session_id: int = 0) -> int:
        """Increment.

        Args:
            step: increment
        """
        state = self.session_state(session_id)
        state["n"] = state.get("n", 0) + step
        return state["n"]


class AsyncEcho(AsyncActionMixin, BaseAction, register=False):
    async def run(self, text: str) -> str:
        """Echo."""
        await asyncio.sleep(0)
        return text


def test_success_and_result_types(mode: str) -> None:
    calc = ArithKit()
    ret = call_action(mode, calc, {"a": 2, "b": 3}, "add")
    assert ret == ActionReturn(args={"a": 2, "b": 3}, type="ArithKit.add", result=[{"type": "text", "content": "5"}])
    ret = call_action(mode, calc, '{"a": 2}', "ArithKit.add")  # the flattened name works too
    assert ret.result == [{"type": "text", "content": "2"}]


@pytest.mark.parametrize(
    ("value", "items"),
    [
        ("plain", [{"type": "text", "content": "plain"}]),
        (
            {"text": "hi", "image": "/tmp/x.png"},
            [{"type": "text", "content": "hi"}, {"type": "image", "content": "/tmp/x.png"}],
        ),
        ({"type": "image", "content": "p.png"}, [{"type": "image", "content": "p.png"}]),
        (
            [{"type": "text", "content": "a"}, {"type": "file", "content": "f"}],
            [{"type": "text", "content": "a"}, {"type": "file", "content": "f"}],
        ),
        ({"城市": "北京", "n": 1}, [{"type": "text", "content": '{"城市": "北京", "n": 1}'}]),
        ([1, "二"], [{"type": "text", "content": '[1, "二"]'}]),
        (None, []),
        (b"bytes \xff", [{"type": "text", "content": "bytes \ufffd"}]),
        ({"text": "fine", "error": None}, [{"type": "text", "content": "fine"}]),
        (Reading(city="北京", degrees=1), [{"type": "text", "content": '{"city": "北京", "degrees": 1.0}'}]),  # JSON
        (Spot("a", ["b"]), [{"type": "text", "content": '{"name": "a", "tags": ["b"]}'}]),  # not the repr
    ],
)
def test_results_are_normalised(mode: str, value: Any, items: list[dict[str, Any]]) -> None:
    ret = call_action(mode, ArithKit(), {"value": value}, "echo")
    assert ret.state == OK and ret.result == items


def test_error_dict_becomes_api_error(mode: str) -> None:
    ret = call_action(mode, ArithKit(), {"value": {"error": "Error checking environment: boom"}}, "echo")
    assert ret.state == API_ERROR and ret.errmsg == "Error checking environment: boom" and ret.result is None
    # a data dict that merely has an 'error' field among others is data
    ret = call_action(mode, ArithKit(), {"value": {"error": 1, "rows": []}}, "echo")
    assert ret.state == OK


def test_utf8_is_preserved(mode: str) -> None:
    text = "emoji 😀 ✓ ∑ 한국어 العربية \U0001f680"
    ret = call_action(mode, ArithKit(), {"value": text}, "echo")
    assert ret.result == [{"type": "text", "content": text}]
    ret = call_action(mode, ArithKit(), {"value": "lone \ud800 surrogate"}, "echo")
    ret.result[0]["content"].encode("utf-8")  # encodable, nothing else lost
    assert ret.result[0]["content"].startswith("lone ") and ret.result[0]["content"].endswith(" surrogate")


def test_wrong_api_lists_valid_ones(mode: str) -> None:
    ret = call_action(mode, ArithKit(), {"a": 1}, "mul")
    assert ret.state == API_ERROR and ret.type == "ArithKit"
    assert ret.errmsg == "ArithKit has no API 'mul'; valid APIs: 'add', 'divide', 'echo'"
    assert ret.args == {"inputs": {"a": 1}, "name": "mul"}
    ret = call_action(mode, ArithKit(), {"a": 1})  # a toolkit has no 'run'
    assert ret.state == API_ERROR and "valid APIs" in ret.errmsg
    ret = call_action(mode, SessionCounter(), {}, "other")
    assert ret.state == API_ERROR and "single API 'run'" in ret.errmsg
    ret = call_action(mode, ArithKit(), {}, "_private")
    assert ret.state == API_ERROR


def test_bad_arguments_are_named(mode: str) -> None:
    ret = call_action(mode, ArithKit(), {"a": 1, "c": 2, "d": 3}, "add")
    assert ret.state == ARGS and ret.errmsg == "unknown arguments: 'c', 'd'; it accepts: 'a', 'b'"
    ret = call_action(mode, ArithKit(), {"b": 1}, "add")
    assert ret.state == ARGS and ret.errmsg == "missing required arguments: 'a'"
    ret = call_action(mode, ArithKit(), "{not json", "add")
    assert ret.state == ARGS and ret.errmsg.startswith("invalid JSON arguments")
    assert '{"a": ..., "b": ...}' in ret.errmsg


def test_tool_exceptions_are_reported(mode: str) -> None:
    ret = call_action(mode, ArithKit(), {"a": 1, "b": 0}, "divide")
    assert ret.state == API_ERROR and ret.errmsg.startswith("ZeroDivisionError: ")
    assert ret.args == {"a": 1, "b": 0} and ret.type == "ArithKit.divide"
    ret = call_action(mode, ArithKit(), {"a": "x", "b": 1}, "add")
    assert ret.state == API_ERROR and ret.errmsg.startswith("TypeError:")

    class Picky(BaseAction, register=False):
        def run(self, x: int) -> int:
            """Picky."""
            raise ToolArgumentError("x must be positive")

    ret = call_action(mode, Picky(), {"x": -1})
    assert ret.state == ARGS and ret.errmsg == "ToolArgumentError: x must be positive"


def test_action_return_passes_through(mode: str) -> None:
    class Custom(BaseAction, register=False):
        def run(self, q: str) -> ActionReturn:
            """Q."""
            return ActionReturn(result=[{"type": "text", "content": q}], state=ActionStatusCode.HTTP_ERROR, errmsg="e")

    ret = call_action(mode, Custom(), {"q": "x"})
    assert ret.args == {"q": "x"} and ret.type == "Custom" and ret.state == ActionStatusCode.HTTP_ERROR


def test_session_id_reaches_tools_that_ask_for_it(mode: str) -> None:
    counter = SessionCounter()
    assert "session_id" not in str(counter.description)
    assert call_action(mode, counter, {"step": 2}, session_id="a").result[0]["content"] == "2"
    assert call_action(mode, counter, {"step": 3}, session_id="a").result[0]["content"] == "5"
    assert call_action(mode, counter, {}, session_id="b").result[0]["content"] == "1"
    # the model cannot pick a session: the parameter is not part of the description
    ret = call_action(mode, counter, {"session_id": "a"}, session_id="b")
    assert ret.state == ARGS and "session_id" in ret.errmsg
    counter.clear_session_state("a")
    assert call_action(mode, counter, {}, session_id="a").result[0]["content"] == "1"
    counter.clear_session_state()
    assert counter.session_state("b") == {}


def test_async_tools(mode: str) -> None:
    action = AsyncEcho()
    if mode == "sync":
        with pytest.raises(UserError, match="is async and cannot run inside a synchronous"):
            BaseAction.__call__(action, {"text": "x"})
    else:
        ret = resolve(action({"text": "x"}))  # AsyncActionMixin: __call__ is awaitable
        assert ret.result == [{"type": "text", "content": "x"}]
        assert resolve(action.acall({"nope": 1})).state == ARGS


def test_tuple_parser_and_function_action(mode: str) -> None:
    calc = ArithKit(parser=TupleParser)
    assert call_action(mode, calc, "(1, 2)", "add").result == [{"type": "text", "content": "3"}]
    assert call_action(mode, calc, "(1, 2, 3)", "add").state == ARGS

    async def shout(text: str) -> str:
        """Shout.

        Args:
            text: what
        """
        return text.upper()

    action = FunctionAction(shout, name="Shout")
    assert action.description["name"] == "Shout" and action.description["parameters"][0]["description"] == "what"
    if mode == "async":
        assert resolve(action.acall({"text": "hi"})).result == [{"type": "text", "content": "HI"}]


def test_construction_errors() -> None:
    with pytest.raises(UserError, match="required parameters that it does not define"):
        BaseAction({"name": "x", "parameters": [], "required": ["a"]})
    with pytest.raises(UserError, match="parser class"):
        ArithKit(parser=TupleParser(ArithKit()))  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"with a 'name'"):
        BaseAction({"description": "no name"})

    class Forgot(BaseAction, register=False):
        def __init__(self) -> None:
            pass

        def run(self) -> str:
            return ""

    with pytest.raises(UserError, match="super"):
        Forgot()()


def test_repr_enable_and_registry() -> None:
    calc = ArithKit(enable=False)
    assert repr(calc) == "ArithKit(name='ArithKit', apis=['add', 'divide', 'echo'], enable=False)"
    assert repr(SessionCounter()) == "SessionCounter(name='SessionCounter', enable=True)"
    calc.enable = True
    assert calc.enable
    assert get_tool_cls("ArithKit") is ArithKit
    assert isinstance(get_tool("SessionCounter"), SessionCounter)
    with pytest.raises(ToolNotFoundError, match="did you mean 'ArithKit'"):
        get_tool("ArithKitt")


def test_redefinition_replaces_registry_entry() -> None:
    from plait.actions import list_tools

    class RegistryDup(BaseAction):
        def run(self) -> str:
            return "one"

    position = list_tools().index("RegistryDup")

    class RegistryDup(BaseAction):  # type: ignore[no-redef]  # noqa: F811
        def run(self) -> str:
            return "two"

    assert get_tool("RegistryDup")().result == [{"type": "text", "content": "two"}]
    assert list_tools().index("RegistryDup") == position and list_tools().count("RegistryDup") == 1


def test_openai_tools_of_an_action() -> None:
    class Search(BaseAction, register=False):
        """Search things."""

        @tool_api
        def query(self, q: str, k: int = 3, tags: list[str] | None = None) -> str:
            """Run a query.

            Args:
                q: the query
                k: how many
                tags: filters
            """
            return q

    assert Search().to_openai_tools() == [
        {
            "type": "function",
            "function": {
                "name": "Search__query",
                "description": "Run a query.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "q": {"type": "string", "description": "the query"},
                        "k": {"type": "integer", "description": "how many"},
                        "tags": {"type": "array", "description": "filters", "items": {"type": "string"}},
                    },
                    "required": ["q"],
                    "additionalProperties": False,
                },
            },
        }
    ]


def test_builtin_actions(mode: str) -> None:
    from plait.actions import FinishAction, InvalidAction, NoAction

    ret = call_action(mode, FinishAction(), "the answer")
    assert (
        ret.state == OK
        and ret.valid == ActionValidCode.FINISH
        and ret.result == [{"type": "text", "content": "the answer"}]
    )
    ret = call_action(mode, InvalidAction(), None)
    assert ret.state == API_ERROR and ret.valid == ActionValidCode.INVALID
    assert ret.errmsg == "The action is invalid, please check the action name."
    assert call_action(mode, NoAction(), "custom").errmsg == "custom"
