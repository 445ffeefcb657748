"""Property tests: whatever is thrown at parsers, actions and executors, nothing escapes."""

from __future__ import annotations

from typing import Any

from _action_support import call_action, call_executor, make_executor
from hypothesis import HealthCheck, given, settings, strategies as st

from plait.actions import BaseAction, JsonParser, ParseError, TupleParser, tool_api
from plait.schema import ActionReturn, AgentMessage, FunctionCall

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
anything = (
    json_values
    | st.binary(max_size=32)
    | st.tuples(json_values, json_values)
    | st.sets(st.integers(), max_size=3)
    | st.builds(object)
    | st.builds(FunctionCall, st.text(max_size=12), json_values)
    | st.text().map(lambda t: f"```json\n{t}\n```")
    | st.dictionaries(st.sampled_from(["text", "n", "flag", "extra"]), json_values, max_size=4).map(
        lambda d: __import__("json").dumps(d) if len(d) % 2 else d
    )
)
names = st.text(max_size=20) | st.sampled_from(
    ["Tool", "Tool.run", "Kit.go", "Kit.stop", "Kit", "run", "FinishAction", "NoAction"]
)


class Tool(BaseAction, register=False):
    def run(self, text: str, n: int = 1, flag: bool = False) -> Any:
        """Repeat text.

        Args:
            text: the text
            n: repetitions
            flag: whether to fail
        """
        if flag:
            raise RuntimeError("flagged")
        return text * n


class Kit(BaseAction, register=False):
    """A toolkit."""

    @tool_api
    def go(self, value: Any = None) -> Any:
        """Return the value."""
        return value

    @tool_api
    def stop(self) -> dict[str, str]:
        """Return an error dict."""
        return {"error": "stopped"}


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(inputs=anything, api=st.sampled_from(["run", "other"]))
def test_parsers_raise_only_parse_errors(inputs: Any, api: str) -> None:
    tool = Tool()
    for parser in (JsonParser(tool), TupleParser(tool)):
        try:
            args = parser.parse_inputs(inputs, api)
        except ParseError as exc:
            assert isinstance(exc.err_msg, str) and exc.err_msg
        else:
            assert isinstance(args, dict) and set(args) <= {"text", "n", "flag"} and "text" in args


@SETTINGS
@given(inputs=anything, api=names, session=st.none() | st.integers() | st.text(max_size=5))
def test_actions_always_return(mode: str, inputs: Any, api: str, session: Any) -> None:
    for action in (Tool(), Kit(), Tool(parser=TupleParser)):
        ret = call_action(mode, action, inputs, api, session_id=session)
        assert isinstance(ret, ActionReturn) and isinstance(ret.state, int)
        assert ret.result is not None or ret.errmsg
        for item in ret.result or []:
            if isinstance(item.get("content"), str):
                item["content"].encode("utf-8")


@SETTINGS
@given(name=names, parameters=anything)
def test_executor_name_form_always_returns(mode: str, name: str, parameters: Any) -> None:
    executor = make_executor(mode, actions=[Tool(), Kit()])
    ret = call_executor(executor, name, parameters)
    assert isinstance(ret, ActionReturn)
    assert ret.result is not None or ret.errmsg


@SETTINGS
@given(
    content=anything | st.fixed_dictionaries({"name": names | json_values, "parameters": anything}),
    bare=st.booleans(),
)
def test_executor_message_form_always_returns(mode: str, content: Any, bare: bool) -> None:
    executor = make_executor(mode, actions=[Tool(), Kit()])
    message = content if bare and not isinstance(content, str) else AgentMessage(sender="agent", content=content)
    response = call_executor(executor, message, session_id=1)
    assert isinstance(response, AgentMessage) and response.sender == "ActionExecutor"
    assert isinstance(response.content, ActionReturn)
