"""`GenAISpans`: OpenTelemetry spans after the GenAI semantic conventions, as a process-wide interceptor.

One span per agent call (``invoke_agent {gen_ai.agent.name}``, an `AgentRun`), model request
(``chat {gen_ai.request.model}``, a `ModelCall`) and tool call (``execute_tool
{gen_ai.tool.name}``, an `ActionCall`). Each span is started with its parent given
explicitly (the innermost open plait span of the context, `SpanContext`), never by attaching
an OpenTelemetry context around the flow's yields: a flow may be resumed in another thread
or task. A root span's parent is whatever span the caller has current.

Imported by `plait.tracing.instrument` only: it imports ``opentelemetry``.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from ..effects import ActionCall, Effect, Flow, ModelCall
from ..interceptors import AgentRun, Interceptor
from ..llms.response import ModelResponse
from ..schema import ActionReturn, ActionStatusCode
from ..utils.redact import redact
from ._spans import SpanContext, content_of, dumps, model_name, tool_name
from .usage import perform_observed

__all__ = ["GenAISpans", "provider_name"]

R = TypeVar("R")
Attributes = dict[str, Any]

_PROVIDERS = {
    "plait.llms.openai": "openai",
    "plait.llms.anthropic_llm": "anthropic",
    "plait.llms.llama_cpp": "plait.llama_cpp",
    "plait.llms.huggingface": "plait.huggingface",
    "plait.llms.vllm_wrapper": "plait.vllm",
    "plait.llms.lmdeploy_wrapper": "plait.lmdeploy",
    "plait.testing.llms": "plait.testing",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_DESCRIPTION = 1000


def provider_name(llm: object) -> str:
    """``gen_ai.provider.name`` of a model: ``openai``, ``anthropic``, ``plait.<backend>`` (local) or ``_OTHER``."""
    for cls in type(llm).__mro__:
        found = _PROVIDERS.get(cls.__module__)
        if found is not None:
            return found
    return "_OTHER"


@dataclass(eq=False)
class _Open:
    """An open span, and (for an agent's) the tool call ids its last model reply asked for, by tool name."""

    span: Span
    calls: dict[str, deque[str]] = field(default_factory=dict)


class GenAISpans(Interceptor):
    """Opens a span around every agent run, model call and tool call (see the module docstring).

    Args:
        tracer: The OpenTelemetry tracer the spans come from.
        record_content: Also record messages, tool arguments and results (secrets redacted).
    """

    effects = (AgentRun, ModelCall, ActionCall)

    def __init__(self, tracer: Tracer, record_content: bool = False) -> None:
        self.tracer = tracer
        self.record_content = record_content
        self.open: SpanContext[_Open] = SpanContext("plait_otel_span")

    def current_span(self) -> Span | None:
        """The innermost plait span open in this context (None: none)."""
        node = self.open.get()
        return None if node is None else node.span

    def around(self, effect: Effect[R]) -> Flow[R]:
        """Perform `effect` inside its span; the span ends with the outcome (status ERROR on failure)."""
        parent = self.open.get()
        name, kind, attributes = self._describe(effect, parent)
        context = trace.set_span_in_context(parent.span) if parent is not None else None
        node = _Open(self.tracer.start_span(name, context=context, kind=kind, attributes=attributes))
        token = self.open.enter(node)
        try:
            if isinstance(effect, ModelCall):
                result, response = yield from perform_observed(cast("ModelCall[R]", effect))
                self._chat_done(node.span, parent, result, response)
            else:
                result = yield effect
                self._done(node.span, effect, result)
            return result
        except GeneratorExit:  # a stream closed early: not an error
            raise
        except BaseException as error:
            self._fail(node.span, type(error).__qualname__, f"{type(error).__name__}: {error}")
            raise
        finally:
            self.open.leave(token, parent)
            node.span.end()

    # -- what a span says when it starts -------------------------------------------------------
    def _describe(self, effect: Effect[Any], parent: _Open | None) -> tuple[str, SpanKind, Attributes]:
        if isinstance(effect, AgentRun):
            return self._agent(effect)
        if isinstance(effect, ModelCall):
            return self._chat(effect)
        return self._tool(cast(ActionCall, effect), parent)  # `effects` names only these three

    def _agent(self, effect: AgentRun) -> tuple[str, SpanKind, Attributes]:
        agent = effect.agent
        name = str(getattr(agent, "name", None) or type(agent).__name__)
        attributes: Attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        _session(attributes, effect.session_id)
        description = getattr(agent, "description", None)
        if isinstance(description, str) and description:
            attributes["gen_ai.agent.description"] = description
        llm = getattr(agent, "llm", None)
        if llm is not None:
            attributes["gen_ai.provider.name"] = provider_name(llm)
            attributes["gen_ai.request.model"] = model_name(llm)
        if self.record_content and effect.messages:
            attributes["gen_ai.input.messages"] = _recorded([_text_message(m) for m in effect.messages])
        return f"invoke_agent {name}", SpanKind.INTERNAL, attributes

    def _chat(self, effect: ModelCall[Any]) -> tuple[str, SpanKind, Attributes]:
        model = model_name(effect.llm)
        attributes: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(effect.llm),
            "gen_ai.request.model": model,
        }
        _session(attributes, effect.session_id)
        params = {**(getattr(effect.llm, "gen_params", None) or {}), **effect.params}
        for key, attribute in (
            ("temperature", "gen_ai.request.temperature"),
            ("top_p", "gen_ai.request.top_p"),
            ("max_tokens", "gen_ai.request.max_tokens"),
            ("max_new_tokens", "gen_ai.request.max_tokens"),
        ):
            value = params.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                attributes[attribute] = value
        if self.record_content:
            attributes["gen_ai.input.messages"] = _recorded(_input_messages(effect.messages))
        return f"chat {model}", SpanKind.CLIENT, attributes

    def _tool(self, effect: ActionCall, parent: _Open | None) -> tuple[str, SpanKind, Attributes]:
        name = tool_name(effect)
        attributes: Attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
        }
        _session(attributes, effect.session_id)
        waiting = parent.calls.get(_UNSAFE.sub("_", name)) if parent is not None else None
        if waiting:
            attributes["gen_ai.tool.call.id"] = waiting.popleft()
        if self.record_content:
            attributes["gen_ai.tool.call.arguments"] = _recorded(effect.inputs)
        return f"execute_tool {name}", SpanKind.INTERNAL, attributes

    # -- what a span says when it ends ---------------------------------------------------------
    def _chat_done(self, span: Span, parent: _Open | None, result: object, response: ModelResponse | None) -> None:
        if response is None:
            if self.record_content:
                span.set_attribute("gen_ai.output.messages", _recorded([_text_message(result, "assistant")]))
            return
        if response.tool_calls and parent is not None:  # the tool spans that follow take these ids
            parent.calls = {}
            for call in response.tool_calls:
                parent.calls.setdefault(_UNSAFE.sub("_", call.name), deque()).append(call.id)
        for key in ("id", "model"):
            value = _field(response.raw, key)
            if isinstance(value, str) and value:
                span.set_attribute(f"gen_ai.response.{key}", value)
        if response.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [str(response.finish_reason)])
        if response.usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", response.usage.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", response.usage.completion_tokens)
        if self.record_content:
            span.set_attribute("gen_ai.output.messages", _recorded([_output_message(response)]))

    def _done(self, span: Span, effect: Effect[Any], result: object) -> None:
        if isinstance(effect, AgentRun):
            if self.record_content:
                span.set_attribute("gen_ai.output.messages", _recorded([_text_message(result, "assistant")]))
            return
        if not isinstance(result, ActionReturn):
            return
        if self.record_content:
            span.set_attribute("gen_ai.tool.call.result", _recorded(result.result))
        if result.state != ActionStatusCode.SUCCESS:  # a tool's failure is data for the model, an error here
            state = int(result.state)
            label = ActionStatusCode(state).name if state in ActionStatusCode._value2member_map_ else str(state)
            self._fail(span, label, result.errmsg or label)

    @staticmethod
    def _fail(span: Span, error_type: str, description: str) -> None:
        span.set_attribute("error.type", error_type)
        span.set_status(Status(StatusCode.ERROR, redact(description)[:_MAX_DESCRIPTION]))


def _session(attributes: Attributes, session_id: Hashable) -> None:
    if session_id is not None:
        attributes["gen_ai.conversation.id"] = str(session_id)


def _field(raw: object, key: str) -> object:
    """A field of a backend's response body: a dict's item or an SDK object's attribute."""
    return raw.get(key) if isinstance(raw, Mapping) else getattr(raw, key, None)


def _recorded(value: object) -> str:
    """Content as a span attribute: JSON text, secrets masked."""
    text = dumps(value)
    # `redact` masks URL passwords (``://user:pw@``) and ``key=value`` pairs: text with neither
    # ``@`` nor ``=`` has nothing to mask, and skipping its regexes halves the cost of content
    return redact(text) if "=" in text or "@" in text else text


def _text_message(message: object, role: str = "user") -> dict[str, object]:
    """An agent's input or reply in the conventions' message form (role and one text part)."""
    if isinstance(message, Mapping):
        role = str(message.get("role") or role)
    return {"role": role, "parts": [{"type": "text", "content": content_of(message)}]}


def _input_messages(messages: object) -> list[dict[str, object]]:
    """A model request's messages in the conventions' form: role, then text, tool call and tool result parts."""
    if not isinstance(messages, list):
        return [_text_message(messages)]
    found: list[dict[str, object]] = []
    for message in messages:
        if not isinstance(message, Mapping):
            found.append(_text_message(message))
            continue
        role = str(message.get("role") or "user")
        parts: list[dict[str, object]] = []
        content = message.get("content")
        reasoning = message.get("reasoning")  # a message's reasoning (`Reasoning.to_wire`), kept apart from its text
        if isinstance(reasoning, Mapping) and reasoning.get("text"):
            parts.append({"type": "reasoning", "content": reasoning["text"]})
        if role == "tool":
            parts.append({"type": "tool_call_response", "id": message.get("tool_call_id"), "response": content})
        elif content:
            parts.append({"type": "text", "content": content})
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {} if isinstance(call, Mapping) else {}
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id") if isinstance(call, Mapping) else None,
                    "name": function.get("name"),
                    "arguments": function.get("arguments"),
                }
            )
        found.append({"role": role, "parts": parts})
    return found


def _output_message(response: ModelResponse) -> dict[str, object]:
    parts: list[dict[str, object]] = []
    if response.reasoning is not None and response.reasoning.text:  # the conventions' ReasoningPart, first
        parts.append({"type": "reasoning", "content": response.reasoning.text})
    if response.content:
        parts.append({"type": "text", "content": response.content})
    parts += [{"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls]
    return {"role": "assistant", "parts": parts, "finish_reason": response.finish_reason}
