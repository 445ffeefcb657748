"""The smaller rough edges of everyday CLI use (issue 36, item 6), each pinned."""

from __future__ import annotations

import http.server
import importlib
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import plait

from plait.cli import cli_tools
from plait.exceptions import LLMError
from plait.llms import GPTAPI


def test_tools_lists_tools_not_adapter_classes() -> None:
    for adapters in ("plait.actions.agentlego_tool", "plait.actions.langchain_tool"):
        importlib.import_module(adapters)  # registers the adapters, as the web demo's imports do
    tools = cli_tools()
    assert "Calculator" in tools and "LangChainTool" not in tools and "AgentLegoTool" not in tools
    result = plait("run", "--tools", "NoSuchTool", "hi")
    assert result.returncode == 2 and "Calculator" in result.stderr
    assert "LangChainTool" not in result.stderr and "AgentLegoTool" not in result.stderr


def test_web_with_a_missing_tools_module_exits_2_before_starting(tmp_path: Path) -> None:
    missing = tmp_path / "nofile.py"
    result = plait("web", "--tools-from", str(missing), "--api-base", "http://127.0.0.1:9/v1", "--port", "1")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"plait: error: could not import tool module {str(missing)!r}: ImportError: no Python file {str(missing)!r}"
    ]


class _WebPage(http.server.BaseHTTPRequestHandler):
    """A web server that is not an OpenAI-compatible API: an HTML page for every request."""

    status = 200

    def _page(self) -> None:
        body = b"<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head>\n<body>" + b"<p>x</p>\n" * 200
        self.send_response(self.status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._page()

    do_GET = _page

    def log_message(self, *args: object) -> None:
        pass


class _NotFoundPage(_WebPage):
    status = 404


@pytest.fixture(params=[_WebPage, _NotFoundPage], ids=["200", "404"])
def web_page(request: pytest.FixtureRequest) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
    thread.join()


def test_a_server_that_answers_html_is_one_line_not_the_page(web_page: str) -> None:
    expected = "an HTML page ('Welcome to nginx!'), not an OpenAI-compatible API: check the server address"
    with GPTAPI("m", api_base=web_page, key=None, retry=1) as llm:
        with pytest.raises(LLMError, match=re.escape(expected)) as caught:
            llm.chat("hi")
        assert "<p>" not in str(caught.value)
        with pytest.raises(LLMError, match=re.escape(expected)):
            list(llm.stream_chat("hi"))
    result = plait("run", "--api-base", web_page, "hi")
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("plait: error: the server answered ") and expected in line


def test_a_hub_model_offline_fails_at_once_without_retries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nothing listens on: the Hub cannot be reached
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # nothing cached
    for name in ("HF_HUB_OFFLINE", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    result = plait("run", "--model", "hf:someone/some-repo/model.gguf", "hi")
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()  # before: the hub client's five "Retrying in Ns" warnings first
    assert (
        line.startswith("plait: error: cannot download someone/some-repo/model.gguf: ") and "cannot be reached" in line
    )
    assert "Retrying" not in result.stderr
