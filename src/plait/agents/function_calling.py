"""`FunctionCallingAgent`: an agent that uses the model's native tool calling.

Each turn sends the conversation plus the tools' JSON Schemas (``llm.complete(messages,
tools=...)``). When the model asks for tools, every call in the turn is dispatched through
the executor (concurrently for the async agent), the results go back to the model as
``tool`` messages, and the loop continues until the model answers in text. After
`max_turn` tool rounds the model is asked once more with ``tool_choice='none'`` so a final
answer always arrives. The whole trajectory (tool calls and results) is kept in the
session's memory, so it is part of `state_dict` and of the next turn's context.

Works with any model that has ``complete(messages, tools=..., tool_choice=...)`` returning a
`ModelResponse`: `GPTAPI` against OpenAI-compatible servers, and the embedded
`LlamaCppModel`, which constrains decoding to the tools' schemas.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar

from ..effects import Effect, Flow, Gather, ToolCall
from ..llms.response import ModelResponse
from ..schema import AgentMessage, AgentStatusCode, FunctionCall
from .agent import Agent, AsyncAgent, AsyncStreamingAgent, StreamingAgent
from .aggregator.function_call_aggregator import FunctionCallAggregator

__all__ = [
    "AsyncFunctionCallingAgent",
    "AsyncStreamingFunctionCallingAgent",
    "FunctionCallingAgent",
    "StreamingFunctionCallingAgent",
]


def _arguments(text: str) -> Any:
    """Decode the model's argument JSON; invalid JSON is passed on as text for the tool's parser to report."""
    try:
        return json.loads(text or "{}")
    except json.JSONDecodeError:
        return text


class FunctionCallingAgent(Agent):
    """Answers with the help of tools called through the model's native function calling.

    Args:
        llm: A model with ``complete(messages, tools=...)`` (config dicts accepted).
        actions: Tools (instances, classes, config dicts or plain functions) or a ready
            `ActionExecutor`.
        template: The system instruction.
        max_turn: How many tool rounds before a final answer is forced.
        tool_choice: Passed to the model on tool rounds (``'auto'``, ``'required'``...).
        **kwargs: Other `Agent` arguments (``memory``, ``name``, ``hooks``...).

    Example:
        ```python
        agent = FunctionCallingAgent(GPTAPI('qwen2.5', api_base='http://127.0.0.1:8000/v1'), [Calculator()])
        agent('What is 37 * 91?').content
        ```
    """

    _executor_cls: ClassVar[str] = "ActionExecutor"

    def __init__(
        self,
        llm: Any = None,
        actions: Any = None,
        template: Any = None,
        max_turn: int = 5,
        tool_choice: Any = "auto",
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("aggregator", FunctionCallAggregator())
        super().__init__(llm=llm, template=template, **kwargs)
        from .. import actions as actions_module

        executor_cls = getattr(actions_module, self._executor_cls)
        if isinstance(actions, actions_module.ActionExecutor):
            self.executor = actions
        else:
            self.executor = executor_cls(actions=list(actions or []))
        self.max_turn = max_turn
        self.tool_choice = tool_choice

    def forward_flow(
        self, inputs: Sequence[AgentMessage], session_id: Hashable, kwargs: Mapping[str, Any]
    ) -> Flow[AgentMessage]:
        """Run tool rounds until the model answers in text."""
        tools = self.executor.openai_tools()
        for _ in range(self.max_turn):
            params = {"tools": tools, "tool_choice": self.tool_choice, **kwargs} if tools else dict(kwargs)
            response = _as_response((yield self._turn(session_id, params)))
            if not response.tool_calls:
                return self.make_response(response.content, extra_info=_usage(response))
            self.update_memory(self._call_message(response), session_id)
            results = yield Gather(tuple(self._tool_call(call, session_id) for call in response.tool_calls))
            for call, result in zip(response.tool_calls, results, strict=True):
                self.update_memory(self._result_message(call, result), session_id)
        final_params = {"tools": tools, "tool_choice": "none", **kwargs} if tools else dict(kwargs)
        response = _as_response((yield self._turn(session_id, final_params)))
        return self.make_response(response.content, extra_info=_usage(response))

    def _turn(self, session_id: Hashable, params: Mapping[str, Any]) -> Effect[Any]:
        """One model turn: streamed when this agent and its model can stream, else ``complete``.

        Streaming needs a model whose ``stream_chat`` takes ``tools=`` (``llm.stream_tools``);
        the chunks pass through to the caller and the final one carries the `ModelResponse`.
        """
        prompt = self.get_prompt(session_id)
        if self._stream_forward and getattr(self.llm, "stream_tools", False):
            return self.model_call("stream_chat", prompt, session_id, params, self._turn_chunk)
        return self.model_call("complete", prompt, session_id, params)

    def _turn_chunk(self, item: Any) -> AgentMessage:
        status, text, extra = item
        if status != AgentStatusCode.END:
            return self.make_response(text, AgentStatusCode.STREAM_ING)
        response = extra if isinstance(extra, ModelResponse) else (extra or {}).get("response")
        final = response if isinstance(response, ModelResponse) else ModelResponse(content=text)
        return AgentMessage(sender=self.name, content=text, extra_info={"response": final})

    def _call_message(self, response: ModelResponse) -> AgentMessage:
        calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls]
        return AgentMessage(sender=self.name, content=response.content, formatted={"tool_calls": calls})

    def _tool_call(self, call: Any, session_id: Hashable) -> ToolCall:
        name = self.executor.resolve_name(call.name)
        request = AgentMessage(sender=self.name, content=FunctionCall(name, _arguments(call.arguments)))
        return ToolCall(self.executor, request, session_id)

    @staticmethod
    def _result_message(call: Any, result: AgentMessage) -> AgentMessage:
        content = result.content if isinstance(result, AgentMessage) else result
        extra = {"tool_call_id": call.id, "name": call.name}
        return AgentMessage(sender="ActionExecutor", content=content, extra_info=extra)


class AsyncFunctionCallingAgent(FunctionCallingAgent, AsyncAgent):
    """Async twin: ``await agent(...)``; a turn's tool calls run concurrently."""

    _executor_cls: ClassVar[str] = "AsyncActionExecutor"


class StreamingFunctionCallingAgent(FunctionCallingAgent, StreamingAgent):
    """Streams each model turn's text as it arrives (tool rounds included), then the final END message."""


class AsyncStreamingFunctionCallingAgent(FunctionCallingAgent, AsyncStreamingAgent):
    """Async twin of `StreamingFunctionCallingAgent`: ``async for chunk in agent(...)``."""

    _executor_cls: ClassVar[str] = "AsyncActionExecutor"


def _as_response(result: Any) -> ModelResponse:
    """A turn's result: a `ModelResponse` from ``complete``, or the final chunk of a streamed turn."""
    if isinstance(result, AgentMessage):
        return result.extra_info["response"]  # type: ignore[no-any-return]
    return result  # type: ignore[no-any-return]


def _usage(response: ModelResponse) -> dict[str, Any] | None:
    if response.usage is None:
        return None
    usage = response.usage
    return {
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        }
    }
