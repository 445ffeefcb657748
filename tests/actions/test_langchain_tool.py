"""LangChain tools as plait actions (`LangChainTool`), and plait actions as LangChain tools (`as_langchain_tool`)."""

from __future__ import annotations

import enum
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import pytest
import requests
from _action_support import call_action, call_executor, make_executor
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException, tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from _support import resolve
from plait.actions import (
    ActionExecutor,
    AsyncActionMixin,
    AsyncLangChainTool,
    BaseAction,
    Calculator,
    LangChainTool,
    tool_api,
)
from plait.agents import AsyncConversationalAgent, AsyncFunctionCallingAgent, ConversationalAgent, FunctionCallingAgent
from plait.exceptions import UserError
from plait.llms.response import ModelResponse, ToolCall
from plait.schema import ActionStatusCode
from plait.testing import Canned, FakeHTTPServer, RecordedRequest, scripted_llm

ES_URL = ""  # the Elasticsearch stand-in of seed 004, set by the `elastic` fixture


# Seed 004's tool, as written there. LangChain >= 0.1 is pydantic 2, which rejects the seed's bare
# `name = "Search"` (PydanticUserError: "Field 'name' ... overridden by a non-annotated attribute"),
# so the two class attributes carry their `str` annotations; everything else is the seed's code.
class CustomSearchTool(BaseTool):
    name: str = "Search"
    description: str = "useful for when you need to answer questions about current events"

    def _run(self, query: str) -> str:
        """Use the tool."""
        auth = ("elastic", "xxxx")
        session = requests.Session()
        session.trust_env = False
        ret = session.get(
            f"{ES_URL}/summary_section/_search",
            auth=auth,
            json={"query": {"multi_match": {"query": query, "fields": ["content", "title"]}}, "size": 5},
        )
        print(ret.text)
        if ret.status_code != 200 or ret.json().get("hits").get("total").get("value") == 0:
            return "No good search result found"
        else:
            retstr = ""
            for hit in ret.json().get("hits").get("hits"):
                retstr += f"标题: {hit.get('_source').get('title')} 内容: {hit.get('_source').get('content')}\n"
            return retstr

    async def _arun(self, query: str) -> str:
        """Use the tool asynchronously."""
        raise NotImplementedError("BingSearchRun does not support async")


HITS = [
    {"_source": {"title": "5G时代下科技股该如何投资", "content": "最后我们还是落到TMT的行业方面。"}},
    {"_source": {"title": "中国清洁服务的增长逻辑", "content": "清洁服务行业需要一个转型的契机"}},
]


def _search(request: RecordedRequest) -> Canned:
    query = request.json()["query"]["multi_match"]["query"]  # type: ignore[call-overload,index]
    hits = HITS if "TMT" in query else []
    return Canned.json({"hits": {"total": {"value": len(hits)}, "hits": hits}})


@pytest.fixture
def elastic() -> Iterator[FakeHTTPServer]:
    """A real HTTP server on 127.0.0.1 answering seed 004's ``/summary_section/_search`` like Elasticsearch."""
    global ES_URL
    with FakeHTTPServer({("GET", "/summary_section/_search"): _search}) as server:
        ES_URL = server.base_url
        yield server


def wrap(mode: str, lc_tool: BaseTool, **kwargs: Any) -> LangChainTool:
    return LangChainTool(lc_tool, **kwargs) if mode == "sync" else AsyncLangChainTool(lc_tool, **kwargs)


def blob(action: str, action_input: Any) -> str:
    return f"```json\n{json.dumps({'action': action, 'action_input': action_input}, ensure_ascii=False)}\n```"


def test_seed004_custom_search_tool_in_conversational_agent(mode: str, elastic: FakeHTTPServer) -> None:
    question = "清洁和TMT行业哪个行业更利好"
    script = [blob("Search", question), blob("Final Answer", "根据提供的信息,TMT行业在未来可能会有更好的发展前景。")]
    cls = ConversationalAgent if mode == "sync" else AsyncConversationalAgent
    agent = cls(scripted_llm(script, mode), [wrap(mode, CustomSearchTool())])
    reply = resolve(agent(question))
    assert reply.content == "根据提供的信息,TMT行业在未来可能会有更好的发展前景。"
    human = agent.llm.calls[0].messages[1]["content"]
    assert "> Search: useful for when you need to answer questions about current events" in human
    [request] = elastic.requests_to("/summary_section/_search")
    assert request.json() == {"query": {"multi_match": {"query": question, "fields": ["content", "title"]}}, "size": 5}
    assert request.headers["authorization"] == "Basic ZWxhc3RpYzp4eHh4"  # elastic:xxxx
    [step] = reply.extra_info["intermediate_steps"]
    expected = (
        "标题: 5G时代下科技股该如何投资 内容: 最后我们还是落到TMT的行业方面。\n"
        "标题: 中国清洁服务的增长逻辑 内容: 清洁服务行业需要一个转型的契机"
    )
    assert step["tool"] == "Search" and step["tool_input"] == question
    assert step["observation"].strip() == expected
    assert agent.llm.calls[1].messages[-1]["content"].startswith(f"TOOL RESPONSE:\n---------------------\n{expected}")


def test_seed004_custom_search_tool_in_function_calling_agent(mode: str, elastic: FakeHTTPServer) -> None:
    call = ModelResponse(tool_calls=[ToolCall("c1", "Search", '{"query": "cleaning"}')], finish_reason="tool_calls")
    cls = FunctionCallingAgent if mode == "sync" else AsyncFunctionCallingAgent
    agent = cls(scripted_llm([call, "Nothing found about cleaning."], mode), [wrap(mode, CustomSearchTool())])
    reply = resolve(agent("Any news about cleaning?"))
    assert reply.content == "Nothing found about cleaning."
    first, second = agent.llm.calls
    [spec] = first.params["tools"]
    assert spec["function"] == {
        "name": "Search",
        "description": "useful for when you need to answer questions about current events",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
            "additionalProperties": False,
        },
    }
    assert second.messages[-1]["role"] == "tool" and second.messages[-1]["content"] == "No good search result found"
    assert elastic.requests_to("/summary_section/_search")[0].json()["query"]["multi_match"]["query"] == "cleaning"  # type: ignore[call-overload,index]


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


@tool(parse_docstring=True)
def forecast(
    city: str,
    days: int | None = None,
    unit: Unit = Unit.CELSIUS,
    detail: Literal["short", "long"] = "short",
    hours: list[int] | None = None,
    threshold: float = 0.5,
    alerts: bool = False,
) -> str:
    """Weather forecast for a city.

    Args:
        city: the city name
        days: how many days ahead
        unit: temperature unit
        detail: how much to say
        hours: hours of the day to include
        threshold: rain probability worth mentioning
        alerts: include weather alerts
    """
    if city == "Atlantis":
        raise ToolException(f"no weather station in {city}")
    if city == "Nowhere":
        raise RuntimeError("the station is down")
    return f"{city}: {days} {unit.value} {detail} {hours} {threshold} {alerts}"


def test_schema_mapping_keeps_required_types_enums_and_the_json_schema() -> None:
    action = LangChainTool(forecast)
    description = action.description
    assert action.name == "forecast" and description["description"].startswith("Weather forecast for a city.")
    assert description["required"] == ["city"]
    kinds = {p["name"]: (p["type"], p["description"]) for p in description["parameters"]}
    assert kinds == {
        "city": ("STRING", "the city name"),
        "days": ("NUMBER", "how many days ahead"),
        "unit": ("STRING", "temperature unit"),
        "detail": ("STRING", "how much to say"),
        "hours": ("Array", "hours of the day to include"),
        "threshold": ("FLOAT", "rain probability worth mentioning"),
        "alerts": ("BOOLEAN", "include weather alerts"),
    }
    [exported] = action.to_openai_tools()
    properties = exported["function"]["parameters"]["properties"]
    assert properties["unit"]["enum"] == ["celsius", "fahrenheit"]  # the enum's $ref, inlined
    assert properties["detail"]["enum"] == ["short", "long"]
    assert properties["days"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert properties == convert_to_openai_tool(forecast)["function"]["parameters"]["properties"]
    assert "$ref" not in json.dumps(exported)


def test_arguments_reach_the_tool_validated_by_langchain(mode: str) -> None:
    executor = make_executor(mode, [wrap(mode, forecast)])
    arguments = {"city": "Oslo", "days": 3, "unit": "fahrenheit", "hours": [9, 18], "alerts": True}
    ret = call_executor(executor, "forecast", arguments)
    assert ret.result == [{"type": "text", "content": "Oslo: 3 fahrenheit short [9, 18] 0.5 True"}]
    assert ret.state == ActionStatusCode.SUCCESS and ret.args == arguments


@pytest.mark.parametrize(
    ("arguments", "state", "errmsg"),
    [
        ({"city": "Atlantis"}, ActionStatusCode.API_ERROR, "ToolException: no weather station in Atlantis"),
        ({"city": "Nowhere"}, ActionStatusCode.API_ERROR, "RuntimeError: the station is down"),
        (
            {"city": "Oslo", "days": "many"},
            ActionStatusCode.ARGS_ERROR,
            "ToolArgumentError: invalid arguments: days: Input should be a valid integer, "
            "unable to parse string as an integer",
        ),
        (
            {"city": "Oslo", "unit": "kelvin"},
            ActionStatusCode.ARGS_ERROR,
            "ToolArgumentError: invalid arguments: unit: Input should be 'celsius' or 'fahrenheit'",
        ),
        ({"town": "Oslo"}, ActionStatusCode.ARGS_ERROR, "unknown arguments: 'town'; it accepts: 'city', 'days',"),
        ({}, ActionStatusCode.ARGS_ERROR, "missing required arguments: 'city'"),
    ],
)
def test_tool_errors_are_returns_for_the_model(
    mode: str, arguments: dict[str, Any], state: ActionStatusCode, errmsg: str
) -> None:
    ret = call_action(mode, wrap(mode, forecast), arguments)
    assert ret.state == state and ret.result is None
    assert ret.errmsg.startswith(errmsg)


def test_a_tool_that_handles_its_own_errors_answers_with_them(mode: str) -> None:
    def lookup(key: str) -> str:
        """Look a key up."""
        raise ToolException(f"{key} is not stored")

    handled = StructuredTool.from_function(lookup, handle_tool_error=True)
    ret = call_action(mode, wrap(mode, handled), {"key": "k1"})
    assert ret.state == ActionStatusCode.SUCCESS and ret.result == [{"type": "text", "content": "k1 is not stored"}]


def test_the_async_twin_awaits_the_tools_coroutine(mode: str) -> None:
    used: list[str] = []

    def shout(text: str) -> str:
        """Upper-case a text."""
        used.append("func")
        return text.upper()

    async def ashout(text: str) -> str:
        used.append("coroutine")
        return text.upper() + "!"

    both = StructuredTool.from_function(shout, coroutine=ashout)
    ret = call_action(mode, wrap(mode, both), '{"text": "hi"}')
    assert ret.result == [{"type": "text", "content": "HI" if mode == "sync" else "HI!"}]
    assert used == (["func"] if mode == "sync" else ["coroutine"])


def test_a_sync_only_tool_runs_from_async_code_too(elastic: FakeHTTPServer) -> None:
    ret = resolve(AsyncLangChainTool(CustomSearchTool())({"query": "TMT"}))  # its _arun raises NotImplementedError
    assert ret.state == ActionStatusCode.SUCCESS and ret.result[0]["content"].startswith("标题: 5G时代下科技股")


def test_name_override_and_non_tools_are_refused() -> None:
    assert LangChainTool(forecast, name="weather").name == "weather"
    with pytest.raises(UserError, match=r"wraps a LangChain BaseTool .* not function"):
        LangChainTool(lambda: None)  # type: ignore[arg-type]


# -- the reverse: plait actions as LangChain tools ----------------------------------------------
class Arithmetic(BaseAction):
    """Exact integer arithmetic."""

    @tool_api
    def multiply(self, a: int, b: int) -> int:
        """Multiply two integers.

        Args:
            a: the first factor
            b: the second factor
        """
        return a * b

    @tool_api
    def negate(self, a: Annotated[int, "the number"]) -> int:
        """Negate an integer."""
        return -a


class AsyncEcho(AsyncActionMixin, BaseAction):
    """Echo a text."""

    async def run(self, text: str) -> str:
        """Echo a text back.

        Args:
            text: what to echo
        """
        return f"echo: {text}"


def invoke(mode: str, lc_tool: BaseTool, payload: Any) -> Any:
    return lc_tool.invoke(payload) if mode == "sync" else resolve(lc_tool.ainvoke(payload))


def test_as_langchain_tool_is_invoked_by_langchain(mode: str) -> None:
    calculator = Calculator().as_langchain_tool()
    assert isinstance(calculator, StructuredTool)
    assert calculator.name == "Calculator" and calculator.args == {
        "expression": {
            "type": "string",
            "description": "the expression to compute, for example `37 * 91` or `sqrt(2) / 3`",
        }
    }
    assert invoke(mode, calculator, {"expression": "37 * 91"}) == "3367"
    # a model's tool call, as LangChain's agents pass it: a ToolMessage comes back
    message = invoke(
        mode, calculator, {"name": "Calculator", "args": {"expression": "2 ** 10"}, "id": "c1", "type": "tool_call"}
    )
    assert isinstance(message, ToolMessage) and message.content == "1024" and message.tool_call_id == "c1"
    # a failed plait call is the tool's error message, not an exception
    assert invoke(mode, calculator, {"expression": "import os"}) == (
        "ToolArgumentError: 'import os' is not an arithmetic expression, e.g. '37 * 91'"
    )


def test_each_api_of_a_toolkit_is_its_own_langchain_tool(mode: str) -> None:
    toolkit = Arithmetic()
    multiply, negate = (toolkit.as_langchain_tool(api) for api in toolkit.api_names)
    assert (multiply.name, negate.name) == ("Arithmetic__multiply", "Arithmetic__negate")
    assert multiply.description == "Multiply two integers."
    assert invoke(mode, multiply, {"a": 6, "b": 7}) == "42" and invoke(mode, negate, {"a": 5}) == "-5"
    with pytest.raises(UserError, match="is a toolkit: pass api= one of \\['multiply', 'negate'\\]"):
        toolkit.as_langchain_tool()
    with pytest.raises(UserError, match="has no API 'divide'"):
        toolkit.as_langchain_tool("divide")


def test_an_async_plait_tool_is_awaited_by_langchain() -> None:
    echo = AsyncEcho().as_langchain_tool()
    assert resolve(echo.ainvoke({"text": "hi"})) == "echo: hi"
    with pytest.raises(NotImplementedError):  # LangChain's answer for a tool with only a coroutine
        echo.invoke({"text": "hi"})


def test_round_trip_plait_to_langchain_to_plait(mode: str) -> None:
    back = wrap(mode, Calculator().as_langchain_tool())
    assert back.name == "Calculator"
    assert back.description["parameters"] == [
        {
            "name": "expression",
            "type": "STRING",
            "description": "the expression to compute, for example `37 * 91` or `sqrt(2) / 3`",
            "json_schema": {
                "type": "string",
                "description": "the expression to compute, for example `37 * 91` or `sqrt(2) / 3`",
            },
        }
    ]
    assert call_action(mode, back, {"expression": "6 * 7"}).result == [{"type": "text", "content": "42"}]
    assert ActionExecutor([back]).openai_tools() == ActionExecutor([Calculator()]).openai_tools()


def test_without_langchain_the_error_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['langchain_core'] = None\n"
        "from plait.actions import Calculator, LangChainTool\n"
        "for build in (lambda: LangChainTool(object()), lambda: Calculator().as_langchain_tool()):\n"
        "    try:\n        build()\n    except ImportError as exc:\n        print(f'{type(exc).__name__}: {exc}')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    assert len(lines) == 2 and all("pip install 'plait[langchain]'" in line for line in lines)
    assert lines[0].startswith("MissingDependencyError: LangChainTool needs the optional package 'langchain_core")
