"""Test doubles for models: one script serves `chat`, `complete` and `stream_chat`, sync or async.

```python
script = ['Thought: use the tool', ModelResponse(tool_calls=[ToolCall('1', 'add', '{"a": 1}')]), 'Done']
llm = ScriptedLLM(script)          # for Agent / StreamingAgent
llm = AsyncScriptedLLM(script)     # for AsyncAgent / AsyncStreamingAgent, same replies
llm.calls[0].messages              # what the agent sent
llm.assert_complete()              # every reply was used
```

A script item is a reply text, a list of text pieces (streamed piece by piece), a
`ModelResponse` (native tool calls), an exception instance (raised by that call), or a
callable ``fn(messages, params)`` returning one of those. Stop words are honoured the way a
real server does: the reply ends before the first one.
"""

from __future__ import annotations

import inspect
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..exceptions import ScriptError
from ..llms.base_llm import AsyncBaseLLM, BaseLLM, StreamItem, filter_suffix
from ..llms.response import ModelResponse
from ..schema import ModelStatusCode

__all__ = ["AsyncFunctionLLM", "AsyncScriptedLLM", "FunctionLLM", "LLMCall", "ScriptedLLM"]

_PIECES = re.compile(r"\s*\S+\s*|\s+")


@dataclass
class LLMCall:
    """One recorded model call."""

    messages: Any
    params: dict[str, Any]
    method: str


def _passthrough(messages: Any) -> Any:
    return [dict(m) for m in messages]


def _to_response(item: Any) -> ModelResponse:
    if isinstance(item, ModelResponse):
        return item
    if isinstance(item, str):
        return ModelResponse(content=item, finish_reason="stop")
    if isinstance(item, (list, tuple)) and all(isinstance(p, str) for p in item):
        return ModelResponse(content="".join(item), finish_reason="stop")
    raise ScriptError(f"script items must be str, list of str, ModelResponse, exception or callable; got {item!r}")


def _pieces(item: Any, response: ModelResponse) -> list[str]:
    if isinstance(item, (list, tuple)):
        return [str(p) for p in item]
    return _PIECES.findall(response.content) or [""]


class _ScriptCore:
    """The shared core: take the next reply, record the call, apply stop words."""

    stream_tools = True  # stream_chat serves ModelResponse replies (tool calls in the END item's extra)

    def _setup(self, script: Iterable[Any] | None) -> None:
        self.script: deque[Any] = deque(script or [])
        self.calls: list[LLMCall] = []
        self._served = 0

    def _take(self, messages: Any, params: dict[str, Any], method: str) -> Any:
        self.calls.append(LLMCall(messages, params, method))
        if not self.script:
            raise ScriptError(
                f"{type(self).__name__} was called {len(self.calls)} times but its script had only "
                f"{self._served} replies; last messages: {messages!r}"
            )
        self._served += 1
        return self.script.popleft()

    @staticmethod
    def _resolve(item: Any, messages: Any, params: dict[str, Any]) -> Any:
        if isinstance(item, BaseException):
            raise item
        return item(messages, params) if callable(item) else item

    @staticmethod
    def _stopped(response: ModelResponse, params: dict[str, Any]) -> ModelResponse:
        text = filter_suffix(response.content, params.get("stop_words"))
        if text == response.content:
            return response
        return ModelResponse(content=text, tool_calls=response.tool_calls, finish_reason="stop", raw=response.raw)

    @staticmethod
    def _stream_items(item: Any, response: ModelResponse, params: dict[str, Any]) -> Iterator[StreamItem]:
        stops = params.get("stop_words")
        text = ""
        for piece in _pieces(item, response):
            candidate = text + piece
            cut = filter_suffix(candidate, stops)
            text = cut
            if cut != candidate:
                break
            yield ModelStatusCode.STREAM_ING, text, None
        extra = {"response": response} if response.tool_calls else None
        yield ModelStatusCode.END, text, extra

    @property
    def remaining(self) -> int:
        """Replies not used yet."""
        return len(self.script)

    def assert_complete(self) -> None:
        """Raise `ScriptError` if some replies were never requested."""
        if self.script:
            raise ScriptError(f"{type(self).__name__} has {len(self.script)} unused replies: {list(self.script)!r}")


class ScriptedLLM(_ScriptCore, BaseLLM):
    """A synchronous model that replies from a script (see the module docstring)."""

    def __init__(self, script: Iterable[Any] | None = None, **gen_params: Any) -> None:
        BaseLLM.__init__(self, path=type(self).__name__, template_parser=_passthrough, **gen_params)
        self._setup(script)

    def _reply(self, messages: Any, params: dict[str, Any], method: str) -> tuple[Any, ModelResponse]:
        item = self._resolve(self._take(messages, params, method), messages, params)
        return item, self._stopped(_to_response(item), params)

    def complete(self, inputs: Any, **gen_params: Any) -> ModelResponse:
        """The next reply as a structured `ModelResponse`."""
        prompt, params = self._prepare(inputs, gen_params)
        return self._reply(prompt, params, "complete")[1]

    def chat(self, inputs: Any, **gen_params: Any) -> str:
        """The next reply's text."""
        prompt, params = self._prepare(inputs, gen_params)
        return self._reply(prompt, params, "chat")[1].content

    def stream_chat(self, inputs: Any, **gen_params: Any) -> Iterator[StreamItem]:
        """The next reply, piece by piece."""
        prompt, params = self._prepare(inputs, gen_params)
        item, response = self._reply(prompt, params, "stream_chat")
        yield from self._stream_items(item, response, params)


class AsyncScriptedLLM(_ScriptCore, AsyncBaseLLM):
    """The async twin of `ScriptedLLM`; callables in the script may be ``async def``."""

    def __init__(self, script: Iterable[Any] | None = None, **gen_params: Any) -> None:
        AsyncBaseLLM.__init__(self, path=type(self).__name__, template_parser=_passthrough, **gen_params)
        self._setup(script)

    async def _reply(self, messages: Any, params: dict[str, Any], method: str) -> tuple[Any, ModelResponse]:
        item = self._resolve(self._take(messages, params, method), messages, params)
        if inspect.isawaitable(item):
            item = await item
        return item, self._stopped(_to_response(item), params)

    async def complete(self, inputs: Any, session_ids: Any = None, **gen_params: Any) -> ModelResponse:
        """The next reply as a structured `ModelResponse`."""
        prompt, params = self._prepare(inputs, gen_params)
        return (await self._reply(prompt, params, "complete"))[1]

    async def chat(self, inputs: Any, session_ids: Any = None, **gen_params: Any) -> str:  # type: ignore[override]
        """The next reply's text."""
        prompt, params = self._prepare(inputs, gen_params)
        return (await self._reply(prompt, params, "chat"))[1].content

    async def stream_chat(  # type: ignore[override]
        self, inputs: Any, session_ids: Any = None, **gen_params: Any
    ) -> AsyncIterator[StreamItem]:
        """The next reply, piece by piece."""
        prompt, params = self._prepare(inputs, gen_params)
        item, response = await self._reply(prompt, params, "stream_chat")
        for chunk in self._stream_items(item, response, params):
            yield chunk


class _Forever:
    """An endless script: every call gets `fn`."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __bool__(self) -> bool:
        return True

    def __len__(self) -> int:
        return 0

    def popleft(self) -> Callable[..., Any]:
        return self.fn

    def __iter__(self) -> Iterator[Any]:
        return iter(())


class FunctionLLM(ScriptedLLM):
    """A model whose every reply is ``fn(messages, params)`` (str, pieces or `ModelResponse`).

    Example:
        ```python
        llm = FunctionLLM(lambda messages, params: f"echo: {messages[-1]['content']}")
        ```
    """

    def __init__(self, fn: Callable[[Any, dict[str, Any]], Any], **gen_params: Any) -> None:
        super().__init__(None, **gen_params)
        self.script = _Forever(fn)  # type: ignore[assignment]


class AsyncFunctionLLM(AsyncScriptedLLM):
    """The async twin of `FunctionLLM`; `fn` may be sync or ``async def``."""

    def __init__(self, fn: Callable[[Any, dict[str, Any]], Any], **gen_params: Any) -> None:
        super().__init__(None, **gen_params)
        self.script = _Forever(fn)  # type: ignore[assignment]
