"""Internlm2Agent / Internlm2Protocol: seed 001's constructor, the old chat / stream_chat API."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Annotated, Any

import pytest

from plait.actions import ActionExecutor, BaseAction, tool_api
from plait.agents.internlm2_agent import AgentReturn, Internlm2Agent, Internlm2Protocol
from plait.agents.stream import API_PREFIX, INTERPRETER_CN, META_CN, META_EN, PLUGIN_CN, get_plugin_prompt
from plait.exceptions import UserError
from plait.hooks import Hook
from plait.schema import ActionReturn, ActionStatusCode, AgentStatusCode
from plait.testing import ScriptedLLM

PLUGIN = "<|action_start|><|plugin|>\n"
CODE = "<|action_start|><|interpreter|>\n"
END = "<|action_end|>\n"
SEED_TOOLS = Path(__file__).resolve().parent.parent / "fixtures" / "seed_tools"


def env_checker_cls() -> type[BaseAction]:
    spec = importlib.util.spec_from_file_location("seed_tools_env_checker_internlm2", SEED_TOOLS / "env_checker.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.EnvChecker  # type: ignore[no-any-return]


class ArxivSearch(BaseAction):
    """Search information from Arxiv.org."""

    @tool_api
    def get_arxiv_article_information(self, query: Annotated[str, "the content of search query"]) -> str:
        """Run Arxiv search and get the article meta information."""
        return f"Published: 2024\nTitle: {query} survey"


class Python(BaseAction):
    """Evaluates one Python expression (a stand-in interpreter)."""

    @tool_api
    def run(self, command: Annotated[str, "an expression"]) -> str:
        """Evaluate the expression."""
        return str(eval(command, {"__builtins__": {"len": len}}))


def seed_001_agent(llm: Any) -> Internlm2Agent:
    # fmt: off
    return Internlm2Agent(
        llm=llm,
        protocol=Internlm2Protocol(
            tool=dict(
                begin='{start_token}{name}\n',
                start_token='<|action_start|>',
                name_map=dict(
                    plugin='<|plugin|>',
                    interpreter='<|interpreter|>'
                ),
                belong='assistant',
                end='<|action_end|>\n',
            ),
        ),
        max_turn=7
    )
    # fmt: on


def call(name: str, parameters: dict[str, Any]) -> str:
    return json.dumps({"name": name, "parameters": parameters})


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = types.SimpleNamespace(is_available=lambda: False, device_count=lambda: 0)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="9.9.9", cuda=cuda))


def test_seed_001_constructor_and_web_demo_wiring(fake_torch: None) -> None:
    reply = "Let me check." + PLUGIN + call("EnvChecker.check_torch_env", {}) + END
    llm = ScriptedLLM([reply, "PyTorch 9.9.9 is installed, without CUDA."])
    agent = seed_001_agent(llm)
    assert agent.max_turn == 7 and agent.plugin_executor is None
    plugin_map = {action.name: action for action in [ArxivSearch(), env_checker_cls()()]}
    agent._action_executor = ActionExecutor(actions=list(plugin_map.values()))  # as the web demo does
    agent._protocol = agent.protocol
    result = agent.chat("检查一下我的深度学习环境")
    assert isinstance(result, AgentReturn) and result.state == AgentStatusCode.END
    assert result.response == "PyTorch 9.9.9 is installed, without CUDA."
    [action] = result.actions
    assert action.type == "EnvChecker.check_torch_env" and action.state == ActionStatusCode.SUCCESS
    assert "PyTorch Version: 9.9.9" in action.format_result() and action.thought == "Let me check."
    first = llm.calls[0].messages
    assert first[0] == {"role": "system", "content": META_EN}
    plugin = first[1]
    assert plugin["name"] == "plugin" and plugin["role"] == "system"
    assert get_plugin_prompt(agent.plugin_executor, API_PREFIX) in plugin["content"]
    assert "An API of the tool 'EnvChecker'" in plugin["content"]
    assert first[2] == {"role": "user", "content": "检查一下我的深度学习环境"}
    second = llm.calls[1].messages
    assert second[-2] == {"role": "assistant", "content": reply}
    assert second[-1]["role"] == "environment" and second[-1]["name"] == "plugin"
    assert "PyTorch Version: 9.9.9" in second[-1]["content"]
    assert [step["role"] for step in result.inner_steps] == ["language", "tool", "environment", "language"]
    assert result.inner_steps[1] == {
        "role": "tool",
        "content": {"name": "EnvChecker.check_torch_env", "parameters": {}},
        "name": "plugin",
    }


def test_stream_chat_turns_are_the_inner_agents_own() -> None:
    """`stream_chat` streams the inner agent's turns (no copy of it): its hooks see every turn, as in `chat`."""

    class Count(Hook):
        def __init__(self) -> None:
            self.replies: list[str] = []

        def after_agent(self, agent: Any, message: Any, session_id: Any) -> Any:
            self.replies.append(message.content)
            return message

    replies = [f"Let me search. {PLUGIN}" + '{"name": "ArxivSearch.get_arxiv_article_information", '
               '"parameters": {"query": "agents"}}' + END, "One paper."]  # fmt: skip
    for method in ("chat", "stream_chat"):
        llm = ScriptedLLM(list(replies))
        agent = Internlm2Agent(llm, ActionExecutor([ArxivSearch()]))
        count = Count()
        agent.agent.register_hook(count)
        result = agent.chat("papers?") if method == "chat" else list(agent.stream_chat("papers?"))[-1]
        assert result.response == "One paper."
        assert count.replies == replies, method
        assert [call.method for call in llm.calls] == [method] * 2


def test_stream_chat_status_progression() -> None:
    plugin_reply = [
        "Let me search. ",
        PLUGIN,
        '{"name": "ArxivSearch.get_arxiv_article_information", ',
        '"parameters": {"query": "agents"}}',
        END,
    ]
    code_reply = ["Now count. ", CODE, "len('agents')", END]
    llm = ScriptedLLM([plugin_reply, code_reply, ["There ", "is ", "one."]])
    agent = Internlm2Agent(llm, ActionExecutor([ArxivSearch()]), ActionExecutor([Python()]))
    returns = list(agent.stream_chat("papers on agents?"))
    states = [r.state for r in returns]
    S = AgentStatusCode
    assert states == [
        S.STREAM_ING, S.PLUGIN_START, S.PLUGIN_START, S.PLUGIN_START, S.PLUGIN_START, S.PLUGIN_END, S.PLUGIN_RETURN,
        S.STREAM_ING, S.CODING, S.CODING, S.CODING, S.CODE_END, S.CODE_RETURN,
        S.STREAM_ING, S.STREAM_ING, S.STREAM_ING, S.END,
    ]  # fmt: skip
    assert returns[0].response == "Let me search. "
    assert returns[2].response == '{"name": "ArxivSearch.get_arxiv_article_information", '  # the call as it is written
    assert returns[5].response == {
        "name": "ArxivSearch.get_arxiv_article_information",
        "parameters": {"query": "agents"},
    }
    assert [a.type for a in returns[6].actions] == ["ArxivSearch.get_arxiv_article_information"]
    assert returns[11].response == "len('agents')"
    assert returns[12].actions[-1].format_result() == "6" and returns[12].actions[-1].thought == "Now count. "
    assert returns[15].response == "There is one."
    final = returns[-1]
    assert final.response == "There is one." and len(final.actions) == 2 and final.errmsg is None
    assert final.inner_steps[3] == {"role": "language", "content": "Now count. "}
    assert final.inner_steps[4] == {"role": "tool", "content": "len('agents')", "name": "interpreter"}
    assert final.inner_steps[5] == {"role": "environment", "content": "6", "name": "interpreter"}
    assert all(c.method == "stream_chat" for c in llm.calls)
    # chat() gives the same final answer through the same loop
    again = ScriptedLLM(["".join(plugin_reply), "".join(code_reply), "There is one."])
    agent.agent.llm = again
    result = agent.chat("papers on agents?")
    assert (result.response, result.inner_steps) == (final.response, final.inner_steps)
    assert [a.format_result() for a in result.actions] == [a.format_result() for a in final.actions]
    assert [c.method for c in again.calls] == ["chat"] * 3


def test_history_with_inner_steps_and_model_errors() -> None:
    llm = ScriptedLLM(["It was 6.", RuntimeError("down")])
    agent = Internlm2Agent(
        llm,
        interpreter_executor=ActionExecutor([Python()]),
        protocol=Internlm2Protocol(META_CN, INTERPRETER_CN, PLUGIN_CN),
    )
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "len of agents?"},
        {"role": "language", "content": "Count."},
        {
            "role": "tool",
            "content": {"name": "Python", "parameters": {"command": "len('agents')"}},
            "name": "interpreter",
        },
        {"role": "environment", "content": "6", "name": "interpreter"},
        {"role": "assistant", "content": "6."},
        {"role": "user", "content": "and before?"},
    ]
    result = agent.chat(history)
    assert result.response == "It was 6." and result.inner_steps == [{"role": "language", "content": "It was 6."}]
    messages = llm.calls[0].messages
    assert [m["role"] for m in messages] == [
        "system",
        "system",
        "system",
        "user",
        "assistant",
        "environment",
        "assistant",
        "user",
    ]
    assert messages[0]["content"] == META_CN and messages[1] == {"role": "system", "content": "Be brief."}
    assert messages[2]["name"] == "interpreter" and "Jupyter" in messages[2]["content"]
    assert messages[4]["content"] == "Count." + CODE + "len('agents')" + END
    assert messages[5] == {"role": "environment", "content": "6", "name": "interpreter"}
    with pytest.raises(RuntimeError, match="down"):
        list(agent.stream_chat("again"))


def test_server_error_state_stops_the_stream() -> None:
    class Failing(ScriptedLLM):
        def stream_chat(self, inputs: Any, **gen_params: Any) -> Any:
            self.calls.append(None)  # type: ignore[arg-type]
            yield AgentStatusCode.STREAM_ING, "hal", None
            yield AgentStatusCode.SERVER_ERR, "the server failed", None

    agent = Internlm2Agent(Failing([]))
    returns = list(agent.stream_chat("hi"))
    assert [r.state for r in returns] == [AgentStatusCode.STREAM_ING, AgentStatusCode.SERVER_ERR]
    assert returns[-1].errmsg == "the server failed"


def test_max_turn_and_missing_executors() -> None:
    code = "Try." + CODE + "1 + 1" + END
    llm = ScriptedLLM([code, code])
    agent = Internlm2Agent(llm, max_turn=2)
    result = agent.chat("q")
    assert result.state == AgentStatusCode.END and result.response == "Try."
    assert result.errmsg == "stopped after 2 model replies without a final answer"
    assert [a.errmsg for a in result.actions] == [
        "The interpreter tool is not available here. No tools are available; answer directly."
    ] * 2
    assert all(a.state == ActionStatusCode.API_ERROR and isinstance(a, ActionReturn) for a in result.actions)


def test_new_api_call_and_protocol_helpers() -> None:
    reply = PLUGIN + call("ArxivSearch.get_arxiv_article_information", {"query": "x"}) + END
    llm = ScriptedLLM([reply, "done"])
    agent = Internlm2Agent(llm, plugin_executor=[ArxivSearch()])
    assert agent("papers?").content == "done"
    assert [s["role"] for s in agent.get_steps()] == ["thought", "tool", "environment", "thought"]
    protocol = Internlm2Protocol(
        tool=dict(start_token="<s>", begin="{start_token}[{name}]"),
        execute=dict(fallback_role=None, begin="<out>", end="</out>"),
    )
    assert protocol.tool_begin("plugin") == "<s>[<|plugin|>]"
    parsed = protocol.parse('go<s>[<|plugin|>]{"name": "A", "parameters": {}}<|action_end|>\n')
    assert parsed["action"] == {"name": "A", "parameters": {}} and parsed["thought"] == "go"
    prompt = protocol.format([{"role": "user", "content": "q"}, {"role": "execute", "content": "r"}])
    assert prompt[-1] == {"role": "execute", "content": "<out>r</out>"}
    assert protocol.format("q", plugin_executor=ActionExecutor([ArxivSearch()]))[1]["name"] == "plugin"


def test_protocol_and_history_errors() -> None:
    with pytest.raises(UserError, match="language"):
        Internlm2Protocol(language=dict(begin="<lang>"))
    with pytest.raises(UserError, match="name_map"):
        Internlm2Protocol(tool=dict(name_map=dict(plugin="<p>")))
    with pytest.raises(UserError, match="start_token"):
        Internlm2Protocol(tool=dict(begin="{token}"))
    with pytest.raises(UserError, match="protocol"):
        Internlm2Agent(ScriptedLLM([]), protocol="nope")
    agent = Internlm2Agent(ScriptedLLM([]))
    with pytest.raises(UserError, match="unknown role"):
        agent.chat([{"role": "robot", "content": "x"}])
    with pytest.raises(UserError, match="at least one"):
        agent.chat([])
    with pytest.raises(UserError, match="takes a str"):
        agent.chat(42)
