"""Issue 36.2: your own agent in ``plait run``, ``plait chat`` and ``plait serve`` (``--agent MODULE:NAME``).

The agent lives in a module written to ``tmp_path`` and put on ``PYTHONPATH`` (or named by its
``.py`` path); its model is a `FakeOpenAIServer` on 127.0.0.1 and its tool, ``Transfer``, needs
approval. Real subprocesses, real stdin, the official ``openai`` client against ``plait serve``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_cli import SRC, plait_serve

from plait.cli import main
from plait.testing.fake_openai import FakeOpenAIServer, Reply

MY_AGENT = '''
import os

from plait.actions import BaseAction, tool_api
from plait.agents import AsyncStreamingFunctionCallingAgent, StreamingFunctionCallingAgent
from plait.llms import GPTAPI, AsyncGPTAPI


class Transfer(BaseAction):
    """Move money."""

    @tool_api(requires_approval=True)
    def run(self, to: str, amount: int) -> str:
        """Send money.

        Args:
            to (str): who gets it
            amount (int): how much
        """
        return f"sent {amount} to {to}"


def build():
    llm = GPTAPI(model_type="m", api_base=os.environ["MY_MODEL"], key="k", retry=0)
    return StreamingFunctionCallingAgent(llm, [Transfer()], "You move money.")


ASYNC_AGENT = AsyncStreamingFunctionCallingAgent(
    AsyncGPTAPI(model_type="m", api_base=os.environ.get("MY_MODEL", "http://127.0.0.1:9/v1"), key="k", retry=0),
    [],
    "You chat.",
)
NUMBER = 7


def not_an_agent():
    return "hello"


def broken():
    raise RuntimeError("no model configured")
'''


def model(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return Reply(f"result: {messages[-1]['content']}")
    question = str(messages[-1]["content"])
    if "pay" in question:
        return Reply("", tool_calls=[("Transfer", {"to": "bob", "amount": 5})])
    return Reply(f"You said: {question}")


@pytest.fixture
def my_agent(tmp_path: Path) -> Path:
    path = tmp_path / "my_agent.py"
    path.write_text(textwrap.dedent(MY_AGENT), encoding="utf-8")
    return path


def _plait(args: list[str], folder: Path, base_url: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([SRC, str(folder), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "plait.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": path, "MY_MODEL": base_url},
    )


def test_chat_with_your_agent_asks_before_its_approval_gated_tool(my_agent: Path) -> None:
    with FakeOpenAIServer(handler=model) as server:
        done = _plait(["chat", "--agent", "my_agent:build"], my_agent.parent, server.base_url, "pay bob\ny\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert "Run Transfer(to='bob', amount=5)? [y/N/reason]" in done.stdout
    assert "result: sent 5 to bob" in done.stdout


def test_run_answers_with_your_agent_an_async_agent_object_too(my_agent: Path) -> None:
    with FakeOpenAIServer(handler=model) as server:
        factory = _plait(["run", "--agent", "my_agent:build", "hello"], my_agent.parent, server.base_url)
        agent = _plait(["run", "--agent", "my_agent:ASYNC_AGENT", "hi there"], my_agent.parent, server.base_url)
        refused = _plait(["run", "--agent", "my_agent:build", "pay bob"], my_agent.parent, server.base_url, "n\n")
    assert factory.returncode == 0, factory.stderr
    assert "You said: hello" in factory.stdout
    assert agent.returncode == 0, agent.stderr
    assert "You said: hi there" in agent.stdout
    assert refused.returncode == 0, refused.stderr
    assert "Run Transfer(to='bob', amount=5)? [y/N/reason]" in refused.stdout and "sent 5" not in refused.stdout


def test_serve_offers_your_agent_to_the_official_openai_client(my_agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import openai

    with FakeOpenAIServer(handler=model) as server:
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(my_agent.parent), os.environ.get("PYTHONPATH", "")]))
        monkeypatch.setenv("MY_MODEL", server.base_url)
        with plait_serve("--agent", "my_agent:build") as (port, _):
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)
            reply = client.chat.completions.create(model="plait", messages=[{"role": "user", "content": "hello"}])
            chunks = client.chat.completions.create(
                model="plait", messages=[{"role": "user", "content": "again"}], stream=True
            )
            streamed = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
            client.close()
        systems = [m["content"] for body in server.requests for m in body["messages"] if m["role"] == "system"]
    assert reply.choices[0].message.content == "You said: hello"
    assert streamed == "You said: again"
    assert systems and all(s == "You move money." for s in systems)  # your agent's prompt, not the built-in one


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("my_agent", "--agent must be MODULE:NAME"),
        ("no_such_module_xyz:build", "--agent: could not import 'no_such_module_xyz'"),
        ("{file}:nothing", "has no 'nothing'"),
        ("{file}:NUMBER", "is not a callable that returns an agent"),
        ("{file}:not_an_agent", "the agent factory returned str, not an agent"),
        ("{file}:broken", "raised RuntimeError: no model configured"),
    ],
)
@pytest.mark.parametrize("command", ["run", "chat", "serve"])
def test_bad_agent_targets_exit_2_with_evals_messages(
    my_agent: Path, command: str, target: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, "--agent", target.format(file=my_agent), *(["hi"] if command == "run" else [])]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_bad_agent_target_messages_are_evals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text('{"id": 1, "input": "hi", "answer": "hi"}\n', encoding="utf-8")
    assert main(["eval", str(data), "--agent", "no_such_module_xyz:build", "--out", str(tmp_path / "o")]) == 2
    eval_error = capsys.readouterr().err
    assert main(["run", "--agent", "no_such_module_xyz:build", "hi"]) == 2
    assert capsys.readouterr().err == eval_error


@pytest.mark.parametrize(
    "flags",
    [
        ["--model", "x"],
        ["--api-base", "http://127.0.0.1:9/v1"],
        ["--tools", ""],
        ["--system", "s"],
        ["--temperature", "1"],
    ],
)
def test_flags_of_the_builtin_agent_are_refused_beside_agent(
    my_agent: Path, flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["chat", "--agent", f"{my_agent}:build", *flags]) == 2
    error = capsys.readouterr().err
    assert f"{flags[0]} builds the built-in agent" in error


def test_tools_from_a_file_lets_tools_name_its_tools(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tools = tmp_path / "my_tools_36.py"
    tools.write_text(
        textwrap.dedent(
            '''
            from plait.actions import BaseAction, tool_api


            class Balance36(BaseAction):
                """Look up balances."""

                @tool_api
                def run(self, account: str) -> str:
                    """Look up an account's balance.

                    Args:
                        account (str): the account
                    """
                    return f"{account} has 120"
            '''
        ),
        encoding="utf-8",
    )

    def handler(body: dict[str, Any]) -> Reply:
        if body["messages"][-1]["role"] == "tool":
            return Reply(f"balance: {body['messages'][-1]['content']}")
        return Reply("", tool_calls=[("Balance36", {"account": "ada"})])

    missing = ["run", "--api-base", "http://127.0.0.1:9/v1", "--tools-from", str(tmp_path / "nofile.py"), "hi"]
    assert main(missing) == 2
    assert "could not import tool module" in capsys.readouterr().err
    with FakeOpenAIServer(handler=handler) as server:
        argv = ["run", "--api-base", server.base_url, "--tools-from", str(tools), "--tools", "Balance36"]
        assert main([*argv, "--tool-choice", "auto", "--context", "off", "balance of ada?"]) == 0
    assert "balance: ada has 120" in capsys.readouterr().out
