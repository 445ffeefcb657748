"""The tool-calling surface of the models that take OpenAI tool schemas (private).

`GPTAPI`, `ClaudeAPI` and `LlamaCppModel` (and their async siblings) answer
``complete(messages, tools=..., tool_choice=...)`` with a `ModelResponse` and accept the
same ``tools`` in ``stream_chat``. The public methods are defined once here; each backend
implements the IO behind them (`_respond`, `_respond_stream`), given the call as a
`ToolRequest`. `ToolStreaming` alone serves `LlamaCppModel`, whose ``complete`` names its
first argument ``messages``; `ToolCalling` alone (just ``complete``) serves wrappers that
are not models themselves.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ..types import SessionIds
from ..utils._aio import closing_stream
from ._openai_protocol import ToolChoice, ToolSpec
from .base_llm import AsyncBaseLLM, BaseLLM, ChatInput, StreamItem
from .response import ModelResponse

__all__ = [
    "AsyncToolCalling",
    "AsyncToolLLM",
    "AsyncToolStreaming",
    "ToolCalling",
    "ToolLLM",
    "ToolRequest",
    "ToolStreaming",
]


@dataclass(frozen=True)
class ToolRequest:
    """One ``complete`` or ``stream_chat`` call.

    Attributes:
        inputs: The conversation (or a raw prompt string).
        tools: The tools offered (OpenAI tool dicts or bare function schemas), if any.
        tool_choice: ``'auto'``, ``'none'``, ``'required'``, or one function.
        overrides: This call's generation parameters.
    """

    inputs: ChatInput
    tools: Sequence[ToolSpec] | None
    tool_choice: ToolChoice
    overrides: Mapping[str, object]


class ToolCalling(abc.ABC):
    """``complete(inputs, tools=..., tool_choice=...)``, answered by `_respond`."""

    def complete(
        self,
        inputs: ChatInput,
        tools: Sequence[ToolSpec] | None = None,
        tool_choice: ToolChoice = None,
        **gen_params: object,
    ) -> ModelResponse:
        """One reply as a `ModelResponse`: text, native tool calls (in order), usage.

        `tools` are OpenAI tool dicts (or bare function schemas); `tool_choice` is
        ``'auto'``, ``'none'``, ``'required'`` or one function. `gen_params` override the
        generation parameters for this call.
        """
        return self._respond(ToolRequest(inputs, tools, tool_choice, gen_params))

    @abc.abstractmethod
    def _respond(self, call: ToolRequest) -> ModelResponse:
        """The reply of `complete`."""


class ToolStreaming(BaseLLM):
    """A synchronous model whose `stream_chat` takes tools, answered by `_respond_stream`."""

    def stream_chat(
        self,
        inputs: ChatInput,
        tools: Sequence[ToolSpec] | None = None,
        tool_choice: ToolChoice = None,
        **gen_params: object,
    ) -> Iterator[StreamItem]:
        """Stream ``(status, text_so_far, extra)``; the `END` item's extra is the `ModelResponse`."""
        yield from self._respond_stream(ToolRequest(inputs, tools, tool_choice, gen_params))

    def _respond_stream(self, call: ToolRequest) -> Iterator[StreamItem]:
        """The items of `stream_chat`; here the plain `BaseLLM.stream_chat` of the conversation (no tools)."""
        yield from BaseLLM.stream_chat(self, call.inputs, **call.overrides)


class ToolLLM(ToolCalling, ToolStreaming):
    """A synchronous model whose `complete` and `stream_chat` take tools."""


class AsyncToolCalling(abc.ABC):
    """The asynchronous `ToolCalling`: ``await complete(inputs, tools=..., tool_choice=...)``."""

    async def complete(
        self,
        inputs: ChatInput,
        tools: Sequence[ToolSpec] | None = None,
        tool_choice: ToolChoice = None,
        session_ids: SessionIds = None,
        **gen_params: object,
    ) -> ModelResponse:
        """One reply as a `ModelResponse` (see `ToolCalling.complete`)."""
        return await self._respond(ToolRequest(inputs, tools, tool_choice, gen_params))

    @abc.abstractmethod
    async def _respond(self, call: ToolRequest) -> ModelResponse:
        """The reply of `complete`."""


class AsyncToolStreaming(AsyncBaseLLM):
    """The asynchronous `ToolStreaming`: `stream_chat` is an async generator."""

    async def stream_chat(
        self,
        inputs: ChatInput,
        session_ids: SessionIds = None,
        tools: Sequence[ToolSpec] | None = None,
        tool_choice: ToolChoice = None,
        **gen_params: object,
    ) -> AsyncIterator[StreamItem]:
        """Stream ``(status, text_so_far, extra)``; the `END` item's extra is the `ModelResponse`."""
        call = ToolRequest(inputs, tools, tool_choice, gen_params)
        async with contextlib.aclosing(self._respond_stream(call, session_ids)) as items:  # left early: closed now
            async for item in items:
                yield item

    async def _respond_stream(self, call: ToolRequest, session_ids: SessionIds) -> AsyncGenerator[StreamItem, None]:
        """The items of `stream_chat`; here the plain `AsyncBaseLLM.stream_chat` of the conversation (no tools)."""
        async with closing_stream(AsyncBaseLLM.stream_chat(self, call.inputs, session_ids, **call.overrides)) as items:
            async for item in items:
                yield item


class AsyncToolLLM(AsyncToolCalling, AsyncToolStreaming):
    """An asynchronous model whose `complete` and `stream_chat` take tools."""
