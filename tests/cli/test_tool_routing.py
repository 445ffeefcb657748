"""Issue 34, item 4: tools only when they help, decided in one place (`plait.agents.routing`) for every app.

On the embedded default model (pinned: the apps pick the best installed catalogue model), a
poem, colours and a name reach no tool in `plait chat` and `plait serve`; arithmetic still
calls the Calculator. The agent-level rule runs in sync and async from one body on a
scripted server.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from _support import resolve
from plait.actions import Calculator
from plait.agents import AsyncFunctionCallingAgent, FunctionCallingAgent
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.testing.fake_openai import FakeOpenAIServer, Reply

SRC = str(Path(__file__).resolve().parents[2] / "src")
SMALL_TALK = ("Write a short poem about the sea.", "Name three colours.", "My name is Ada.")
ARITHMETIC = "What is 37 * 91?"


def _model(body: dict[str, Any]) -> Reply:
    if body.get("tool_choice") == "required":
        return Reply(tool_calls=[("Calculator", {"expression": "37 * 91"})])
    return Reply("fine")


def test_a_routed_agent_decides_the_first_call_from_the_question(mode: str) -> None:
    with FakeOpenAIServer(handler=_model) as server:
        llm = (AsyncGPTAPI if mode == "async" else GPTAPI)("m", api_base=server.base_url, key=None, retry=0)
        cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
        agent = cls(llm, [Calculator()], tool_choice="routed")
        for question in SMALL_TALK:
            resolve(agent(question, session_id=question))
        assert [body["tool_choice"] for body in server.requests] == ["none"] * 3
        resolve(agent(ARITHMETIC, session_id="sum"))
        assert [body["tool_choice"] for body in server.requests[3:]] == ["required", "auto"]  # forced once
        assert server.requests[-1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_0", "content": "3367"}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "PLAIT_API_BASE": "", "OPENAI_BASE_URL": "", "PLAIT_MODEL": ""}


def _chat(*questions: str) -> str:
    chat = subprocess.run(
        [sys.executable, "-m", "plait.cli", "chat", "--model", "smollm2-135m", "--max-new-tokens", "48"],
        input="\n".join([*questions, "/quit"]) + "\n",
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
        check=False,
    )
    assert chat.returncode == 0, chat.stderr
    return chat.stdout


def test_plait_chat_on_the_embedded_model_calls_the_calculator_for_arithmetic_only() -> None:
    talk = _chat(*SMALL_TALK)
    assert "[tool call]" not in talk, talk
    arithmetic = _chat(ARITHMETIC)
    assert "[tool call] Calculator" in arithmetic, arithmetic


def test_plait_serve_on_the_embedded_model_calls_the_calculator_for_arithmetic_only() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "plait.cli",
            "serve",
            "--port",
            str(port),
            "--max-new-tokens",
            "48",
            "--temperature",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        deadline = time.monotonic() + 300
        while True:  # wait until it listens
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health_check", timeout=5).close()
                break
            except OSError:
                assert time.monotonic() < deadline and serve.poll() is None, "plait serve did not start"
                time.sleep(0.2)
        for number, question in enumerate([*SMALL_TALK, ARITHMETIC]):
            body = json.dumps({"model": "plait", "messages": [{"role": "user", "content": question}]}).encode()
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                data=body,
                headers={"Content-Type": "application/json", "X-Session-Id": f"s{number}"},
            )
            with urllib.request.urlopen(request, timeout=300) as response:
                assert response.status == 200
                json.loads(response.read())
        serve.terminate()
        out, err = serve.communicate(timeout=60)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.communicate()
    tool_lines = [line for line in (out + err).splitlines() if line.startswith("[tool call")]
    sessions = {line.split("session=", 1)[1].split("]", 1)[0] for line in tool_lines}
    assert tool_lines and all("] Calculator" in line for line in tool_lines), out + err
    assert sessions and all(session.endswith("s3") for session in sessions), tool_lines  # arithmetic only


def test_a_retried_reply_is_marked_discarded_and_never_shown_as_the_answer() -> None:
    """Issue 34, item 5: a generation the model retried stays on screen only marked as discarded."""
    import io

    from plait.repl import DISCARDED, Printer

    out = io.StringIO()
    printer = Printer(out)
    for text in ("a being", "a being in a spaceship", "Hel", "Hello! I am"):
        printer.text(text)
    printer.answer("Hello! I am SmolLM.")
    assert out.getvalue() == f"a being in a spaceship{DISCARDED}\nHello! I am SmolLM.\n"
    out = io.StringIO()
    printer = Printer(out)
    printer.text("CALCULATOR")
    printer.answer("Three colours: red, green, blue.")  # the kept answer differs from what streamed
    assert out.getvalue() == f"CALCULATOR{DISCARDED}\nThree colours: red, green, blue.\n"
    out = io.StringIO()
    printer = Printer(out)
    printer.answer("Not streamed.")
    assert out.getvalue() == "Not streamed.\n"
