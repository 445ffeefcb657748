"""GPTAPI / AsyncGPTAPI context windows: configured, or asked once of the server's ``/models``; sync and async."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from _support import resolve
from plait.exceptions import LLMResponseError, UserError
from plait.llms import AsyncGPTAPI
from plait.llms.openai import _models_url, _reported_context_window

SECRET_KEY = "sk-context-window-secret"


def test_a_configured_window_wins_without_a_request(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server(max_model_len=32768)
    llm = make_llm(server, context_window=2048)
    assert llm.context_window == 2048
    assert resolve(llm.fetch_context_window()) == 2048
    assert server.model_listings == []


def test_the_window_is_asked_of_the_server_once(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server(max_model_len=32768)
    llm = make_llm(server, model_type=server.model, key=SECRET_KEY, org="org-x")
    assert llm.context_window is None  # unknown until asked
    assert resolve(llm.fetch_context_window()) == 32768
    assert llm.context_window == 32768
    assert resolve(llm.fetch_context_window()) == 32768
    (headers,) = server.model_listings  # asked once, as the chat requests are sent
    assert headers["Authorization"] == f"Bearer {SECRET_KEY}"
    assert headers["OpenAI-Organization"] == "org-x"


def test_another_model_name_reads_the_first_entry(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server(max_model_len=8192)
    assert resolve(make_llm(server, model_type="not-listed").fetch_context_window()) == 8192


def test_no_report_gives_none_and_is_asked_once(mode: str, fake_server: Any, make_llm: Any) -> None:
    server = fake_server()
    llm = make_llm(server)
    assert resolve(llm.fetch_context_window()) is None
    assert resolve(llm.fetch_context_window()) is None
    assert llm.context_window is None
    assert len(server.model_listings) == 1


DEEP: Any = 4096
for _ in range(300):  # deeper than plait.untrusted.MAX_DEPTH: the listing does not decode
    DEEP = [DEEP]


@pytest.mark.parametrize(
    "value",
    [-1, 0, 10**8 + 1, 10**30, 4096.0, 1e400, "4096", True, [4096], {"value": 4096}, DEEP],
    ids=["negative", "zero", "too-large", "huge", "float", "infinite", "str", "bool", "list", "object", "deep"],
)
def test_hostile_values_give_none(mode: str, value: Any, fake_server: Any, make_llm: Any) -> None:
    server = fake_server(max_model_len=value)
    llm = make_llm(server)
    assert resolve(llm.fetch_context_window()) is None
    assert resolve(llm.fetch_context_window()) is None
    assert len(server.model_listings) == 1


def test_the_largest_believed_window(mode: str, fake_server: Any, make_llm: Any) -> None:
    assert resolve(make_llm(fake_server(max_model_len=10**8)).fetch_context_window()) == 10**8


def test_failures_give_none_and_keep_secrets_out_of_the_log(
    mode: str, fake_server: Any, make_llm: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="plait.llms.openai")
    server = fake_server(max_model_len=4096)
    secret_query = "?api_key=query-secret-value"
    elsewhere = SimpleNamespace(base_url=server.base_url.replace("/v1", "/elsewhere/v1") + secret_query)
    missing = make_llm(elsewhere, key=SECRET_KEY)
    assert resolve(missing.fetch_context_window()) is None  # 404
    assert resolve(missing.fetch_context_window()) is None
    refused = make_llm(SimpleNamespace(base_url=server.base_url + secret_query), key=SECRET_KEY)
    server.stop()
    assert resolve(refused.fetch_context_window()) is None  # nobody listens
    failures = [record.getMessage() for record in caplog.records if "could not ask" in record.getMessage()]
    assert len(failures) == 2  # one each: a failure is not asked again
    assert "404" in failures[0]
    assert "could not reach the server" in failures[1]
    assert all(record.levelno == logging.DEBUG for record in caplog.records)
    assert SECRET_KEY not in caplog.text and "query-secret-value" not in caplog.text


def test_a_listing_too_long_is_refused(fake_server: Any) -> None:
    server = fake_server()

    async def main() -> None:
        async with AsyncGPTAPI(api_base=server.base_url, key=None) as llm:
            with pytest.raises(LLMResponseError, match="longer than 10 bytes"):
                await llm._transport.get_json(server.base_url + "/models", max_bytes=10)

    asyncio.run(main())


def test_a_window_must_be_positive(mode: str, fake_server: Any, make_llm: Any) -> None:
    for bad in (0, -5, True, 4096.0):
        with pytest.raises(UserError, match="context_window"):
            make_llm(fake_server(), context_window=bad)


def test_models_url() -> None:
    assert _models_url("http://h:8000/v1/chat/completions") == "http://h:8000/v1/models"
    assert (
        _models_url("https://h/openai/v1/chat/completions?api-version=1") == "https://h/openai/v1/models?api-version=1"
    )


def test_reported_context_window() -> None:
    def listing(*entries: Any) -> dict[str, Any]:
        return {"object": "list", "data": list(entries)}

    vllm = {"id": "m", "max_model_len": 32768}
    assert _reported_context_window(listing({"id": "other", "max_model_len": 1024}, vllm), "m") == 32768
    assert _reported_context_window(listing({"id": "other", "max_model_len": 1024}, vllm), "x") == 1024
    llama_cpp = {"id": "m", "object": "model", "meta": {"n_vocab": 49152, "n_ctx_train": 8192}}
    assert _reported_context_window(listing(llama_cpp), "m") == 8192
    # llama.cpp's server started with a smaller context than the model's (as plait's own
    # engine and the tests' server are): it enforces meta.n_ctx, so that is the window
    served = {"id": "m", "object": "model", "meta": {"n_vocab": 49152, "n_ctx": 2048, "n_ctx_train": 8192}}
    assert _reported_context_window(listing(served), "m") == 2048
    assert _reported_context_window(listing({"id": "m", "meta": {"n_ctx": 0, "n_ctx_train": 8192}}), "m") is None
    for key in ("context_length", "context_window", "n_ctx"):
        assert _reported_context_window(listing({"id": "m", key: 4096}), "m") == 4096
    # the first key present decides: a bad max_model_len is not made good by another field
    assert _reported_context_window(listing({"id": "m", "max_model_len": -1, "context_length": 4096}), "m") is None
    assert _reported_context_window(listing({"id": "m", "max_model_len": None, "n_ctx": 4096}), "m") == 4096
    for bad in (
        None,
        [],
        "text",
        {"data": {}},
        {"data": []},
        listing("m"),
        listing(None, {"id": "x"}),
        listing({"id": "m"}),
    ):
        assert _reported_context_window(bad, "m") is None
    assert _reported_context_window(listing({"id": "m", "meta": [8192]}), "m") is None
