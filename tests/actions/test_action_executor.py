"""ActionExecutor / AsyncActionExecutor: both call forms, hooks, tool set, JSON Schema."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from _action_support import call_executor, make_executor

from _support import resolve
from plait.actions import ActionExecutor, AsyncActionExecutor, AsyncActionMixin, BaseAction, tool_api
from plait.exceptions import UserError
from plait.hooks import Hook
from plait.schema import ActionReturn, ActionStatusCode, ActionValidCode, AgentMessage, FunctionCall

OK, ARGS, API_ERROR = ActionStatusCode.SUCCESS, ActionStatusCode.ARGS_ERROR, ActionStatusCode.API_ERROR


class Echo(BaseAction, register=False):
    def run(self, text: str, session_id: int = 0) -> str:
        """Echo the text.

        Args:
            text: what to echo
        """
        return f"{text}@{session_id}"


class Kit(BaseAction, register=False):
    """A toolkit."""

    @tool_api
    def upper(self, text: str) -> str:
        """Upper-case."""
        return text.upper()

    @tool_api
    def lower(self, text: str) -> str:
        """Lower-case."""
        return text.lower()


class Sleepy(BaseAction, register=False):
    def run(self, seconds: float) -> str:
        """Block the calling thread."""
        time.sleep(seconds)
        return threading.current_thread().name


class AsyncOnly(AsyncActionMixin, BaseAction, register=False):
    async def run(self) -> str:
        """Async."""
        return "async"


def text_of(ret: ActionReturn) -> Any:
    return ret.result[0]["content"] if ret.result else None


def test_name_form(mode: str) -> None:
    executor = make_executor(mode, actions=[Echo(), Kit()])
    ret = call_executor(executor, "Echo", {"text": "hi"}, session_id=7)
    assert text_of(ret) == "hi@7" and ret.valid == ActionValidCode.OPEN and ret.type == "Echo"
    assert text_of(call_executor(executor, "Kit.upper", '{"text": "a"}')) == "A"
    assert text_of(resolve(executor.forward("Kit.lower", {"text": "B"}))) == "b"
    ret = call_executor(executor, "Kit", {"text": "a"})
    assert ret.state == API_ERROR and "valid APIs: 'upper', 'lower'" in ret.errmsg
    ret = call_executor(executor, "Kit.nope", {"text": "a"})
    assert ret.state == API_ERROR and "no API 'nope'" in ret.errmsg


def test_unknown_tool_names_the_tools_that_exist(mode: str) -> None:
    executor = make_executor(mode, actions=[Echo(), Kit()])
    ret = call_executor(executor, "Ecko", {"a": 1})
    assert ret.state == API_ERROR and ret.valid == ActionValidCode.INVALID and ret.type == "InvalidAction"
    assert ret.errmsg == (
        "There is no tool named 'Ecko'. Did you mean 'Echo'? Available tools: Echo, Kit.upper, Kit.lower."
    )
    assert ret.args == {"name": "Ecko", "parameters": {"a": 1}}  # not echoed as the error message
    empty = make_executor(mode, actions=[])
    assert call_executor(empty, "x", {}).errmsg == "There is no tool named 'x'. No tools are available."


def test_disabled_tools_are_hidden_and_refused(mode: str) -> None:
    executor = make_executor(mode, actions=[Echo(enable=False), Kit()])
    assert [d["name"] for d in executor.description()] == ["Kit.upper", "Kit.lower"]
    assert executor.action_names() == ["Kit"] and executor.action_names(only_enable=False) == ["Echo", "Kit"]
    ret = call_executor(executor, "Echo", {"text": "x"})
    assert ret.state == API_ERROR and ret.errmsg.startswith("The tool 'Echo' is disabled.")
    assert not executor.is_valid("Echo") and executor.is_valid("Kit.upper")


def test_builtin_names_and_finish(mode: str) -> None:
    executor = make_executor(mode, actions=[Echo()])
    ret = call_executor(executor, "FinishAction", "done")
    assert ret.valid == ActionValidCode.FINISH and text_of(ret) == "done"
    ret = call_executor(executor, "NoAction", "format!")
    assert ret.valid == ActionValidCode.INVALID and ret.errmsg == "format!"
    assert "FinishAction" not in executor
    with_finish = make_executor(mode, actions=[Echo()], finish_in_action=True)
    assert "FinishAction" in with_finish and [d["name"] for d in with_finish.description()] == ["Echo", "FinishAction"]
    assert call_executor(with_finish, "FinishAction", {"response": "ok"}).valid == ActionValidCode.FINISH


def test_message_form(mode: str) -> None:
    executor = make_executor(mode, actions=[Echo(), Kit()])
    for content in (FunctionCall("Echo", {"text": "a"}), {"name": "Echo", "parameters": '{"text": "a"}'}):
        msg = call_executor(executor, AgentMessage(sender="agent", content=content), session_id=3)
        assert isinstance(msg, AgentMessage) and msg.sender == "ActionExecutor"
        assert isinstance(msg.content, ActionReturn) and text_of(msg.content) == "a@3"
    msg = call_executor(
        executor, AgentMessage(sender="agent", content={"name": "Echo", "parameters": {"text": "b"}}), 5
    )
    assert text_of(msg.content) == "b@5"  # lagent-style positional session id
    # a bare call (no message) also works and gives a message back
    msg = call_executor(executor, {"name": "Kit.upper", "arguments": {"text": "q"}})
    assert text_of(msg.content) == "Q"


@pytest.mark.parametrize("content", ["just text", 42, None, ["Echo"], {"parameters": {}}, {"name": 3}])
def test_message_without_a_call_is_a_no_action_error(mode: str, content: Any) -> None:
    executor = make_executor(mode, actions=[Echo()])
    msg = call_executor(executor, AgentMessage(sender="agent", content=content))
    ret = msg.content
    assert isinstance(ret, ActionReturn) and ret.type == "NoAction" and ret.state == API_ERROR
    assert "Please follow the format" in ret.errmsg


def test_hooks_replace_messages(mode: str) -> None:
    calls: list[str] = []

    class Prepare(Hook):
        def before_action(self, executor: Any, message: Any, session_id: Any) -> Any:
            calls.append(f"before:{session_id}")
            return message.model_copy(update={"content": {"name": "Echo", "parameters": {"text": message.content}}})

        def after_action(self, executor: Any, message: Any, session_id: Any) -> Any:
            calls.append("after")
            return message.model_copy(update={"content": message.content.format_result()})

    class Observe(Hook):
        def after_action(self, executor: Any, message: Any, session_id: Any) -> None:
            calls.append(f"observe:{message.content}")

    original = AgentMessage(sender="agent", content="raw")
    executor = make_executor(mode, actions=[Echo()], hooks=[Prepare(), {"type": Observe}])
    msg = call_executor(executor, original, session_id=1)
    assert msg.content == "raw@1" and original.content == "raw"
    assert calls == ["before:1", "after", "observe:raw@1"]


def test_async_hooks_and_their_errors(mode: str) -> None:
    class AsyncHook(Hook):
        async def before_action(self, executor: Any, message: Any, session_id: Any) -> Any:  # type: ignore[override]
            await asyncio.sleep(0)
            return AgentMessage(sender="hook", content=FunctionCall("Echo", {"text": "from-async-hook"}))

    executor = make_executor(mode, actions=[Echo()], hooks=[AsyncHook()])
    message = AgentMessage(sender="agent", content="ignored")
    if mode == "sync":
        with pytest.raises(UserError, match="AsyncActionExecutor"):
            executor(message)
    else:
        assert text_of(call_executor(executor, message).content) == "from-async-hook@0"


def test_register_hook_handle(mode: str) -> None:
    class Tag(Hook):
        def after_action(self, executor: Any, message: Any, session_id: Any) -> Any:
            return message.model_copy(update={"content": "tagged"})

    executor = make_executor(mode, actions=[Echo()])
    call = AgentMessage(sender="a", content=FunctionCall("Echo", {"text": "x"}))
    with executor.register_hook(Tag()):
        assert call_executor(executor, call).content == "tagged"
    assert isinstance(call_executor(executor, call).content, ActionReturn)


def test_tool_set_management(mode: str) -> None:
    actions = [Echo()]
    executor = make_executor(mode, actions=actions)
    executor.add_action(Kit())
    assert actions == [executor["Echo"]] and len(actions) == 1  # the caller's list is untouched
    assert executor.keys() == ["Echo", "Kit"] and list(executor) == ["Echo", "Kit"] and len(executor) == 2
    assert "Kit.upper" in executor and "Kit" in executor and "Kit.nope" in executor  # tool known, API checked later
    assert "Nope" not in executor and 3 not in executor
    executor.del_action("Kit")
    executor.del_action("Kit")  # absent: no error
    executor["Kit"] = {"type": Kit}
    del executor["Echo"]
    assert executor.keys() == ["Kit"]
    with pytest.raises(UserError, match="another name"):
        executor["Other"] = Echo()
    with pytest.raises(UserError, match="unique"):
        make_executor(mode, actions=[Echo(), Echo()])
    with pytest.raises(UserError, match="must be a BaseAction"):
        make_executor(mode, actions=[42])
    assert repr(executor) == f"{type(executor).__name__}(actions=['Kit'])"


def test_functions_and_classes_as_actions(mode: str) -> None:
    def add(a: int, b: int = 1) -> int:
        """Add numbers.

        Args:
            a: first
            b: second
        """
        return a + b

    executor = make_executor(mode, actions=[add, Kit])
    assert executor.keys() == ["add", "Kit"]
    assert text_of(call_executor(executor, "add", {"a": 2})) == "3"


def test_openai_tools_round_trip(mode: str) -> None:
    executor = make_executor(mode, actions=[Echo(), Kit()])
    tools = executor.openai_tools()
    assert [t["function"]["name"] for t in tools] == ["Echo", "Kit__upper", "Kit__lower"]
    assert tools[0]["function"]["parameters"]["properties"] == {
        "text": {"type": "string", "description": "what to echo"}
    }
    assert executor.resolve_name("Kit__upper") == "Kit.upper" and executor.resolve_name("Echo") == "Echo"
    assert text_of(call_executor(executor, "Kit__upper", {"text": "x"})) == "X"


def test_sync_executor_refuses_async_tools() -> None:
    executor = ActionExecutor(actions=[AsyncOnly()])
    with pytest.raises(UserError, match="is async and cannot run inside a synchronous"):
        executor("AsyncOnly", {})
    assert text_of(asyncio.run(AsyncActionExecutor(actions=[AsyncOnly()])("AsyncOnly", {}))) == "async"


def test_async_executor_does_not_block_the_loop() -> None:
    executor = AsyncActionExecutor(actions=[Sleepy()])

    async def main() -> tuple[ActionReturn, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        ret = await executor("Sleepy", {"seconds": 0.3})
        task.cancel()
        return ret, ticks

    ret, ticks = asyncio.run(main())
    assert ret.state == OK and text_of(ret) != threading.main_thread().name
    assert ticks >= 5


def test_concurrent_sessions_are_isolated() -> None:
    class Notes(BaseAction, register=False):
        @tool_api
        def add(self, note: str, session_id: int = 0) -> int:
            """Add a note."""
            notes = self.session_state(session_id).setdefault("notes", [])
            notes.append(note)
            return len(notes)

    executor = AsyncActionExecutor(actions=[Notes()])

    async def main() -> list[Any]:
        calls = [executor("Notes.add", {"note": f"n{i}"}, session_id=i % 4) for i in range(40)]
        return await asyncio.gather(*calls)

    asyncio.run(main())
    notes = executor["Notes"]
    assert sorted(len(notes.session_state(s)["notes"]) for s in range(4)) == [10, 10, 10, 10]


def test_custom_call_tools(mode: str) -> None:
    class Manager(BaseAction, register=False):
        def __call__(self, inputs: Any, name: str = "run", session_id: int = 0) -> Any:  # type: ignore[override]
            if inputs == "boom":
                raise RuntimeError("kaput")
            return {"text": f"{inputs}/{name}/{session_id}"}

    executor = make_executor(mode, actions=[Manager()])
    assert text_of(call_executor(executor, "Manager", "x", session_id=9)) == "x/run/9"
    ret = call_executor(executor, "Manager", "boom")
    assert ret.state == API_ERROR and ret.errmsg == "RuntimeError: kaput"
