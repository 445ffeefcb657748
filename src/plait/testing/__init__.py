"""Test doubles for plait users and plait's own tests.

* `ScriptedLLM` / `AsyncScriptedLLM`: replies from a script; records calls.
* `FunctionLLM` / `AsyncFunctionLLM`: replies computed by a function of the messages.
* `scripted_llm(script, mode)`: the right scripted class for ``'sync'`` or ``'async'`` code.
* `FaultInjector`: an interceptor that makes chosen model/tool/agent calls fail or answer.
"""

from __future__ import annotations

from collections.abc import Iterable

from typing_extensions import Unpack

from ..llms.base_llm import CoreOptions
from .faults import FaultInjector
from .llms import AsyncFunctionLLM, AsyncScriptedLLM, FunctionLLM, LLMCall, ScriptedLLM, ScriptItem

__all__ = [
    "AsyncFunctionLLM",
    "AsyncScriptedLLM",
    "FaultInjector",
    "FunctionLLM",
    "LLMCall",
    "ScriptedLLM",
    "scripted_llm",
]


def scripted_llm(
    script: Iterable[ScriptItem], mode: str = "sync", **gen_params: Unpack[CoreOptions]
) -> ScriptedLLM | AsyncScriptedLLM:
    """A scripted model for sync (``'sync'``) or async (``'async'``) agents, from the same script."""
    if mode == "async":
        return AsyncScriptedLLM(script, **gen_params)
    return ScriptedLLM(script, **gen_params)
