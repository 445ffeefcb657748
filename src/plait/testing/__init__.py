"""Test doubles for plait users and plait's own tests.

* `ScriptedLLM` / `AsyncScriptedLLM`: replies from a script; records calls.
* `FunctionLLM` / `AsyncFunctionLLM`: replies computed by a function of the messages.
* `scripted_llm(script, mode)`: the right scripted class for ``'sync'`` or ``'async'`` code.
* `FaultInjector`: an interceptor that makes chosen model/tool/agent calls fail or answer.
* `FakeOpenAIServer`: a real OpenAI-compatible server on ``127.0.0.1``, answering from a
  script of `Reply` (text and/or tool calls) and faults (`HTTPFault`, `Hang`, `Truncated`,
  `PingDrip`, `InvalidJSON`, `RawSSE`); see `plait.testing.fake_openai`.
* `FakeHTTPServer`: a real HTTP server answering `Canned` responses and keeping every
  `RecordedRequest`, for tools that call web APIs; see `plait.testing.fake_http`.
* `FakeHub`: the Hugging Face Hub's file downloads, for ``hf:`` models offline
  (``HF_ENDPOINT``); see `plait.testing.fake_hub`.

Every name is imported on first use, so ``import plait.testing`` stays light (the fake
servers bring in aiohttp only when named).

```python
from plait import GPTAPI
from plait.testing import FakeOpenAIServer, Reply

with FakeOpenAIServer([Reply('hello')]) as server:
    print(GPTAPI('any-model', api_base=server.base_url, key=None).chat([{'role': 'user', 'content': 'hi'}]))
```
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from typing_extensions import Unpack

from .._lazy import lazy_module

if TYPE_CHECKING:
    from ..llms.base_llm import CoreOptions
    from .fake_http import Canned, FakeHTTPServer, RecordedRequest
    from .fake_hub import FakeHub
    from .fake_openai import FakeOpenAIServer, Hang, HTTPFault, InvalidJSON, PingDrip, RawSSE, Reply, Truncated
    from .faults import FaultInjector
    from .llms import AsyncFunctionLLM, AsyncScriptedLLM, FunctionLLM, LLMCall, ScriptedLLM, ScriptItem

# public name -> module that defines it (relative to this package)
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ["AsyncFunctionLLM", "AsyncScriptedLLM", "FunctionLLM", "LLMCall", "ScriptItem", "ScriptedLLM"], ".llms"
    ),
    "FaultInjector": ".faults",
    **dict.fromkeys(
        ["FakeOpenAIServer", "HTTPFault", "Hang", "InvalidJSON", "PingDrip", "RawSSE", "Reply", "Truncated"],
        ".fake_openai",
    ),
    **dict.fromkeys(["Canned", "FakeHTTPServer", "RecordedRequest"], ".fake_http"),
    "FakeHub": ".fake_hub",
}

__all__ = [
    "AsyncFunctionLLM",
    "AsyncScriptedLLM",
    "Canned",
    "FakeHTTPServer",
    "FakeHub",
    "FakeOpenAIServer",
    "FaultInjector",
    "FunctionLLM",
    "HTTPFault",
    "Hang",
    "InvalidJSON",
    "LLMCall",
    "PingDrip",
    "RawSSE",
    "RecordedRequest",
    "Reply",
    "ScriptedLLM",
    "Truncated",
    "scripted_llm",
]


def scripted_llm(
    script: Iterable[ScriptItem], mode: str = "sync", **gen_params: Unpack[CoreOptions]
) -> ScriptedLLM | AsyncScriptedLLM:
    """A scripted model for sync (``'sync'``) or async (``'async'``) agents, from the same script."""
    from .llms import AsyncScriptedLLM, ScriptedLLM

    if mode == "async":
        return AsyncScriptedLLM(script, **gen_params)
    return ScriptedLLM(script, **gen_params)


__getattr__, __dir__ = lazy_module(__name__, _EXPORTS, __all__)
