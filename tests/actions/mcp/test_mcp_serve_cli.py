"""``plait mcp-serve MODULE:ATTR`` in a subprocess, reached by the official SDK client (stdio and Streamable HTTP)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from _mcp_support import free_port, serving

import plait

mcp = pytest.importorskip("mcp")
import httpx2  # noqa: E402  # the SDK's HTTP client
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

PLAIT = str(Path(sys.executable).with_name("plait"))
TARGET = f"{Path(__file__).with_name('plait_server.py')}:server"
SOURCE = str(Path(plait.__file__).resolve().parents[1])  # the SDK's stdio child gets no PYTHONPATH: this plait


async def add_twice(client: mcp.Client) -> list[str]:
    names = [tool.name for tool in (await client.list_tools()).tools]
    assert names[:2] == ["Calculator", "Notes__add"]
    results = [await client.call_tool("Notes__add", {"text": text}) for text in ("x", "y")]
    return [part.text for result in results for part in result.content if part.type == "text"]


def test_mcp_serve_over_stdio() -> None:
    async def run() -> None:
        params = StdioServerParameters(command=PLAIT, args=["mcp-serve", TARGET], env={"PYTHONPATH": SOURCE})
        async with mcp.Client(params) as client:
            assert client.server_info.name == "plait-test"
            assert await add_twice(client) == ["x", "x | y"]

    asyncio.run(run())


def test_mcp_serve_over_http_with_a_token_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    token_file.chmod(0o600)
    port = free_port()
    args = [PLAIT, "mcp-serve", TARGET, "--transport", "streamable-http", "--port", str(port)]
    with serving([*args, "--token-file", str(token_file)], port):

        async def run() -> None:
            url = f"http://127.0.0.1:{port}/mcp"
            http = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"})
            async with http, mcp.Client(streamable_http_client(url, http_client=http)) as client:
                assert await add_twice(client) == ["x", "x | y"]
            async with httpx2.AsyncClient() as anonymous:
                assert (
                    await anonymous.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
                ).status_code == 401

        asyncio.run(run())


def test_mcp_serve_reports_a_bad_target() -> None:
    done = subprocess.run([PLAIT, "mcp-serve", "no_such_module:tools"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "could not import 'no_such_module'" in done.stderr
    done = subprocess.run([PLAIT, "mcp-serve", "no-colon"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "must be MODULE:NAME" in done.stderr
    done = subprocess.run([PLAIT, "mcp-serve", f"{TARGET}x"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "has no 'serverx'" in done.stderr


def test_mcp_serve_answers_only_the_allowed_hosts() -> None:
    port = free_port()
    args = [PLAIT, "mcp-serve", TARGET, "--transport", "streamable-http", "--port", str(port)]
    with serving([*args, "--allowed-host", "mcp.test", "--allowed-host", f"localhost:{port}"], port):

        async def run() -> None:
            url = f"http://127.0.0.1:{port}/mcp"
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
            async with httpx2.AsyncClient() as http:
                for host, status in (("mcp.test", 200), (f"localhost:{port}", 200), ("127.0.0.1", 403)):
                    assert (await http.post(url, json=init, headers={"Host": host})).status_code == status, host

        asyncio.run(run())
