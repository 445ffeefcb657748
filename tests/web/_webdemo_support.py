"""Helpers of the web demo tests: the scripted fake model and request inspection."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _support import wait_for_http
from plait.testing.fake_openai import Reply

ROOT = Path(__file__).resolve().parents[2]

_CALC = re.compile(r"(\d+\s*[-+*/]\s*\d+)")


def user_text(body: dict[str, Any]) -> str:
    """The text of the last user message of a chat request."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


def scripted_model(body: dict[str, Any]) -> Reply:
    """A deterministic native-tool-calling model: a tool call for a new question, then an answer.

    "remember the secret X" -> the interpreter stores X; "what is the secret" -> it prints
    whatever this kernel knows; arithmetic -> Calculator. After a tool result it answers
    with that result and the question, so each conversation's answer is its own.
    """
    messages = body.get("messages") or []
    question = user_text(body).splitlines()[0] if user_text(body) else ""
    if messages and messages[-1].get("role") == "tool":
        result = str(messages[-1].get("content", "")).strip()
        return Reply(f"The tool says {result}. That settles {question!r} for this session, and nothing else!")
    secret = re.search(r"remember the secret (\w+)", question)
    if secret:
        return Reply(tool_calls=[("IPythonInterpreter", {"command": f"secret = {secret.group(1)!r}\nprint(secret)"})])
    if "what is the secret" in question:
        return Reply(tool_calls=[("IPythonInterpreter", {"command": "print(globals().get('secret', 'no secret'))"})])
    calc = _CALC.search(question)
    if calc:
        return Reply(tool_calls=[("Calculator", {"expression": calc.group(1)})])
    return Reply(f"You said: {question}")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serve_app(**extra_env: str) -> Iterator[str]:
    """``plait web`` on a free port in a subprocess (with `extra_env`); yields its URL."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    env.update(extra_env)
    process = subprocess.Popen(
        [sys.executable, "-m", "plait.cli", "web", "--port", str(port), "--host", "127.0.0.1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(url + "/_stcore/health", process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
