"""MCPToolkit against a real MCP server (the official SDK's, see demo_server.py): stdio and Streamable HTTP.

Every behaviour runs in sync (`MCPToolkit`) and async (`AsyncMCPToolkit`) mode from one body.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _mcp_support import PNG_MAGIC, SERVER, free_port, toolkit_class

from _support import resolve
from plait.actions import ActionExecutor, AsyncActionExecutor
from plait.actions.mcp import AsyncMCPToolkit, MCPToolkit
from plait.exceptions import MCPError, UserError
from plait.schema import ActionStatusCode, AgentMessage, FunctionCall


def call(toolkit: MCPToolkit, inputs: Any, name: str) -> Any:
    return resolve(toolkit(inputs, name))


def test_tools_become_the_apis_of_one_toolkit(make_toolkit: Callable[..., MCPToolkit]) -> None:
    toolkit = make_toolkit()
    assert toolkit.name == "demo_server"
    assert toolkit.is_toolkit
    assert toolkit.api_names == [
        "add",
        "echo",
        "count",
        "fail",
        "pixel",
        "environment",
        "slow",
        "meet",
        "crash",
        "grow",
        "polled",
    ]
    assert toolkit.description["description"].startswith("Arithmetic, echo and failure tools")
    add = toolkit.description["api_list"][0]
    assert add["description"] == "Add two integers."
    assert [(p["name"], p["type"]) for p in add["parameters"]] == [("a", "NUMBER"), ("b", "NUMBER")]
    assert add["required"] == ["a", "b"]
    assert toolkit.server_info["name"] == "demo-server"
    # the server's JSON Schemas are what native tool calling sends to the model
    [echo] = [t for t in toolkit.to_openai_tools() if t["function"]["name"] == "demo_server__echo"]
    properties = echo["function"]["parameters"]["properties"]
    assert properties["times"] == {"default": 1, "title": "Times", "type": "integer"}
    assert echo["function"]["parameters"]["required"] == ["text"]


def test_calls_return_text_results(make_toolkit: Callable[..., MCPToolkit]) -> None:
    toolkit = make_toolkit()
    ret = call(toolkit, {"a": 2, "b": 40}, "add")
    assert (ret.state, ret.type) == (ActionStatusCode.SUCCESS, "demo_server.add")
    assert ret.result == [{"type": "text", "content": "42"}]
    assert call(toolkit, '{"text": "hi", "times": 3}', "demo_server.echo").result[0]["content"] == "hi hi hi"


def test_errors_are_action_returns_for_the_model(make_toolkit: Callable[..., MCPToolkit]) -> None:
    toolkit = make_toolkit()
    failed = call(toolkit, {"message": "boom"}, "fail")
    assert failed.state == ActionStatusCode.API_ERROR and "fail" in failed.errmsg
    rejected = call(toolkit, {"a": "x", "b": 1}, "add")  # the server validates the types
    assert rejected.state == ActionStatusCode.API_ERROR and "valid integer" in rejected.errmsg
    missing = call(toolkit, {"a": 1}, "add")  # caught before the server is asked
    assert missing.state == ActionStatusCode.ARGS_ERROR and "'b'" in missing.errmsg
    unknown = call(toolkit, {}, "divide")
    assert unknown.state == ActionStatusCode.API_ERROR and "'add'" in unknown.errmsg


def test_images_are_saved_as_files(make_toolkit: Callable[..., MCPToolkit], tmp_path: Path) -> None:
    toolkit = make_toolkit(work_dir=str(tmp_path / "media"))
    [item] = call(toolkit, {}, "pixel").result
    assert item["type"] == "image"
    path = Path(item["content"])
    assert path.parent == tmp_path / "media" and path.suffix == ".png"
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_server_environment_is_minimal_unless_asked(
    make_toolkit: Callable[..., MCPToolkit], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAIT_TEST_SECRET", "s3cret")
    plain = make_toolkit(env={"GIVEN": "yes"})
    assert call(plain, {"name": "PLAIT_TEST_SECRET"}, "environment").result[0]["content"] == "<unset>"
    assert call(plain, {"name": "GIVEN"}, "environment").result[0]["content"] == "yes"
    inherited = make_toolkit(inherit_env=True)
    assert call(inherited, {"name": "PLAIT_TEST_SECRET"}, "environment").result[0]["content"] == "s3cret"


def test_a_crashed_server_is_reported_then_restarted(make_toolkit: Callable[..., MCPToolkit]) -> None:
    toolkit = make_toolkit()
    assert call(toolkit, {}, "count").result[0]["content"] == "1"
    crashed = call(toolkit, {}, "crash")
    assert crashed.state == ActionStatusCode.API_ERROR and "exited with status 3" in crashed.errmsg
    assert call(toolkit, {}, "count").result[0]["content"] == "1"  # a new server process


def test_a_slow_call_times_out_and_the_toolkit_keeps_working(make_toolkit: Callable[..., MCPToolkit]) -> None:
    # the limit holds for every request: tools/list and add on a server just started must meet it too
    # (they need milliseconds, but a crowded machine stretched a fresh server's first answers past 2 s)
    toolkit = make_toolkit(timeout=10.0)
    slow = call(toolkit, {"seconds": 600}, "slow")  # only the deadline can end it
    assert slow.state == ActionStatusCode.API_ERROR and "did not answer tools/call within 10.0 s" in slow.errmsg
    assert call(toolkit, {"a": 1, "b": 1}, "add").result[0]["content"] == "2"


def _running(marker: str) -> list[int]:
    """The live processes whose command line holds `marker`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if marker.encode() in fh.read().split(b"\0"):
                    with open(f"/proc/{pid}/stat", "rb") as stat:
                        if stat.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                            found.append(int(pid))
        except OSError:
            continue
    return found


def test_a_server_that_never_answers_fails_the_handshake_in_time(mode: str) -> None:
    marker = f"plait-mute-{os.getpid()}-{mode}"
    mute = [sys.executable, "-c", "import time; time.sleep(600)", marker]
    with pytest.raises(MCPError, match=r"did not answer initialize within 0\.5 s"):
        toolkit_class(mode)(mute[0], mute[1:], connect_timeout=0.5)  # the deadline hit (only it can end this)
    for _ in range(600):  # the mute process was stopped, not left running (nor waited for: it sleeps 600 s)
        if not _running(marker):
            break
        time.sleep(0.1)
    assert _running(marker) == []


def test_options_pick_tools_and_name(make_toolkit: Callable[..., MCPToolkit]) -> None:
    toolkit = make_toolkit(tools=["add", "echo"], name="math")
    assert (toolkit.name, toolkit.api_names) == ("math", ["add", "echo"])
    assert call(toolkit, {"a": 1, "b": 2}, "math.add").result[0]["content"] == "3"
    with pytest.raises(MCPError, match=r"no tools \['divide'\]"):
        make_toolkit(tools=["divide"])


def test_construction_errors_are_clear(mode: str, tmp_path: Path) -> None:
    cls = toolkit_class(mode)
    with pytest.raises(UserError, match=r"command= .* or url="):
        cls()
    with pytest.raises(UserError, match=r"command= .* or url="):
        cls("python", url="http://127.0.0.1:1/mcp")
    with pytest.raises(MCPError, match="could not start the MCP server"):
        cls(str(tmp_path / "no-such-program"))
    with pytest.raises(MCPError, match="exited with status 2"):
        cls(sys.executable, [str(tmp_path / "missing.py")])
    with pytest.raises(MCPError, match="could not reach the MCP server"):
        cls(url=f"http://127.0.0.1:{free_port()}/mcp")


def test_close_stops_the_server_process(make_toolkit: Callable[..., MCPToolkit]) -> None:
    toolkit = make_toolkit()
    session = toolkit._connection.session
    assert session is not None
    process = session.transport.process  # type: ignore[attr-defined]
    assert process is not None and process.returncode is None
    toolkit.close()
    assert process.returncode is not None


def test_executor_and_native_tool_names(mode: str, make_toolkit: Callable[..., MCPToolkit]) -> None:
    toolkit = make_toolkit()
    executor = (AsyncActionExecutor if mode == "async" else ActionExecutor)([toolkit])
    assert "demo_server.add" in [api["name"] for api in executor.description()]
    name = executor.resolve_name("demo_server__add")
    message = resolve(executor(AgentMessage(sender="a", content=FunctionCall(name, {"a": 20, "b": 22}))))
    assert message.sender == "ActionExecutor"
    assert message.content.result == [{"type": "text", "content": "42"}]


def test_function_calling_agent_uses_mcp_tools(mode: str, make_toolkit: Callable[..., MCPToolkit]) -> None:
    from plait.agents.function_calling import AsyncFunctionCallingAgent, FunctionCallingAgent
    from plait.llms.response import ModelResponse, ToolCall
    from plait.testing import AsyncScriptedLLM, ScriptedLLM

    script = [ModelResponse(tool_calls=[ToolCall("c1", "demo_server__add", '{"a": 37, "b": 5}')]), "It is 42."]
    llm = AsyncScriptedLLM(script) if mode == "async" else ScriptedLLM(script)
    cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
    agent = cls(llm, [make_toolkit()], "Use tools.")
    assert resolve(agent("What is 37 + 5?")).content == "It is 42."
    tool_message = [m for m in llm.calls[1].messages if m["role"] == "tool"]
    assert tool_message[0]["content"] == "42"


def test_async_calls_run_concurrently_on_one_connection() -> None:
    toolkit = AsyncMCPToolkit(sys.executable, [SERVER])

    async def run() -> list[Any]:
        return await asyncio.gather(*(toolkit({"parties": 10}, "meet") for _ in range(10)))

    try:
        results = asyncio.run(run())
        # each call answered 'met': all ten were running in the server at once (one after another: 'alone')
        assert [r.result for r in results] == [[{"type": "text", "content": "met"}]] * 10
    finally:
        toolkit.close()


# -- Streamable HTTP ------------------------------------------------------------------------


def test_streamable_http_server(mode: str, http_server: str, tmp_path: Path) -> None:
    toolkit = toolkit_class(mode)(url=http_server, work_dir=str(tmp_path))
    try:
        assert toolkit.name == "demo_server"
        session = toolkit._connection.session
        assert session is not None and session.transport.session_id  # type: ignore[attr-defined]
        assert call(toolkit, {"a": 1, "b": 2}, "add").result[0]["content"] == "3"
        assert call(toolkit, {}, "count").result[0]["content"] == "1"
        assert call(toolkit, {}, "count").result[0]["content"] == "2"  # the same server session
        assert Path(call(toolkit, {}, "pixel").result[0]["content"]).read_bytes().startswith(PNG_MAGIC)
        assert call(toolkit, {"message": "no"}, "fail").state == ActionStatusCode.API_ERROR
    finally:
        toolkit.close()
    assert os.listdir(tmp_path)


def test_an_mcp_toolkit_marked_at_build_time_pauses_for_approval(
    mode: str, make_toolkit: Callable[..., MCPToolkit]
) -> None:
    from plait.agents.function_calling import AsyncFunctionCallingAgent, FunctionCallingAgent
    from plait.llms.response import ModelResponse, ToolCall
    from plait.schema import AgentStatusCode
    from plait.testing import AsyncScriptedLLM, ScriptedLLM

    toolkit = make_toolkit(requires_approval=lambda name, args: name == "demo_server.add")
    assert toolkit.needs_approval("add", {"a": 1, "b": 2}) and not toolkit.needs_approval("echo", {"text": "x"})
    script = [ModelResponse(tool_calls=[ToolCall("c1", "demo_server__add", '{"a": 37, "b": 5}')]), "It is 42."]
    llm = AsyncScriptedLLM(script) if mode == "async" else ScriptedLLM(script)
    agent = (AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent)(llm, [toolkit])
    paused = resolve(agent("What is 37 + 5?"))
    assert paused.stream_state == AgentStatusCode.INTERRUPTED and paused.content[0].id == "c1"
    assert resolve(agent.resume({"c1": True})).content == "It is 42."
