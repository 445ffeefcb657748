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
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, Union

from typing_extensions import Unpack

from ..exceptions import ScriptError
from ..llms.base_llm import (
    AsyncBaseLLM,
    BaseLLM,
    ChatInput,
    CoreOptions,
    GenParams,
    LLMCore,
    Message,
    Prompt,
    StreamItem,
    filter_suffix,
    stop_words_of,
)
from ..llms.response import ModelResponse
from ..schema import ModelStatusCode
from ..types import SessionIds

__all__ = ["AsyncFunctionLLM", "AsyncScriptedLLM", "FunctionLLM", "LLMCall", "ScriptItem", "ScriptedLLM"]

_PIECES = re.compile(r"\s*\S+\s*|\s+")

ReplyFunction: TypeAlias = Callable[[Any, GenParams], object]
"""``fn(messages, params)`` returning a reply (or an awaitable of one, for the async doubles)."""

ScriptItem: TypeAlias = Union[str, Sequence[str], ModelResponse, BaseException, ReplyFunction]
"""One scripted reply: text, text pieces, a `ModelResponse`, an exception to raise, or a function."""


@dataclass
class LLMCall:
    """One recorded model call."""

    messages: Any
    params: GenParams
    method: str


class _Replies(Protocol):
    """Where a double takes its replies from: a queue, or an endless supply."""

    def popleft(self) -> ScriptItem:
        """The next reply."""

    def __len__(self) -> int:
        """Replies left (0 for an endless supply)."""

    def __iter__(self) -> Iterator[ScriptItem]:
        """The replies left."""


def _passthrough(messages: Sequence[Message]) -> list[dict[str, object]]:
    return [dict(m) for m in messages]


def _to_response(item: object) -> ModelResponse:
    if isinstance(item, ModelResponse):
        return item
    if isinstance(item, str):
        return ModelResponse(content=item, finish_reason="stop")
    if isinstance(item, (list, tuple)) and all(isinstance(p, str) for p in item):
        return ModelResponse(content="".join(item), finish_reason="stop")
    raise ScriptError(f"script items must be str, list of str, ModelResponse, exception or callable; got {item!r}")


def _pieces(item: object, response: ModelResponse) -> list[str]:
    if isinstance(item, (list, tuple)):
        return [str(p) for p in item]
    return _PIECES.findall(response.content) or [""]


class _ScriptCore(LLMCore):
    """The shared core: take the next reply, record the call, apply stop words.

    Args:
        script: The replies, in order (see the module docstring).
        **gen_params: Generation parameters (`LLMCore`'s), recorded with each call.
    """

    stream_tools = True  # stream_chat serves ModelResponse replies (tool calls in the END item's extra)

    def __init__(self, script: Iterable[ScriptItem] | None = None, **gen_params: Unpack[CoreOptions]) -> None:
        super().__init__(path=type(self).__name__, template_parser=_passthrough, **gen_params)
        self.script: _Replies = deque(script or [])
        self.calls: list[LLMCall] = []
        self._served = 0

    def _take(self, messages: Prompt, params: GenParams, method: str) -> ScriptItem:
        self.calls.append(LLMCall(messages, params, method))
        if not self.script:
            raise ScriptError(
                f"{type(self).__name__} was called {len(self.calls)} times but its script had only "
                f"{self._served} replies; last messages: {messages!r}"
            )
        self._served += 1
        return self.script.popleft()

    @staticmethod
    def _resolve(item: ScriptItem, messages: Prompt, params: GenParams) -> object:
        if isinstance(item, BaseException):
            raise item
        return item(messages, params) if callable(item) else item

    @staticmethod
    def _stopped(response: ModelResponse, params: Mapping[str, object]) -> ModelResponse:
        text = filter_suffix(response.content, stop_words_of(params))
        if text == response.content:
            return response
        return ModelResponse(content=text, tool_calls=response.tool_calls, finish_reason="stop", raw=response.raw)

    @staticmethod
    def _stream_items(item: object, response: ModelResponse, params: Mapping[str, object]) -> Iterator[StreamItem]:
        stops = stop_words_of(params)
        text = ""
        for piece in _pieces(item, response):
            candidate = text + piece
            cut = filter_suffix(candidate, stops)
            text = cut
            if cut != candidate:
                break
            yield ModelStatusCode.STREAM_ING, text, None
        extra = {"response": response} if response.tool_calls or response.reasoning is not None else None
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

    def _reply(self, messages: Prompt, params: GenParams, method: str) -> tuple[object, ModelResponse]:
        item = self._resolve(self._take(messages, params, method), messages, params)
        return item, self._stopped(_to_response(item), params)

    def complete(self, inputs: ChatInput, **gen_params: object) -> ModelResponse:
        """The next reply as a structured `ModelResponse`."""
        prompt, params = self._prepare(inputs, gen_params)
        return self._reply(prompt, params, "complete")[1]

    def chat(self, inputs: ChatInput, **gen_params: object) -> str:
        """The next reply's text."""
        prompt, params = self._prepare(inputs, gen_params)
        return self._reply(prompt, params, "chat")[1].content

    def stream_chat(self, inputs: ChatInput, **gen_params: object) -> Iterator[StreamItem]:
        """The next reply, piece by piece."""
        prompt, params = self._prepare(inputs, gen_params)
        item, response = self._reply(prompt, params, "stream_chat")
        yield from self._stream_items(item, response, params)


class AsyncScriptedLLM(_ScriptCore, AsyncBaseLLM):
    """The async twin of `ScriptedLLM`; callables in the script may be ``async def``."""

    async def _reply(self, messages: Prompt, params: GenParams, method: str) -> tuple[object, ModelResponse]:
        item = self._resolve(self._take(messages, params, method), messages, params)
        if inspect.isawaitable(item):
            item = await item
        return item, self._stopped(_to_response(item), params)

    async def complete(self, inputs: ChatInput, session_ids: SessionIds = None, **gen_params: object) -> ModelResponse:
        """The next reply as a structured `ModelResponse`."""
        prompt, params = self._prepare(inputs, gen_params)
        return (await self._reply(prompt, params, "complete"))[1]

    async def chat(self, inputs: ChatInput, session_ids: SessionIds = None, **gen_params: object) -> str:
        """The next reply's text."""
        prompt, params = self._prepare(inputs, gen_params)
        return (await self._reply(prompt, params, "chat"))[1].content

    async def stream_chat(
        self, inputs: ChatInput, session_ids: SessionIds = None, **gen_params: object
    ) -> AsyncIterator[StreamItem]:
        """The next reply, piece by piece."""
        prompt, params = self._prepare(inputs, gen_params)
        item, response = await self._reply(prompt, params, "stream_chat")
        for chunk in self._stream_items(item, response, params):
            yield chunk


class _Forever:
    """An endless script: every call gets `fn`."""

    def __init__(self, fn: ReplyFunction) -> None:
        self.fn = fn

    def __bool__(self) -> bool:
        return True

    def __len__(self) -> int:
        return 0

    def popleft(self) -> ReplyFunction:
        return self.fn

    def __iter__(self) -> Iterator[ScriptItem]:
        return iter(())


class FunctionLLM(ScriptedLLM):
    """A model whose every reply is ``fn(messages, params)`` (str, pieces or `ModelResponse`).

    Example:
        ```python
        llm = FunctionLLM(lambda messages, params: f"echo: {messages[-1]['content']}")
        ```
    """

    def __init__(self, fn: ReplyFunction, **gen_params: Unpack[CoreOptions]) -> None:
        super().__init__(None, **gen_params)
        self.script = _Forever(fn)


class AsyncFunctionLLM(AsyncScriptedLLM):
    """The async twin of `FunctionLLM`; `fn` may be sync or ``async def``."""

    def __init__(self, fn: ReplyFunction, **gen_params: Unpack[CoreOptions]) -> None:
        super().__init__(None, **gen_params)
        self.script = _Forever(fn)
