"""`ReAct` / `AsyncReAct`: reason, act, observe, repeat, in a text protocol.

Each turn the model sees the tools (descriptions and names from the executor) and the
trajectory so far, and replies with either a tool call or a final answer. Two protocols:

* **text** (default): ``Thought: ... / Action: <tool> / Action Input: <args>`` or
  ``Thought: ... / Final Answer: ...`` (`ReActTextParser`);
* **JSON** (``output_format='json'`` or any `JSONParser`, like Lagent's ReAct):
  ``{"thought_process": ..., "action": {"name": ..., "parameters": {...}}}`` or
  ``{"thought_process": ..., "conclusion": ...}`` (`ActionFormat` / `FinishFormat`).

Tool results come back as ``Observation: ...``. Model mistakes are observations too: an
unparseable reply gets a format correction, an unknown tool an error naming the valid
ones, bad arguments the tool's own message. When no final answer came before it, the last call
of the budget asks the model explicitly for one (``max_turn`` counts model calls, that one
included: `plait.agents.tool_loop`).

The trajectory (model turns, observations) is kept in the session's memory, so it is
part of `state_dict` and of the next call's context; the reply's content is the final
answer, its ``extra_info['intermediate_steps']`` the steps of this call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from ..exceptions import UserError
from ..prompts import react_prompts as prompts
from ..prompts.parsers.json_parser import JSONParser
from ..schema import ActionReturn, AgentMessage
from ._react_base import ProtocolAggregator, TextToolProtocol, ToolProtocolAgent, merge_stop_words
from ._react_text import ReActTextParser
from .agent import Agent, AsyncAgent, parse_error
from .run_state import PlannedCall, RunState
from .tool_loop import Act, Ask, Decision, Done

__all__ = [
    "ActionCall",
    "ActionFormat",
    "AsyncReAct",
    "FinishFormat",
    "ReAct",
    "ReActProtocol",
    "ReActTextParser",
    "json_format",
]

_LANGUAGES = ("en", "cn")


class ActionCall(BaseModel):
    """A tool call in the JSON protocol."""

    name: str = Field(description="the name of the tool to call")
    parameters: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments")


class ActionFormat(BaseModel):
    """A JSON reply that calls a tool."""

    thought_process: str = Field(default="", description="your reasoning: what you know and why you call this tool")
    action: ActionCall = Field(description="the tool call")


class FinishFormat(BaseModel):
    """A JSON reply that gives the final answer."""

    thought_process: str = Field(default="", description="your reasoning: why you can answer now")
    conclusion: str = Field(description="the final answer for the user")


def json_format(language: str = "en") -> JSONParser:
    """The JSON protocol's output format (`ActionFormat` or `FinishFormat`)."""
    template = prompts.REACT_JSON_FORMAT_CN if language == "cn" else prompts.REACT_JSON_FORMAT_EN
    return JSONParser(template, action=ActionFormat, finish=FinishFormat)


def default_finish_condition(message: AgentMessage) -> bool:
    """A reply finishes the task when its parsed form holds a ``conclusion``."""
    return isinstance(message.formatted, Mapping) and "conclusion" in message.formatted


def _action_of(formatted: Any) -> tuple[str, Any] | None:
    """``(name, parameters)`` of a parsed reply: ``{'action': {'name', 'parameters'}}`` or the call itself."""
    if not isinstance(formatted, Mapping):
        return None
    action = formatted.get("action", formatted)
    if isinstance(action, Mapping) and isinstance(action.get("name"), str):
        parameters = action["parameters"] if "parameters" in action else action.get("arguments", {})
        return action["name"], parameters
    return None


def _thought(formatted: Any) -> str:
    return str(formatted.get("thought_process") or "") if isinstance(formatted, Mapping) else ""


class ReActCore(ToolProtocolAgent):
    """A ReAct agent: Thought / Action / Observation until a Final Answer (`ReAct`, `AsyncReAct`).

    Args:
        llm: The model (instance or config dict); its `chat` is used.
        actions: Tools (instances, classes, config dicts or functions) or an `ActionExecutor`.
        template: The system prompt. Placeholders ``{action_info}``, ``{tool_names}`` and
            ``{output_format}`` are filled on every call. Defaults to the prompt of the
            chosen protocol and language (`plait.prompts.react_prompts`).
        memory: Config of the per-session memory.
        output_format: ``None``/``'text'`` for the text protocol, ``'json'`` for the JSON
            one, or a parser (instance or config dict) whose `parse_response` returns
            ``{'action': {'name', 'parameters'}}`` or ``{'conclusion'}`` dicts.
        aggregator: Turns memory into messages (default: a `ProtocolAggregator`).
        hooks: Agent hooks (``before_agent``/``after_agent``).
        finish_condition: ``fn(message) -> bool`` deciding whether a parsed reply is the
            final answer; default: its ``formatted`` holds ``conclusion``.
        max_turn: Model calls per run; the last one asks for the final answer explicitly
            (`force_prompt`) when none came before.
        language: ``'en'`` or ``'cn'``: which default prompts to use.
        action_hooks: Hooks for the executor (``before_action``/``after_action``).
        force_prompt: The message that asks for the final answer after `max_turn`.
        **kwargs: Other `Agent` arguments (``name``, ``description``).

    Example:
        ```python
        agent = ReAct(GPTAPI('qwen2.5', api_base='http://127.0.0.1:8000/v1'), [Calculator()])
        agent('What is 37 * 91?').content  # '3367'
        ```
    """

    default_observation = prompts.REACT_OBSERVATION

    template_fields = ("action_info", "tool_names", "output_format")

    def __init__(
        self,
        llm: object = None,
        actions: object = None,
        template: object = None,
        memory: Any = None,
        output_format: object = None,
        aggregator: Any = None,
        hooks: list[Any] | None = None,
        finish_condition: Callable[[AgentMessage], bool] | None = None,
        max_turn: int = 5,
        *,
        language: str = "en",
        action_hooks: list[Any] | None = None,
        force_prompt: str | None = None,
        **kwargs: Any,
    ) -> None:
        if language not in _LANGUAGES:
            raise UserError(f"language must be one of {_LANGUAGES}, got {language!r}")
        if output_format is None or output_format == "text":
            output_format = ReActTextParser()
        elif output_format == "json":
            output_format = json_format(language)
        if memory is not None:
            kwargs["memory"] = memory
        super().__init__(
            llm=llm,
            actions=actions,
            template=template,
            max_turn=max_turn,
            action_hooks=action_hooks,
            output_format=output_format,
            aggregator=aggregator,
            hooks=hooks,
            **kwargs,
        )
        if isinstance(self.aggregator, ProtocolAggregator) and self.aggregator.replay is None:
            self.aggregator.replay = self.output_format
        text = isinstance(self.output_format, ReActTextParser)
        cn = language == "cn"
        if template is None:
            if text:
                self.template = prompts.REACT_TEXT_PROMPT_CN if cn else prompts.REACT_TEXT_PROMPT_EN
            else:
                self.template = prompts.REACT_JSON_PROMPT_CN if cn else prompts.REACT_JSON_PROMPT_EN
        if force_prompt is None:
            if text:
                force_prompt = prompts.REACT_FORCE_TEXT_CN if cn else prompts.REACT_FORCE_TEXT_EN
            else:
                force_prompt = prompts.REACT_FORCE_JSON_CN if cn else prompts.REACT_FORCE_JSON_EN
        self.force_prompt = force_prompt
        self.format_error = prompts.REACT_FORMAT_ERROR_CN if cn else prompts.REACT_FORMAT_ERROR_EN
        self.finish_condition = finish_condition or default_finish_condition
        self._stop_words = ["Observation:"] if text else []

    # -- the loop --

    def loop_protocol(self, inputs: Sequence[AgentMessage] = ()) -> ReActProtocol:
        """This agent's paradigm on the tool loop (for a new run, or a paused one to resume)."""
        return ReActProtocol(self)

    def _answer(self, reply: AgentMessage, steps: list[dict[str, object]], forced: bool) -> AgentMessage:
        finished = self.finish_condition(reply)
        extra: dict[str, object] = {"intermediate_steps": steps}
        if forced:
            extra["forced_final_answer"] = True
        if not finished:
            return AgentMessage(sender=self.name, content=str(reply.content).strip(), extra_info=extra)
        formatted = reply.formatted
        conclusion = formatted.get("conclusion") if isinstance(formatted, Mapping) else None
        if conclusion is None:
            answer = str(reply.content)
        elif isinstance(conclusion, str):
            answer = conclusion
        else:
            answer = json.dumps(conclusion, ensure_ascii=False, default=str)
        return AgentMessage(sender=self.name, content=answer, formatted=formatted, extra_info=extra)


class ReActProtocol(TextToolProtocol[ReActCore]):
    """ReAct on the tool loop: one tool call per reply; the last call of the budget asks for the answer.

    The reply, its tool result and any format correction go into the agent's memory; the
    thought of a reply waits in the run state (``scratch['thought']``) for its result.
    """

    name = "react"

    def ask(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> Ask:
        """The trajectory so far, with the protocol's stop words."""
        agent = self.agent
        params = merge_stop_words(agent.llm, kwargs, agent._stop_words)
        return Ask(agent.model_call("chat", agent.get_prompt(session_id), session_id, params))

    def final(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> Ask:
        """`force_prompt` (as a system message in memory), then one more call."""
        self.agent.update_memory(AgentMessage(sender="system", content=self.agent.force_prompt), session_id)
        return self.ask(state, session_id, kwargs)

    def on_reply(self, state: RunState, reply: Any, session_id: Hashable) -> Decision:
        """A final answer ends the run; a tool call runs; anything else gets a format correction."""
        agent = self.agent
        message = agent.make_response(reply)
        if state.forced or agent.finish_condition(message):
            return Done(agent._answer(message, state.steps, forced=state.forced))
        agent.update_memory(message, session_id)
        thought = _thought(message.formatted)
        call = _action_of(message.formatted)
        if call is None:
            error = parse_error(message) or "the reply holds neither a tool call nor a final answer."
            correction = agent.format_error.format(error=error)
            self.reject(state, session_id, correction, error, thought=thought, action=None, action_input=None)
            return None
        state.scratch["thought"] = thought
        return Act([PlannedCall(name=call[0], arguments=call[1])])

    def on_results(
        self, state: RunState, calls: Sequence[PlannedCall], results: Sequence[Any], session_id: Hashable
    ) -> Decision:
        """The observation goes into memory and the step records."""
        (call,), (result,) = calls, results
        thought = str(state.scratch.pop("thought", ""))
        if isinstance(result, AgentMessage) and isinstance(result.content, ActionReturn):
            result.content.thought = thought or None
        fields = {"thought": thought, "action": call["name"], "action_input": call["arguments"]}
        self.observe(state, call, result, session_id, **fields)
        return None


class ReAct(ReActCore, Agent):
    """The ReAct agent, called synchronously (arguments: `ReActCore`)."""


class AsyncReAct(ReActCore, AsyncAgent):
    """Async twin of `ReAct`: ``await agent(...)``; async tools are awaited, sync ones run in threads."""

    _executor_cls = "AsyncActionExecutor"


ReAct.register(AsyncReAct)
