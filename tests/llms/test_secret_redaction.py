"""Secrets never show: URL passwords and key-like query values in reprs and errors, keys echoed by servers.

Every model-client behaviour runs in sync and async mode from one body, against a real
server on 127.0.0.1 (a fake OpenAI server, or a fake Messages API for Claude).
"""

from __future__ import annotations

import base64
import logging
import socket
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from _support import collect, resolve
from plait.exceptions import LLMAPIError, LLMConnectionError, LLMError
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.testing.fake_http import Canned, FakeHTTPServer
from plait.testing.fake_openai import FakeOpenAIServer, HTTPFault
from plait.utils.redact import is_clean, redact, redact_url, url_secrets

HI = [{"role": "user", "content": "hi"}]
PASSWORD = "s3cretpass"
QUERY_SECRET = "SECRETVALUE"
KEYS = ["sk-abc123secretkey", "sk-def456secretkey"]

Build = Callable[..., GPTAPI | AsyncGPTAPI]


@pytest.fixture
def build(mode: str) -> Iterator[Build]:
    """``build(api_base, **kwargs)``: a `GPTAPI` (sync mode) or `AsyncGPTAPI` (async mode), closed after the test."""
    clients: list[GPTAPI] = []

    def make(api_base: str, **kwargs: Any) -> GPTAPI | AsyncGPTAPI:
        kwargs.setdefault("key", None)
        kwargs.setdefault("retry", 1)
        kwargs.setdefault("backoff_base", 0.01)
        kwargs.setdefault("backoff_max", 0.05)
        llm = (AsyncGPTAPI if mode == "async" else GPTAPI)("test-model", api_base=api_base, **kwargs)
        if isinstance(llm, GPTAPI):
            clients.append(llm)
        return llm

    yield make
    for client in clients:
        client.close()


def with_password(server: FakeOpenAIServer) -> str:
    return server.base_url.replace("http://", f"http://user:{PASSWORD}@")


def with_query_key(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1/chat/completions?api_key={QUERY_SECRET}"


def closed_port() -> int:
    """A port nothing listens on (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def shown(err: BaseException) -> str:
    """Everything an error shows: str, repr, args, body, and the printed traceback with its causes."""
    parts = [str(err), repr(err), *map(str, err.args), "".join(traceback.format_exception(err))]
    if isinstance(err, LLMAPIError):
        parts.append(err.body)
    return "\n".join(parts)


def assert_no_secret(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text


# -- the helper --


def test_redact_url_masks_the_password_and_secret_values_only() -> None:
    url = f"http://user:{PASSWORD}@host:8000/v1?api_key={QUERY_SECRET}&q=1&X-Amz-Signature=zz#access_token=tok"
    assert redact_url(url) == "http://user:***@host:8000/v1?api_key=***&q=1&X-Amz-Signature=***#access_token=***"
    assert redact_url("http://127.0.0.1:8000/v1/chat/completions") == "http://127.0.0.1:8000/v1/chat/completions"
    assert redact_url("http://u:p@ss@h/x") == "http://u:***@h/x"  # a raw "@" in the password
    assert url_secrets(url) == [PASSWORD, QUERY_SECRET, "zz", "tok"]
    assert url_secrets("http://u:a%2Fb@h/") == ["a%2Fb", "a/b"]
    assert url_secrets(None) == [] and url_secrets("http://h/?q=1") == []


def test_redact_masks_secrets_url_passwords_and_key_values_in_free_text() -> None:
    text = f"GET http://user:{PASSWORD}@h/x?token=abc failed: key {KEYS[0]} rejected; client_secret=zz, q=1"
    assert redact(text, KEYS) == "GET http://user:***@h/x?token=*** failed: key *** rejected; client_secret=***, q=1"
    assert not is_clean(text, KEYS) and is_clean("could not connect to 127.0.0.1:80", KEYS)
    # the web tools use the same function
    from plait.actions.web import redact as web_redact

    assert web_redact is redact


# -- reprs --


def test_repr_hides_the_url_password_and_requests_still_use_it(mode: str, fake_server: Any, build: Build) -> None:
    server = fake_server(["hello"])
    api_base = with_password(server)
    llm = build(api_base)
    assert_no_secret(repr(llm), PASSWORD)
    assert_no_secret(repr(llm._transport), PASSWORD)
    assert "user:***@127.0.0.1" in repr(llm)
    assert llm.api_base == api_base + "/chat/completions"  # the real URL is kept for requests
    assert resolve(llm.chat(HI)) == "hello"
    assert server.headers[0]["Authorization"] == "Basic " + base64.b64encode(f"user:{PASSWORD}".encode()).decode()


def test_a_query_key_is_hidden_in_repr_and_in_errors(mode: str, fake_server: Any, build: Build) -> None:
    # the server is down: connection refused
    down = build(with_query_key(closed_port()))
    assert_no_secret(repr(down), QUERY_SECRET)
    with pytest.raises(LLMConnectionError) as refused:
        resolve(down.chat(HI))
    assert_no_secret(shown(refused.value), QUERY_SECRET)
    # the server answers 500 quoting the request line
    echo = {"error": {"message": f"upstream failed: POST /v1/chat/completions?api_key={QUERY_SECRET}"}}
    server = fake_server([HTTPFault(500, echo)])
    llm = build(with_query_key(server.port))
    assert_no_secret(repr(llm), QUERY_SECRET)
    with pytest.raises(LLMAPIError) as failed:
        resolve(llm.chat(HI))
    assert failed.value.status == 500 and "upstream failed" in str(failed.value)
    assert_no_secret(shown(failed.value), QUERY_SECRET)


# -- error bodies echoing the keys --


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_an_error_body_echoing_the_keys_is_scrubbed(mode: str, stream: bool, fake_server: Any, build: Build) -> None:
    body = {"error": {"message": f"Incorrect API key provided: {KEYS[0]} (the other one, {KEYS[1]}, too)"}}
    server = fake_server([HTTPFault(401, body)])
    llm = build(server.base_url, key=KEYS)
    with pytest.raises(LLMAPIError) as info:
        collect(llm.stream_chat(HI)) if stream else resolve(llm.chat(HI))
    err = info.value
    assert err.status == 401 and "Incorrect API key provided: ***" in str(err) and "***" in err.body
    assert_no_secret(shown(err), *KEYS)
    assert server.headers[0]["Authorization"] == f"Bearer {KEYS[0]}"  # the real key was sent


def test_log_records_of_a_failing_call_hold_no_secret(
    mode: str, fake_server: Any, build: Build, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    body = {"error": {"message": f"invalid key {KEYS[0]} (api_key={QUERY_SECRET})"}}
    server = fake_server([HTTPFault(401, body)])
    llm = build(with_query_key(server.port), key=KEYS[:1])
    log = logging.getLogger("app")
    log.info("calling %r", llm)
    try:
        resolve(llm.chat(HI))
    except LLMError:
        log.exception("the model call failed")  # what an application does with the error
    records = caplog.records
    assert any(record.exc_info for record in records)
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    assert_no_secret("\n".join(formatter.format(record) for record in records), KEYS[0], QUERY_SECRET)


# -- Claude --


def test_claude_error_body_echoing_the_key_is_scrubbed(mode: str) -> None:
    pytest.importorskip("anthropic")
    from plait.llms.anthropic_llm import AsyncClaudeAPI, ClaudeAPI

    key = "sk-ant-api03-secretkey"
    error = {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {key}"}}
    server = FakeHTTPServer().start()
    try:
        server.route("POST", "/v1/messages", Canned.json(error, 401))
        cls = AsyncClaudeAPI if mode == "async" else ClaudeAPI
        llm = cls("claude-3-5-sonnet-20241022", key=key, retry=1, base_url=server.base_url)
        assert_no_secret(repr(llm), key)
        with pytest.raises(LLMAPIError) as info:
            resolve(llm.chat("hi"))
        assert info.value.status == 401 and "invalid x-api-key ***" in str(info.value)
        assert_no_secret(shown(info.value), key)
        with pytest.raises(LLMAPIError) as streamed:  # the key was retired: a fresh client
            collect(cls("claude-3-5-sonnet-20241022", key=key, retry=1, base_url=server.base_url).stream_chat("hi"))
        assert_no_secret(shown(streamed.value), key)
    finally:
        server.stop()
