"""Misspelt settings fail at construction with `UserError`, naming the closest valid name (issue 36, item 3).

Before, ``GPTAPI(..., temprature=0.1)`` kept the typo in ``gen_params`` and sent the default
temperature; ``LlamaCppModel(temprature=0.1)`` was accepted; a config dict's ``model_typ``
built a model with the default ``model_type``; ``GPTAPI('gpt-4o-mini')`` without a key went
to the public API; an agent's misspelt argument was a bare ``TypeError``.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any

import pytest

from plait.agents import Agent, FunctionCallingAgent, ReAct
from plait.exceptions import UserError
from plait.llms import GPTAPI, AsyncGPTAPI, ClaudeAPI, LlamaCppModel
from plait.memory import Memory
from plait.testing import ScriptedLLM
from plait.testing.fake_openai import FakeOpenAIServer
from plait.utils import create_object

LOCAL = "http://127.0.0.1:9/v1"  # never contacted: construction sends nothing


@pytest.fixture
def no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("cls", [GPTAPI, AsyncGPTAPI])
def test_openai_client_names_the_misspelt_setting(cls: type[GPTAPI]) -> None:
    with pytest.raises(UserError, match=r"unknown keyword argument 'temprature'; did you mean 'temperature'\?"):
        cls("m", api_base=LOCAL, key=None, temprature=0.1)
    with pytest.raises(UserError, match=r"'api_bse'; did you mean 'api_base'\?"):
        cls("m", api_bse=LOCAL, key=None)


@pytest.mark.parametrize("cls", [GPTAPI, AsyncGPTAPI])
def test_openai_client_keeps_lagent_and_api_settings(cls: type[GPTAPI]) -> None:
    llm = cls(
        "m",
        api_base=LOCAL,
        key=None,
        max_new_tokens=64,
        top_p=0.9,
        top_k=20,
        temperature=0.1,
        repetition_penalty=1.02,
        stop_words=["<|im_end|>"],
        skip_special_tokens=False,  # Lagent's GPTAPI accepts and drops these two
        session_id=3,
        seed=7,
        presence_penalty=0.5,
        extra_body={"top_k": 20},
        response_format={"type": "json_object"},
    )
    assert llm.gen_params["temperature"] == 0.1 and llm.gen_params["seed"] == 7


def test_the_corrected_setting_is_sent() -> None:
    with FakeOpenAIServer(["ok"]) as server:
        with GPTAPI("m", api_base=server.base_url, key=None, temperature=0.1) as llm:
            assert llm.chat([{"role": "user", "content": "hi"}]) == "ok"
        assert server.requests[-1]["temperature"] == 0.1


def test_public_api_without_a_key_fails_before_any_request(no_openai_env: None) -> None:
    with pytest.raises(UserError, match=r"needs an API key for https://api\.openai\.com.*OPENAI_API_KEY"):
        GPTAPI("gpt-4o-mini")
    with pytest.raises(UserError, match="needs an API key"):
        AsyncGPTAPI("gpt-4o-mini", api_base="https://api.openai.com/v1", key=None)


def test_a_key_or_another_server_is_enough(no_openai_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    GPTAPI("gpt-4o-mini", key="sk-test").close()
    GPTAPI("qwen", api_base=LOCAL, key=None).close()  # local servers need no key
    monkeypatch.setenv("OPENAI_BASE_URL", LOCAL)
    GPTAPI("qwen").close()
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    GPTAPI("gpt-4o-mini").close()


def test_embedded_model_names_the_misspelt_setting() -> None:
    with pytest.raises(UserError, match=r"LlamaCppModel got an unknown keyword argument 'temprature'; did you mean"):
        LlamaCppModel(temprature=0.1)
    with pytest.raises(UserError, match=r"'n_cxt'; did you mean 'n_ctx'\?"):
        LlamaCppModel(n_cxt=2048)


def test_claude_names_the_misspelt_setting() -> None:
    pytest.importorskip("anthropic")
    with pytest.raises(UserError, match=r"'temprature'; did you mean 'temperature'\?"):
        ClaudeAPI(key="sk-ant-test", temprature=0.1)
    llm = ClaudeAPI(key="sk-ant-test", temperature=0.1, metadata={"user_id": "u"}, skip_special_tokens=True)
    assert llm.gen_params["metadata"] == {"user_id": "u"}
    llm.close()


def test_huggingface_names_the_misspelt_setting() -> None:
    pytest.importorskip("transformers")
    from plait.llms import HFTransformer

    # refused before the (nonexistent) model is looked for
    with pytest.raises(UserError, match=r"HFTransformer got an unknown keyword argument 'num_beam'; did you mean"):
        HFTransformer("no/such-model", num_beam=2)


class _StrictSamplingParams:
    def __init__(self, *, n: int = 1, max_tokens: int = 16, temperature: float = 1.0, stop: Any = None) -> None:
        pass


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    module = types.SimpleNamespace(SamplingParams=_StrictSamplingParams)
    monkeypatch.setattr("plait.llms.vllm_wrapper._import_vllm", lambda: module)
    yield


def test_vllm_checks_against_its_sampling_params(fake_vllm: None) -> None:
    from plait.llms.vllm_wrapper import VllmModel

    with pytest.raises(UserError, match=r"VllmModel got an unknown keyword argument 'max_token'; did you mean"):
        VllmModel("model", max_token=8)


def test_config_dict_names_the_misspelt_setting() -> None:
    llm = dict(type="plait.llms.GPTAPI", model_typ="x", api_base=LOCAL, key=None)
    with pytest.raises(
        UserError, match=r"GPTAPI got an unknown keyword argument 'model_typ'; did you mean 'model_type'"
    ):
        Agent(llm=llm)
    with pytest.raises(UserError, match=r"Memory got an unknown keyword argument 'recnt_n'; did you mean 'recent_n'"):
        create_object(dict(type=Memory, recnt_n=2))
    assert create_object(dict(type=Memory, recent_n=2)).recent_n == 2


@pytest.mark.parametrize("cls", [Agent, FunctionCallingAgent, ReAct])
def test_agents_name_the_misspelt_setting(cls: type[Agent]) -> None:
    with pytest.raises(UserError, match=rf"{cls.__name__} got an unknown keyword argument 'nmae'; did you mean 'name'"):
        cls(llm=ScriptedLLM(["hi"]), nmae="x")
    if cls is not Agent:
        with pytest.raises(UserError, match=r"'max_tunr'; did you mean 'max_turn'"):
            cls(llm=ScriptedLLM(["hi"]), max_tunr=2)
