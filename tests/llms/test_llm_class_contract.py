"""The class contract of every model class users can import, pinned.

Users (and agents) tell models apart with ``isinstance(llm, BaseLLM)`` /
``isinstance(llm, AsyncBaseLLM)`` and call each public method as a plain function, a
coroutine, a generator or an async generator. These tables record that contract for every
class exported by `plait.llms` and every model double of `plait.testing`, so a change to
how the classes are built (shared cores, sibling sync/async classes) cannot change it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

import plait.llms
import plait.testing
from plait.effects import ModelCall

_DOUBLES = ("ScriptedLLM", "AsyncScriptedLLM", "FunctionLLM", "AsyncFunctionLLM")


def _classes() -> dict[str, type]:
    found = {name: getattr(plait.llms, name) for name in plait.llms.__all__}
    found = {name: value for name, value in found.items() if inspect.isclass(value)}
    found.update({name: getattr(plait.testing, name) for name in _DOUBLES})
    return found


CLASSES = _classes()

# name -> every other pinned class it is a subclass of (``issubclass`` true)
SUBCLASS_OF: dict[str, set[str]] = {
    "BaseLLM": set(),
    "AsyncBaseLLM": {"BaseLLM"},
    "APITemplateParser": set(),
    "LMTemplateParser": set(),
    "GPTAPI": {"BaseLLM"},
    "AsyncGPTAPI": {"BaseLLM", "AsyncBaseLLM"},
    "ClaudeAPI": {"BaseLLM"},
    "AsyncClaudeAPI": {"BaseLLM", "AsyncBaseLLM"},
    "HFTransformer": {"BaseLLM"},
    "HFTransformerCasualLM": {"BaseLLM", "HFTransformer", "HFTransformerCausalLM"},
    "HFTransformerCausalLM": {"BaseLLM", "HFTransformer", "HFTransformerCasualLM"},
    "HFTransformerChat": {"BaseLLM", "HFTransformer", "HFTransformerCasualLM", "HFTransformerCausalLM"},
    "AsyncHFTransformer": {"BaseLLM", "AsyncBaseLLM"},
    "AsyncHFTransformerCasualLM": {"BaseLLM", "AsyncBaseLLM", "AsyncHFTransformer"},
    "AsyncHFTransformerChat": {"BaseLLM", "AsyncBaseLLM", "AsyncHFTransformer", "AsyncHFTransformerCasualLM"},
    "LMDeployPipeline": {"BaseLLM"},
    "AsyncLMDeployPipeline": {"BaseLLM", "AsyncBaseLLM"},
    "LMDeployClient": {"BaseLLM", "GPTAPI"},
    "AsyncLMDeployClient": {"BaseLLM", "AsyncBaseLLM", "AsyncGPTAPI"},
    "LMDeployServer": {"BaseLLM", "GPTAPI", "LMDeployClient"},
    "AsyncLMDeployServer": {"BaseLLM", "AsyncBaseLLM", "AsyncGPTAPI", "AsyncLMDeployClient"},
    "LlamaCppModel": {"BaseLLM"},
    "AsyncLlamaCppModel": {"BaseLLM", "AsyncBaseLLM"},
    "VllmModel": {"BaseLLM"},
    "AsyncVllmModel": {"BaseLLM", "AsyncBaseLLM"},
    "ScriptedLLM": {"BaseLLM"},
    "AsyncScriptedLLM": {"BaseLLM", "AsyncBaseLLM"},
    "FunctionLLM": {"BaseLLM", "ScriptedLLM"},
    "AsyncFunctionLLM": {"BaseLLM", "AsyncBaseLLM", "AsyncScriptedLLM"},
}

# What each public method (or property) is: 'function', 'coroutine', 'generator', 'asyncgen', 'property'.
SYNC = {
    "chat": "function",
    "generate": "function",
    "stream_chat": "generator",
    "stream_generate": "generator",
    "update_gen_params": "function",
}
ASYNC = {
    "chat": "coroutine",
    "generate": "coroutine",
    "stream_chat": "asyncgen",
    "stream_generate": "asyncgen",
    "update_gen_params": "function",
}
OPENAI_SYNC = {
    **SYNC,
    "complete": "function",
    "close": "function",
    "keys": "property",
    "usage": "property",
    "fetch_context_window": "function",
}
OPENAI_ASYNC = {
    **ASYNC,
    "complete": "coroutine",
    "aclose": "coroutine",
    "keys": "property",
    "usage": "property",
    "fetch_context_window": "coroutine",
}
HF = {"context_window": "property", "count_tokens": "function"}
LLAMA = {
    "close": "function",
    "load": "function",
    "base_url": "property",
    "from_pretrained": "function",
    "context_window": "property",
    "count_tokens": "function",
    "retry_params": "function",  # parameters only (no I/O): sync in both classes, as count_tokens
}
SCRIPTED = {"assert_complete": "function", "remaining": "property"}

SURFACE: dict[str, dict[str, str]] = {
    "BaseLLM": SYNC,
    "AsyncBaseLLM": ASYNC,
    "APITemplateParser": {},
    "LMTemplateParser": {},
    "GPTAPI": OPENAI_SYNC,
    "AsyncGPTAPI": OPENAI_ASYNC,
    "ClaudeAPI": {**SYNC, "complete": "function", "close": "function"},
    "AsyncClaudeAPI": {**ASYNC, "complete": "coroutine", "close": "function"},
    "HFTransformer": {**SYNC, **HF},
    "HFTransformerCasualLM": {**SYNC, **HF},
    "HFTransformerCausalLM": {**SYNC, **HF},
    "HFTransformerChat": {**SYNC, **HF},
    "AsyncHFTransformer": {**ASYNC, **HF},
    "AsyncHFTransformerCasualLM": {**ASYNC, **HF},
    "AsyncHFTransformerChat": {**ASYNC, **HF},
    "LMDeployPipeline": SYNC,
    "AsyncLMDeployPipeline": ASYNC,
    "LMDeployClient": OPENAI_SYNC,
    "AsyncLMDeployClient": OPENAI_ASYNC,
    "LMDeployServer": {**OPENAI_SYNC, "stop_server": "function", "wait_ready": "function"},
    "AsyncLMDeployServer": {**OPENAI_ASYNC, "stop_server": "function", "wait_ready": "coroutine"},
    "LlamaCppModel": {**SYNC, **LLAMA, "complete": "function"},
    "AsyncLlamaCppModel": {**ASYNC, **LLAMA, "complete": "coroutine"},
    "VllmModel": SYNC,
    "AsyncVllmModel": ASYNC,
    "ScriptedLLM": {**SYNC, **SCRIPTED, "complete": "function"},
    "AsyncScriptedLLM": {**ASYNC, **SCRIPTED, "complete": "coroutine"},
    "FunctionLLM": {**SYNC, **SCRIPTED, "complete": "function"},
    "AsyncFunctionLLM": {**ASYNC, **SCRIPTED, "complete": "coroutine"},
}

# Class attributes agents read: (is_api, stream_tools); None: not defined.
FLAGS: dict[str, tuple[bool | None, bool | None]] = {
    "BaseLLM": (False, None),
    "AsyncBaseLLM": (False, None),
    "APITemplateParser": (None, None),
    "LMTemplateParser": (None, None),
    "GPTAPI": (True, True),
    "AsyncGPTAPI": (True, True),
    "ClaudeAPI": (True, None),
    "AsyncClaudeAPI": (True, None),
    "HFTransformer": (False, None),
    "HFTransformerCasualLM": (False, None),
    "HFTransformerCausalLM": (False, None),
    "HFTransformerChat": (False, None),
    "AsyncHFTransformer": (False, None),
    "AsyncHFTransformerCasualLM": (False, None),
    "AsyncHFTransformerChat": (False, None),
    "LMDeployPipeline": (False, None),
    "AsyncLMDeployPipeline": (False, None),
    "LMDeployClient": (True, True),
    "AsyncLMDeployClient": (True, True),
    "LMDeployServer": (True, True),
    "AsyncLMDeployServer": (True, True),
    "LlamaCppModel": (False, True),
    "AsyncLlamaCppModel": (False, True),
    "VllmModel": (False, None),
    "AsyncVllmModel": (False, None),
    "ScriptedLLM": (False, True),
    "AsyncScriptedLLM": (False, True),
    "FunctionLLM": (False, True),
    "AsyncFunctionLLM": (False, True),
}

LAGENT_METHODS = ("chat", "stream_chat", "generate", "stream_generate")


def _kind(member: object) -> str:
    if isinstance(member, property):
        return "property"
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    assert callable(member)
    if inspect.isasyncgenfunction(member):
        return "asyncgen"
    if inspect.iscoroutinefunction(member):
        return "coroutine"
    if inspect.isgeneratorfunction(member):
        return "generator"
    return "function"


def _surface(cls: type) -> dict[str, str]:
    out = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        member = inspect.getattr_static(cls, name)
        if isinstance(member, (property, staticmethod, classmethod)) or inspect.isfunction(member):
            out[name] = _kind(member)
    return out


def _is_async(cls: type) -> bool:
    return issubclass(cls, plait.llms.AsyncBaseLLM)


def _llm_classes() -> list[str]:
    return [name for name, cls in CLASSES.items() if issubclass(cls, plait.llms.BaseLLM)]


def test_every_exported_class_is_pinned() -> None:
    assert set(CLASSES) == set(SUBCLASS_OF) == set(SURFACE) == set(FLAGS)


@pytest.mark.parametrize("name", sorted(SUBCLASS_OF))
def test_subclass_truth_table(name: str) -> None:
    cls = CLASSES[name]
    actual = {other for other, base in CLASSES.items() if other != name and issubclass(cls, base)}
    if name in ("HFTransformerCasualLM", "HFTransformerCausalLM"):
        actual.discard("HFTransformerCausalLM" if name == "HFTransformerCasualLM" else "HFTransformerCasualLM")
        expected = SUBCLASS_OF[name] - {"HFTransformerCausalLM", "HFTransformerCasualLM"}
    else:
        expected = SUBCLASS_OF[name]
    assert actual == expected


def test_causal_lm_alias_is_the_same_class() -> None:
    assert plait.llms.HFTransformerCausalLM is plait.llms.HFTransformerCasualLM


@pytest.mark.parametrize("name", sorted(SURFACE))
def test_public_methods_keep_their_sync_or_async_nature(name: str) -> None:
    assert _surface(CLASSES[name]) == SURFACE[name]


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_class_flags(name: str) -> None:
    cls = CLASSES[name]
    assert (getattr(cls, "is_api", None), getattr(cls, "stream_tools", None)) == FLAGS[name]


@pytest.mark.parametrize("name", sorted(_llm_classes()))
@pytest.mark.parametrize("method", LAGENT_METHODS)
def test_lagent_methods_have_lagents_signatures(name: str, method: str) -> None:
    """Sync: ``(inputs, **gen_params)``; async: ``(inputs, session_ids=None, **gen_params)``.

    Extra keyword parameters with defaults (``tools``, ``tool_choice``) may follow.
    """
    parameters = list(inspect.signature(getattr(CLASSES[name], method)).parameters.values())
    names = [p.name for p in parameters]
    assert names[:2] == ["self", "inputs"]
    assert parameters[-1].kind is inspect.Parameter.VAR_KEYWORD
    assert parameters[-1].name == "gen_params"
    if _is_async(CLASSES[name]):
        assert names[2] == "session_ids"
        assert parameters[2].default is None
        assert parameters[2].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    else:
        assert "session_ids" not in names
    assert all(p.default is not inspect.Parameter.empty for p in parameters[2:-1])


@pytest.mark.parametrize("name", sorted(_llm_classes()))
def test_model_call_passes_session_ids_exactly_to_async_models(name: str) -> None:
    cls = CLASSES[name]
    for method in (*LAGENT_METHODS, "complete"):
        fn: Callable[..., Any] | None = getattr(cls, method, None)
        if fn is None:
            continue
        call = ModelCall(llm=_Bound(fn), method=method, messages=[])
        takes = "session_ids" in call.call().kwargs
        assert takes is _is_async(cls), (name, method)


class _Bound:
    """Stands in for a model instance: exposes one unbound method under every name."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __getattr__(self, name: str) -> Callable[..., Any]:
        return self.fn


def test_instances_answer_isinstance_as_before() -> None:
    sync = plait.testing.ScriptedLLM(["x"])
    async_ = plait.testing.AsyncScriptedLLM(["x"])
    assert isinstance(sync, plait.llms.BaseLLM)
    assert not isinstance(sync, plait.llms.AsyncBaseLLM)
    assert isinstance(async_, plait.llms.BaseLLM)
    assert isinstance(async_, plait.llms.AsyncBaseLLM)


def _is_async_member(member: object) -> bool | None:
    """True for a coroutine/async-generator function, False for another function, None for anything else."""
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    if not inspect.isfunction(member):
        return None
    return inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member)


@pytest.mark.parametrize("name", sorted(_llm_classes()))
def test_no_async_method_overrides_a_sync_one(name: str) -> None:
    """Sync and async classes are siblings over shared cores: along any MRO a method keeps its mode."""
    mro = CLASSES[name].__mro__
    for attribute in {a for base in mro for a in vars(base)}:
        modes = {_is_async_member(vars(base)[attribute]) for base in mro if attribute in vars(base)}
        modes.discard(None)
        assert len(modes) <= 1, (name, attribute)
