"""`AutoGPT` / `AsyncAutoGPT`: one JSON command per reply, checked against a schema.

Every reply must be a JSON object matching `AutoGPTResponse` (its JSON Schema is
``AutoGPTResponse.model_json_schema()``)::

    {"thoughts": {"text": ..., "reasoning": ..., "plan": ..., "criticism": ..., "speak": ...},
     "command": {"name": "<tool or finish>", "args": {...}}}

A reply that is not JSON or does not validate is answered with a corrective message that
quotes the validation errors; a valid command runs through the executor and its result
comes back as ``Command <name> returned: ...`` (unknown commands get the list of valid
ones). The ``finish`` command ends the task: its ``response`` argument is the answer.
The last of the `max_turn` model calls tells the model to finish (`plait.agents.tool_loop`).

The trajectory is kept in the session's memory; the reply's content is the final answer
and ``extra_info['intermediate_steps']`` the steps of this call.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from ..prompts import autogpt_prompts as prompts
from ..prompts.parsers.json_parser import JSONParser
from ..schema import AgentMessage
from ._react_base import ProtocolAggregator, TextToolProtocol, ToolProtocolAgent
from .agent import Agent, AsyncAgent, parse_error
from .run_state import PlannedCall, RunState
from .tool_loop import Act, Ask, Decision, Done

__all__ = ["AsyncAutoGPT", "AutoGPT", "AutoGPTCommand", "AutoGPTProtocol", "AutoGPTResponse", "AutoGPTThoughts"]

FINISH = "finish"


class AutoGPTThoughts(BaseModel):
    """The model's reasoning before a command."""

    text: str = Field(description="your thought")
    reasoning: str = Field(default="", description="why this is the right next step")
    plan: str | list[str] = Field(default="", description="a short list of the next steps")
    criticism: str = Field(default="", description="constructive self-criticism")
    speak: str = Field(default="", description="a one-sentence summary for the user")


class AutoGPTCommand(BaseModel):
    """The command to run."""

    name: str = Field(description="one of the listed commands, or finish")
    args: dict[str, Any] = Field(default_factory=dict, description="the command's arguments by name")


class AutoGPTResponse(BaseModel):
    """One AutoGPT reply: thoughts, then exactly one command."""

    thoughts: AutoGPTThoughts
    command: AutoGPTCommand


def _command(formatted: Any) -> tuple[str, dict[str, object]] | None:
    if not isinstance(formatted, Mapping) or not isinstance(formatted.get("command"), Mapping):
        return None
    command = formatted["command"]
    name = command.get("name")
    args = command.get("args")
    return (name, dict(args) if isinstance(args, Mapping) else {}) if isinstance(name, str) else None


def _finish_answer(args: Mapping[str, object], formatted: Any) -> str:
    value: Any = args.get("response")
    if value is None and len(args) == 1:
        value = next(iter(args.values()))
    if value is None:
        value = (formatted.get("thoughts") or {}).get("speak") if isinstance(formatted, Mapping) else None
    if value is None:
        return json.dumps(dict(args), ensure_ascii=False, default=str) if args else ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


class AutoGPTCore(ToolProtocolAgent):
    """An autonomous agent that runs one schema-checked JSON command per turn (`AutoGPT`, `AsyncAutoGPT`).

    Args:
        llm: The model (instance or config dict); its `chat` is used.
        actions: Tools (instances, classes, config dicts or functions) or an `ActionExecutor`.
        ai_name: The name the model is given.
        role_description: What the agent is for (completes "You are {ai_name}, ...").
        template: The system prompt (placeholders ``{ai_name}``, ``{role_description}``,
            ``{commands}``, ``{tool_names}``, ``{action_info}``, ``{output_format}``).
        output_format: The response format; default a `JSONParser` for `AutoGPTResponse`.
            A custom one must parse to ``{'command': {'name', 'args'}}`` dicts.
        max_turn: Model calls per run; the last one tells the model to finish.
        trigger: Sent after the history on every turn, asking for the next command.
        action_hooks: Hooks for the executor.
        **kwargs: Other `Agent` arguments (``memory``, ``name``, ``hooks``...).

    Example:
        ```python
        agent = AutoGPT(llm, [search], ai_name='Researcher', role_description='an assistant that finds facts.')
        agent('Find the population of Lyon.').content
        ```
    """

    template_fields = ("ai_name", "role_description", "commands", "tool_names", "action_info", "output_format")
    default_template = prompts.AUTOGPT_SYSTEM_PROMPT
    default_observation = prompts.AUTOGPT_OBSERVATION

    def default_output_format(self) -> JSONParser:
        """The JSON reply of AutoGPT's format (thoughts and a command)."""
        return JSONParser(prompts.AUTOGPT_FORMAT, response=AutoGPTResponse)

    def __init__(
        self,
        llm: object = None,
        actions: object = None,
        ai_name: str = "AutoGPT",
        role_description: str = "an AI assistant that reaches its goals by running commands.",
        template: object = None,
        output_format: object = None,
        max_turn: int = 5,
        trigger: str = prompts.AUTOGPT_TRIGGER,
        action_hooks: list[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, actions, template, max_turn, action_hooks, output_format=output_format, **kwargs)
        if isinstance(self.aggregator, ProtocolAggregator) and self.aggregator.replay is None:
            self.aggregator.replay = self.output_format
        self.ai_name = ai_name
        self.role_description = role_description
        self.trigger = trigger

    def template_values(self) -> dict[str, object]:
        """Adds ``{ai_name}``, ``{role_description}`` and ``{commands}`` (numbered, ``finish`` last)."""
        values = super().template_values()
        commands = self.tool_lines("{index}. {name}: {description} Arguments: {arguments}.")
        commands.append(f"{len(commands) + 1}. {prompts.AUTOGPT_FINISH_DESCRIPTION}")
        values.update(ai_name=self.ai_name, role_description=self.role_description, commands="\n".join(commands))
        return values

    def loop_protocol(self, inputs: Sequence[AgentMessage] = ()) -> AutoGPTProtocol:
        """This agent's paradigm on the tool loop (for a new run, or a paused one to resume)."""
        return AutoGPTProtocol(self)

    def _prompt(self, session_id: Hashable, last: str) -> list[dict[str, object]]:
        prompt = self.get_prompt(session_id)
        if prompt and prompt[-1]["role"] == "user":
            return [*prompt[:-1], {"role": "user", "content": f"{prompt[-1]['content']}\n{last}"}]
        return [*prompt, {"role": "user", "content": last}]

    def _answer(
        self, reply: AgentMessage, args: Mapping[str, object], steps: list[dict[str, object]], forced: bool
    ) -> AgentMessage:
        extra: dict[str, object] = {"intermediate_steps": steps}
        if forced:
            extra["forced_final_answer"] = True
        answer = _finish_answer(args, reply.formatted)
        return AgentMessage(sender=self.name, content=answer, formatted=reply.formatted, extra_info=extra)


class AutoGPTProtocol(TextToolProtocol[AutoGPTCore]):
    """AutoGPT on the tool loop: one command per reply; the last call of the budget says to finish."""

    name = "autogpt"

    def ask(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> Ask:
        """The history, then the `trigger` asking for the next command."""
        agent = self.agent
        return Ask(agent.model_call("chat", agent._prompt(session_id, agent.trigger), session_id, kwargs))

    def final(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> Ask:
        """The history, then the order to finish now."""
        agent = self.agent
        return Ask(agent.model_call("chat", agent._prompt(session_id, prompts.AUTOGPT_FORCE), session_id, kwargs))

    def on_reply(self, state: RunState, reply: Any, session_id: Hashable) -> Decision:
        """``finish`` ends the run; another command runs; an invalid reply is answered with its errors."""
        agent = self.agent
        message = agent.make_response(reply)
        command = _command(message.formatted)
        if command is not None and command[0].strip().lower() == FINISH:
            return Done(agent._answer(message, command[1], state.steps, forced=state.forced))
        if state.forced:
            extra = {"intermediate_steps": state.steps, "forced_final_answer": True}
            return Done(AgentMessage(sender=agent.name, content=str(reply).strip(), extra_info=extra))
        agent.update_memory(message, session_id)
        thoughts = message.formatted.get("thoughts") if isinstance(message.formatted, Mapping) else None
        if command is None:
            error = parse_error(message) or "the reply has no command with a name."
            names = ", ".join(agent.tool_names()) or "(no tools)"
            text = prompts.AUTOGPT_INVALID.format(error=error, tool_names=names)
            self.reject(state, session_id, text, error, thoughts=thoughts, command=None, args=None)
            return None
        state.scratch["thoughts"] = thoughts
        return Act([PlannedCall(name=command[0], arguments=command[1])])

    def on_results(
        self, state: RunState, calls: Sequence[PlannedCall], results: Sequence[Any], session_id: Hashable
    ) -> Decision:
        """The command's result goes into memory and the step records."""
        (call,), (result,) = calls, results
        thoughts = state.scratch.pop("thoughts", None)
        self.observe(state, call, result, session_id, thoughts=thoughts, command=call["name"], args=call["arguments"])
        return None


class AutoGPT(AutoGPTCore, Agent):
    """The AutoGPT agent, called synchronously (arguments: `AutoGPTCore`)."""


class AsyncAutoGPT(AutoGPTCore, AsyncAgent):
    """Async twin of `AutoGPT`."""

    _executor_cls = "AsyncActionExecutor"


AutoGPT.register(AsyncAutoGPT)
