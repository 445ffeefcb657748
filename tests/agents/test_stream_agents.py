"""AgentForInternLM / MathCoder (sync and async from one body), get_plugin_prompt."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Hashable
from typing import Annotated, Any

import pytest

import plait.actions
from _support import resolve
from plait.actions import ActionExecutor, BaseAction, tool_api
from plait.agents.stream import (
    API_PREFIX,
    META_CN,
    META_EN,
    AgentForInternLM,
    AsyncAgentForInternLM,
    AsyncMathCoder,
    MathCoder,
    get_plugin_prompt,
)
from plait.exceptions import UserError
from plait.prompts.parsers import ToolStatusCode
from plait.schema import ActionReturn, ActionStatusCode
from plait.testing import scripted_llm

PLUGIN = "<|action_start|><|plugin|>\n"
CODE = "<|action_start|><|interpreter|>\n"
END = "<|action_end|>\n"


class Library(BaseAction):
    """A small paper catalogue."""

    @tool_api
    def search(self, query: Annotated[str, "words to look for"], limit: int = 3) -> str:
        """Find papers whose title contains the query."""
        return f"found 2 papers about {query} (limit {limit})"

    @tool_api
    def count(self) -> int:
        """Count the papers."""
        return 42


class Weather(BaseAction):
    """Current weather of a city."""

    @tool_api
    def run(self, city: Annotated[str, "city name"]) -> str:
        """Report the weather."""
        return f"{city}: sunny"


class Python(BaseAction):
    """Runs Python code (a stand-in for IPythonInteractive)."""

    def __init__(self) -> None:
        super().__init__()
        self.sessions: list[Hashable] = []
        self.closed: list[Hashable] = []

    @tool_api
    def run(self, command: Annotated[str, "the code"], session_id: Hashable = 0) -> str:
        """Run code and return what it printed."""
        self.sessions.append(session_id)
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            exec(command, {})
        return buffer.getvalue().strip()

    def close_session(self, session_id: Hashable) -> None:
        self.closed.append(session_id)


def plugin_call(name: str, parameters: dict[str, Any], thought: str = "Let me check.") -> str:
    return thought + PLUGIN + json.dumps({"name": name, "parameters": parameters}) + END


def make(mode: str, script: list[Any], cls: type[AgentForInternLM] | None = None, **kwargs: Any) -> Any:
    if cls is None:
        cls = AgentForInternLM if mode == "sync" else AsyncAgentForInternLM
    return cls(scripted_llm(script, mode), **kwargs)


def environment(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] == "environment"]


# -- the loop -------------------------------------------------------------------------------------


def test_plugin_call_then_answer(mode: str) -> None:
    call = plugin_call("Library.search", {"query": "agents"})
    agent = make(mode, [call, "There are 2 papers."], plugins=[Library(), Weather()])
    reply = resolve(agent("How many papers about agents?"))
    assert reply.content == "There are 2 papers."
    assert reply.sender == "AgentForInternLM" if mode == "sync" else "AsyncAgentForInternLM"
    first, second = agent.agent.llm.calls
    system = [m for m in first.messages if m["role"] == "system"]
    assert system[0] == {"role": "system", "content": META_EN}
    assert system[1]["name"] == "plugin" and '"name": "Library.search"' in system[1]["content"]
    assert PLUGIN in system[1]["content"] and '"parameters"' in system[1]["content"]
    assert not any(m.get("name") == "interpreter" for m in system)  # no interpreter, no interpreter prompt
    assert second.messages[-2] == {"role": "assistant", "content": call}
    assert second.messages[-1] == {
        "role": "environment",
        "content": "found 2 papers about agents (limit 3)",
        "name": "plugin",
    }
    assert agent.get_steps() == [
        {"role": "thought", "content": "Let me check."},
        {"role": "tool", "content": {"name": "Library.search", "parameters": {"query": "agents"}}, "name": "plugin"},
        {"role": "environment", "content": "found 2 papers about agents (limit 3)", "name": "plugin"},
        {"role": "thought", "content": "There are 2 papers."},
    ]
    state = agent.state_dict()
    assert sorted(state) == ["agent.memory", "memory"]
    assert [m["content"] for m in state["memory"]] == ["How many papers about agents?", "There are 2 papers."]
    assert len(state["agent.memory"]) == 4


def test_interpreter_call_runs_code_in_the_session(mode: str) -> None:
    python = Python()
    code = "Compute it." + CODE + "print(2 ** 10)" + END
    agent = make(mode, [code, "It is 1024."], interpreter=python, plugins=[Weather()])
    reply = resolve(agent("2 to the 10th?", session_id="s1"))
    assert reply.content == "It is 1024."
    prompt = agent.agent.llm.calls[0].messages
    assert [m.get("name") for m in prompt if m["role"] == "system"] == [None, "plugin", "interpreter"]
    assert environment(agent.agent.llm.calls[1].messages) == [
        {"role": "environment", "content": "1024", "name": "interpreter"}
    ]
    assert python.sessions == ["s1"]
    assert agent.get_steps("s1")[1] == {"role": "tool", "content": "print(2 ** 10)", "name": "interpreter"}
    assert agent.get_steps() == []  # session 0 never ran


def test_parse_error_is_shown_with_a_hint(mode: str) -> None:
    broken = "Searching." + PLUGIN + '{"name": "Library.search", "parameters": {"query": }' + END
    fixed = plugin_call("Library.search", {"query": "x"})
    agent = make(mode, [broken, fixed, "done"], plugins=Library())
    assert resolve(agent("go")).content == "done"
    calls = agent.agent.llm.calls
    assert calls[1].messages[-2] == {"role": "assistant", "content": broken}  # shown as written
    hint = calls[1].messages[-1]
    assert hint["role"] == "environment" and hint["name"] == "plugin"
    assert "could not be parsed" in hint["content"] and '"parameters"' in hint["content"]
    assert environment(calls[2].messages)[-1]["content"] == "found 2 papers about x (limit 3)"
    observation = agent.agent.memory.get_memory()[2]
    assert isinstance(observation.content, ActionReturn)
    assert observation.content.state == ActionStatusCode.ARGS_ERROR


def test_missing_executor_and_unknown_plugin_become_observations(mode: str) -> None:
    code = CODE + "print(1)" + END
    unknown = plugin_call("Nope", {"query": "x"})
    bad_api = plugin_call("Library.find", {"query": "x"})
    agent = make(mode, [code, unknown, bad_api, "ok"], plugins=[Library()])
    assert resolve(agent("go")).content == "ok"
    calls = agent.agent.llm.calls
    missing = calls[1].messages[-1]
    assert missing["name"] == "interpreter"
    assert missing["content"] == "The interpreter tool is not available here. Available: plugin."
    invalid = calls[2].messages[-1]["content"]
    assert "'Nope'" in invalid and "Library.search" in invalid and "Library.count" in invalid
    wrong_api = calls[3].messages[-1]["content"]
    assert "'find'" in wrong_api and "'search'" in wrong_api


def test_no_tools_at_all(mode: str) -> None:
    agent = make(mode, [plugin_call("Weather", {"city": "Oslo"}), "fine"])
    assert resolve(agent("weather?")).content == "fine"
    first, second = agent.agent.llm.calls
    assert [m["role"] for m in first.messages] == ["system", "user"]  # the meta prompt only
    assert (
        second.messages[-1]["content"]
        == "The plugin tool is not available here. No tools are available; answer directly."
    )


def test_max_turn_returns_the_last_reply_flagged(mode: str) -> None:
    call = plugin_call("Weather", {"city": "Oslo"})
    agent = make(mode, [call, call, "never asked"], plugins=[Weather()], max_turn=2)
    reply = resolve(agent("weather?"))
    assert reply.content == call and reply.extra_info == {"max_turn_reached": True}
    assert reply.formatted["status"] == ToolStatusCode.VALID_TOOL
    assert agent.agent.llm.remaining == 1
    steps = agent.get_steps()
    assert [s["role"] for s in steps] == ["thought", "tool", "environment"] * 2  # the last call ran too


def test_custom_finish_condition_and_a_reply_without_a_call(mode: str) -> None:
    agent = make(
        mode,
        ["thinking...", "Final Answer: 7"],
        plugins=[Weather()],
        finish_condition=lambda m: "Final Answer" in m.content,
    )
    assert resolve(agent("q")).content == "Final Answer: 7"
    nudge = agent.agent.llm.calls[1].messages[-1]
    assert nudge["role"] == "environment" and "calls no tool" in nudge["content"]


def test_chinese_prompts_and_llm_errors(mode: str) -> None:
    agent = make(mode, [RuntimeError("server down")], plugins=[Weather()], language="cn")
    with pytest.raises(RuntimeError, match="server down"):
        resolve(agent("天气"))
    system = [m for m in agent.agent.llm.calls[0].messages if m["role"] == "system"]
    assert system[0]["content"] == META_CN and "你可以调用下列工具" in system[1]["content"]
    assert agent.state_dict() == {"memory": [], "agent.memory": []}  # both memories rolled back


def test_a_failure_in_a_later_turn_rolls_the_trajectory_back(mode: str) -> None:
    agent = make(mode, ["ok", plugin_call("Weather", {"city": "Oslo"}), RuntimeError("down")], plugins=[Weather()])
    resolve(agent("first"))
    with pytest.raises(RuntimeError, match="down"):
        resolve(agent("second"))
    assert [m["content"] for m in agent.state_dict()["agent.memory"]] == ["first", "ok"]
    assert [m["content"] for m in agent.state_dict()["memory"]] == ["first", "ok"]


def test_bad_arguments() -> None:
    with pytest.raises(UserError, match="language"):
        AgentForInternLM(scripted_llm([]), language="fr")
    with pytest.raises(UserError, match="max_turn"):
        AgentForInternLM(scripted_llm([]), max_turn=0)


# -- MathCoder -------------------------------------------------------------------------------------


def test_math_coder_with_a_stand_in_interpreter(mode: str) -> None:
    python = Python()
    cls = MathCoder if mode == "sync" else AsyncMathCoder
    script = ["Square it." + CODE + "print(12 * 12)" + END, "So the answer is $\\boxed{144}$."]
    coder = make(mode, script, cls=cls, interpreter=python, plugins=[Weather()], release_session=True)
    reply = resolve(coder("What is 12 squared?", session_id=3))
    assert reply.content.endswith("\\boxed{144}$.")
    instruction = coder.agent.llm.calls[0].messages[0]
    assert (
        instruction["name"] == "interpreter"
        and "\\boxed{}" in instruction["content"]
        and CODE in instruction["content"]
    )
    assert coder.plugin_executor is None
    assert python.sessions == [3] and python.closed == [3]
    assert coder.max_turn == 6


def test_math_coder_releases_the_session_on_errors_too(mode: str) -> None:
    python = Python()
    cls = MathCoder if mode == "sync" else AsyncMathCoder
    coder = make(mode, [CODE + "print(1)" + END, ValueError("boom")], cls=cls, interpreter=python)
    assert coder.release_session is (mode == "async")
    coder.release_session = True
    with pytest.raises(ValueError, match="boom"):
        resolve(coder("q"))
    assert python.closed == [0]


def test_math_coder_default_interpreter_is_resolved_lazily(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[dict[str, Any]] = []

    class FakeInterpreter(Python):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__()
            built.append(kwargs)

    name = "IPythonInteractive" if mode == "sync" else "AsyncIPythonInterpreter"
    monkeypatch.setattr(plait.actions, name, FakeInterpreter, raising=False)
    cls = MathCoder if mode == "sync" else AsyncMathCoder
    coder = make(mode, ["no code needed: $\\boxed{1}$"], cls=cls)
    assert list(coder.interpreter_executor.actions) == ["FakeInterpreter"]
    assert built == ([{"timeout": 20, "max_out_len": 8192}] if mode == "sync" else [{}])
    assert resolve(coder("1?")).content == "no code needed: $\\boxed{1}$"


# -- get_plugin_prompt -----------------------------------------------------------------------------

EXPECTED_PROMPT = """[
    {
        "name": "Library.search",
        "description": "Library: Find papers whose title contains the query.",
        "parameters": [
            {
                "name": "query",
                "type": "STRING",
                "description": "words to look for"
            },
            {
                "name": "limit",
                "type": "NUMBER",
                "description": ""
            }
        ],
        "required": [
            "query"
        ],
        "parameter_description": "PD"
    },
    {
        "name": "Library.count",
        "description": "Library: Count the papers.",
        "parameters": [],
        "required": [],
        "parameter_description": "PD"
    },
    {
        "name": "Weather",
        "description": "Weather: Report the weather.",
        "parameters": [
            {
                "name": "city",
                "type": "STRING",
                "description": "city name"
            }
        ],
        "required": [
            "city"
        ],
        "parameter_description": "PD"
    }
]"""


def _with_pd(text: str) -> str:
    pd = json.dumps(Weather().description["parameter_description"], ensure_ascii=False)
    return text.replace('"PD"', pd)


def test_get_plugin_prompt_exact_json() -> None:
    template = "{tool_name}: {description}"
    library, weather = Library(), Weather()
    prompt = get_plugin_prompt([library, weather], api_desc_template=template)
    expected = _with_pd(EXPECTED_PROMPT)
    assert prompt == expected
    assert get_plugin_prompt(ActionExecutor([library, weather]), template) == expected
    plain = json.loads(get_plugin_prompt(weather))
    assert plain[0]["description"] == "Report the weather."
    assert plain == json.loads(get_plugin_prompt({"type": Weather}))


def test_get_plugin_prompt_templates() -> None:
    disabled = Weather()
    disabled.enable = False
    assert json.loads(get_plugin_prompt(ActionExecutor([Library(), disabled]))) != []
    names = [d["name"] for d in json.loads(get_plugin_prompt(ActionExecutor([Library(), disabled])))]
    assert names == ["Library.search", "Library.count"]
    described = json.loads(get_plugin_prompt(Library(), API_PREFIX))
    assert described[1]["description"] == API_PREFIX.format(tool_name="Library", description="Count the papers.")
    toolkit = json.loads(get_plugin_prompt(Library(), "{tool_description} / {description}"))
    assert toolkit[1]["description"] == "A small paper catalogue. / Count the papers."
    assert "中文" in get_plugin_prompt(Library(), "中文 {description}")  # ensure_ascii=False
    with pytest.raises(UserError, match="api_desc_template"):
        get_plugin_prompt(Library(), "{nope}")


def test_math_coder_with_the_ipython_tool(mode: str) -> None:
    name = "IPythonInteractive" if mode == "sync" else "AsyncIPythonInteractive"
    cls = MathCoder if mode == "sync" else AsyncMathCoder
    script = ["Store it." + CODE + "a = 12\nprint(a * a)" + END, "Add one." + CODE + "a + 1" + END, "$\\boxed{145}$"]
    coder = make(
        mode, script, cls=cls, interpreter={"type": f"plait.actions.ipython_interactive.{name}", "timeout": 20}
    )
    try:
        assert resolve(coder("12 squared, plus one?", session_id="m")).content == "$\\boxed{145}$"
        observations = [s["content"] for s in coder.get_steps("m") if s["role"] == "environment"]
        assert observations == ["144", "13"]  # one interpreter session across the turns
    finally:
        for action in coder.interpreter_executor.actions.values():
            action.shutdown()


def test_lagent_example_plugin_parser_config(mode: str) -> None:
    # examples/run_agent_lmdeploy.py: a plain PluginParser whose prompt lists the plugins
    from plait.agents.stream import PLUGIN_CN
    from plait.prompts.parsers import PluginParser

    plugins = [Weather()]
    parser = dict(type=PluginParser, template=PLUGIN_CN, prompt=get_plugin_prompt(plugins))
    agent = make(mode, [plugin_call("Weather", {"city": "Oslo"}), "晴"], plugins=plugins, output_format=parser)
    assert resolve(agent("奥斯陆天气")).content == "晴"
    instruction = agent.agent.llm.calls[0].messages[0]
    assert instruction["name"] == "plugin" and '"name": "Weather"' in instruction["content"]
    assert PLUGIN + '{"name": "<工具名>"' in instruction["content"]
    assert environment(agent.agent.llm.calls[1].messages)[0]["content"] == "Oslo: sunny"


def test_seed_000_data_visualizer_tool_description() -> None:
    from plait.actions.web_browser import WebBrowser

    browser = WebBrowser("BingSearch", api_key="YOUR_BING_API_KEY")
    names = [api["name"] for api in json.loads(get_plugin_prompt(browser))]
    assert names == [f"WebBrowser.{api}" for api in browser.api_names]
