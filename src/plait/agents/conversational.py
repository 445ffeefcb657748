"""`ConversationalAgent` / `AsyncConversationalAgent`: a chat agent with tools, after seed 004.

This is the loop of LangChain's ``chat-conversational-react-description`` AgentExecutor,
rebuilt on plait's agent model. The prompt is, in order:

1. the system prompt (`template`);
2. the chat history: earlier user messages and final answers, from the agent's memory
   (so ``Memory(recent_n=...)`` bounds it and `state_dict` saves it);
3. a human message listing the tools and the response format, ending with the input;
4. the scratchpad of this call: each model reply, then the tool's result in a
   ``TOOL RESPONSE`` message.

The model answers with a JSON blob ``{"action": ..., "action_input": ...}``, usually in a
```` ```json ```` fence; ``"action": "Final Answer"`` ends the call with ``action_input``
as the reply. An unknown tool gets an observation naming the valid ones. A reply that
does not parse is sent back once with the parse error (a fix-up retry); if the retry fails
too, the error is recorded as a ``_Exception`` step and the loop goes on. After
`max_iterations` steps, ``early_stopping_method='force'`` returns a fixed stop message and
``'generate'`` asks the model once more for a final answer.

The reply's ``extra_info['intermediate_steps']`` lists the steps as
``{'tool', 'tool_input', 'log', 'observation'}`` dicts (``log`` is the raw model reply).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from ..effects import Flow
from ..exceptions import UserError
from ..prompts import conversational_prompts as prompts
from ..prompts.parsers.json_parser import JSONParser
from ..prompts.prompt_template import format_placeholders
from ..schema import AgentMessage
from ._react_base import ProtocolAggregator, ToolProtocolAgent, describe_parameters
from .agent import AsyncAgent
from .aggregator.default_aggregator import content_to_text

__all__ = ["AsyncConversationalAgent", "ConversationalAction", "ConversationalAgent"]

FINAL_ANSWER = "Final Answer"
PARSE_ERROR_TOOL = "_Exception"
_EARLY_STOPPING = ("force", "generate")
_HUMAN_FIELDS = ("tools", "tool_names", "action_info", "input")


class ConversationalAction(BaseModel):
    """The JSON blob of one step."""

    action: str = Field(description="a tool name, or Final Answer")
    action_input: Any = Field(default="", description="the tool's input, or the reply to the user")


_Decision = tuple[dict[str, Any] | None, str, str | None]


class ConversationalAgent(ToolProtocolAgent):
    """A conversational agent that uses tools through JSON blobs and remembers the chat.

    Args:
        llm: The model (instance or config dict); its `chat` is used.
        actions: Tools (instances, classes, config dicts or functions) or an `ActionExecutor`.
        template: The system prompt (may use ``{tools}``, ``{tool_names}``, ``{action_info}``).
        human_template: The human message (``{tools}``, ``{tool_names}``, ``{input}``).
        tool_response_template: How a tool's result is shown (``{observation}``).
        max_iterations: Tool steps allowed per call.
        early_stopping_method: ``'force'`` (return a fixed stop message) or
            ``'generate'`` (ask the model once more for a final answer).
        output_format: The reply parser; default a lenient `JSONParser` for
            `ConversationalAction`.
        action_hooks: Hooks for the executor.
        **kwargs: Other `Agent` arguments (``memory``, ``name``, ``hooks``...).

    Raises:
        UserError: An unknown `early_stopping_method`, or a template placeholder the
            agent cannot fill.

    Example:
        ```python
        agent = ConversationalAgent(llm, [search], memory=dict(type=Memory, recent_n=20))
        agent('I am Lai.'); agent('Who am I?')              # the history is in the prompt
        agent('Which sector looks better, clean energy or TMT?').extra_info['intermediate_steps']
        ```
    """

    template_fields = ("tools", "tool_names", "action_info")

    def __init__(
        self,
        llm: Any = None,
        actions: Any = None,
        template: Any = None,
        human_template: str = prompts.CONVERSATIONAL_HUMAN,
        tool_response_template: str = prompts.CONVERSATIONAL_TOOL_RESPONSE,
        max_iterations: int = 15,
        early_stopping_method: str = "force",
        output_format: Any = None,
        action_hooks: list[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if early_stopping_method not in _EARLY_STOPPING:
            raise UserError(f"early_stopping_method must be one of {_EARLY_STOPPING}, got {early_stopping_method!r}")
        unknown = [f for f in format_placeholders(human_template) if f not in _HUMAN_FIELDS]
        if unknown:
            raise UserError(f"human_template uses unknown placeholder(s) {unknown}; available: {list(_HUMAN_FIELDS)}")
        kwargs.setdefault("aggregator", ProtocolAggregator())
        super().__init__(
            llm=llm,
            actions=actions,
            template=prompts.CONVERSATIONAL_SYSTEM if template is None else template,
            max_turn=max_iterations,
            action_hooks=action_hooks,
            output_format=output_format or JSONParser("", action=ConversationalAction),
            **kwargs,
        )
        self.human_template = human_template
        self.tool_response_template = tool_response_template
        self.early_stopping_method = early_stopping_method

    @property
    def max_iterations(self) -> int:
        """Tool steps allowed per call (the same as `max_turn`)."""
        return self.max_turn

    @max_iterations.setter
    def max_iterations(self, value: int) -> None:
        self.max_turn = value

    def template_values(self) -> dict[str, Any]:
        """Adds ``{tools}``: one ``> name: description (arguments)`` line per tool."""
        values = super().template_values()
        lines = [
            f"> {api['name']}: {api.get('description', '')} Arguments: {describe_parameters(api)}."
            for api in self.tool_descriptions()
        ]
        values["tools"] = "\n".join(lines) or "(no tools)"
        return values

    def get_prompt(self, session_id: Hashable = 0) -> list[dict[str, Any]]:
        """System prompt, chat history, and the human message for the pending input (no scratchpad)."""
        history, pending = self.split_memory(session_id)
        user_input = "\n".join(content_to_text(m.content) for m in pending)
        values = {**self.template_values(), "input": user_input}
        human = self.human_template.format(**{k: values[k] for k in format_placeholders(self.human_template)})
        return [*self.render(history, self.system_prompt()), {"role": "user", "content": human}]

    def forward_flow(
        self, inputs: Sequence[AgentMessage], session_id: Hashable, kwargs: Mapping[str, Any]
    ) -> Flow[AgentMessage]:
        """Take steps until the model gives its final answer (or the iterations run out)."""
        return (yield from self._conversation_flow(session_id, kwargs))

    def _conversation_flow(self, session_id: Hashable, kwargs: Mapping[str, Any]) -> Flow[AgentMessage]:
        base = self.get_prompt(session_id)
        scratchpad: list[dict[str, Any]] = []
        steps: list[dict[str, Any]] = []
        for _ in range(self.max_turn):
            parsed, log, error = yield from self._decide(base + scratchpad, session_id, kwargs)
            if parsed is None:
                observation = f"Invalid or incomplete reply: {error}"
                steps.append({"tool": PARSE_ERROR_TOOL, "tool_input": log, "log": log, "observation": observation})
            elif _is_final(parsed):
                return self._reply(_text(parsed.get("action_input")), steps)
            else:
                tool, tool_input = str(parsed["action"]).strip(), parsed.get("action_input")
                result = yield self.tool_call(tool, tool_input, session_id)
                observation = self.result_text(result)
                steps.append({"tool": tool, "tool_input": tool_input, "log": log, "observation": observation})
            scratchpad += [
                {"role": "assistant", "content": log},
                {"role": "user", "content": self.tool_response_template.format(observation=observation)},
            ]
        if self.early_stopping_method == "force":
            stopped = prompts.CONVERSATIONAL_STOPPED.format(max_iterations=self.max_turn)
            return self._reply(stopped, steps, stopped=True)
        prompt = [*base, *scratchpad, {"role": "user", "content": prompts.CONVERSATIONAL_GENERATE}]
        raw = yield self.model_call("chat", prompt, session_id, kwargs)
        reply = self.make_response(raw)
        final = reply.formatted if isinstance(reply.formatted, Mapping) and _is_final(reply.formatted) else None
        answer = _text(final.get("action_input")) if final is not None else str(raw).strip()
        return self._reply(answer, steps, stopped=True)

    def _decide(self, prompt: list[dict[str, Any]], session_id: Hashable, kwargs: Mapping[str, Any]) -> Flow[_Decision]:
        """One model step: ``(parsed, log, None)``, or ``(None, log, error)`` after a failed fix-up retry."""
        raw = yield self.model_call("chat", prompt, session_id, kwargs)
        parsed, error = self._parse(raw)
        if parsed is not None:
            return parsed, str(raw), None
        fix = [*prompt, {"role": "assistant", "content": str(raw)}]
        fix.append({"role": "user", "content": prompts.CONVERSATIONAL_FIX.format(error=error)})
        raw = yield self.model_call("chat", fix, session_id, kwargs)
        parsed, error = self._parse(raw)
        return parsed, str(raw), error

    def _parse(self, raw: Any) -> tuple[dict[str, Any] | None, str | None]:
        reply = self.make_response(raw)
        formatted = reply.formatted
        if isinstance(formatted, Mapping) and isinstance(formatted.get("action"), str) and formatted["action"].strip():
            return dict(formatted), None
        extra = reply.extra_info if isinstance(reply.extra_info, Mapping) else {}
        return None, extra.get("parse_error") or 'the reply has no "action".'

    def _reply(self, answer: str, steps: list[dict[str, Any]], stopped: bool = False) -> AgentMessage:
        extra: dict[str, Any] = {"intermediate_steps": steps}
        if stopped:
            extra["stopped"] = self.early_stopping_method
        return AgentMessage(sender=self.name, content=answer, extra_info=extra)


def _is_final(parsed: Mapping[str, Any]) -> bool:
    return str(parsed.get("action", "")).strip().lower() == FINAL_ANSWER.lower()


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


class AsyncConversationalAgent(ConversationalAgent, AsyncAgent):
    """Async twin of `ConversationalAgent`."""

    _executor_cls = "AsyncActionExecutor"
