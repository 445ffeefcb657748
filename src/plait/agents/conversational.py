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
too, the error is recorded as a ``_Exception`` step and the loop goes on. `max_iterations`
counts steps as LangChain's AgentExecutor does: each model call that does not answer (a tool
step, a fix-up retry) is one. When they are spent, ``early_stopping_method='force'`` returns
a fixed stop message; ``'generate'`` makes one more call that asks the model for a final answer.

The reply's ``extra_info['intermediate_steps']`` lists the steps as
``{'tool', 'tool_input', 'log', 'observation'}`` dicts (``log`` is the raw model reply).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from ..exceptions import UserError
from ..prompts import conversational_prompts as prompts
from ..prompts.parsers.json_parser import JSONParser
from ..prompts.prompt_template import format_placeholders
from ..schema import AgentMessage
from ._react_base import TextToolProtocol, ToolProtocolAgent
from .agent import Agent, AsyncAgent, parse_error
from .aggregator.default_aggregator import content_to_text
from .run_state import PlannedCall, RunState
from .tool_loop import Act, Ask, Decision, Done, OutOfBudget, check_budget

__all__ = ["AsyncConversationalAgent", "ConversationalAction", "ConversationalAgent", "ConversationalProtocol"]

FINAL_ANSWER = "Final Answer"
PARSE_ERROR_TOOL = "_Exception"
_EARLY_STOPPING = ("force", "generate")
_HUMAN_FIELDS = ("tools", "tool_names", "action_info", "input")


class ConversationalAction(BaseModel):
    """The JSON blob of one step."""

    action: str = Field(description="a tool name, or Final Answer")
    action_input: Any = Field(default="", description="the tool's input, or the reply to the user")


class ConversationalCore(ToolProtocolAgent):
    """A conversational agent that uses tools through JSON blobs and remembers the chat.

    `ConversationalAgent` and `AsyncConversationalAgent` call it in their mode.

    Args:
        llm: The model (instance or config dict); its `chat` is used.
        actions: Tools (instances, classes, config dicts or functions) or an `ActionExecutor`.
        template: The system prompt (may use ``{tools}``, ``{tool_names}``, ``{action_info}``).
        human_template: The human message (``{tools}``, ``{tool_names}``, ``{input}``).
        tool_response_template: How a tool's result is shown (``{observation}``).
        max_iterations: Steps per run, counted as LangChain's AgentExecutor counts them: each
            model call that does not answer (a tool step, a fix-up retry) is one. When they
            are spent, ``'force'`` stops; ``'generate'`` makes one more call for the answer.
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
    default_template = prompts.CONVERSATIONAL_SYSTEM
    default_observation = "{observation}"

    def default_output_format(self) -> JSONParser:
        """The JSON blob of seed 004's format (an action and its input)."""
        return JSONParser("", action=ConversationalAction)

    def __init__(
        self,
        llm: object = None,
        actions: object = None,
        template: object = None,
        human_template: str = prompts.CONVERSATIONAL_HUMAN,
        tool_response_template: str = prompts.CONVERSATIONAL_TOOL_RESPONSE,
        max_iterations: int = 15,
        early_stopping_method: str = "force",
        output_format: object = None,
        action_hooks: list[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if early_stopping_method not in _EARLY_STOPPING:
            raise UserError(f"early_stopping_method must be one of {_EARLY_STOPPING}, got {early_stopping_method!r}")
        unknown = [f for f in format_placeholders(human_template) if f not in _HUMAN_FIELDS]
        if unknown:
            raise UserError(f"human_template uses unknown placeholder(s) {unknown}; available: {list(_HUMAN_FIELDS)}")
        check_budget(max_iterations, "max_iterations")
        super().__init__(llm, actions, template, max_iterations, action_hooks, output_format=output_format, **kwargs)
        self.human_template = human_template
        self.tool_response_template = tool_response_template
        self.early_stopping_method = early_stopping_method

    @property
    def max_iterations(self) -> int:
        """Steps per run (the same as `max_turn`)."""
        return self.max_turn

    @max_iterations.setter
    def max_iterations(self, value: int) -> None:
        self.max_turn = check_budget(value, "max_iterations")

    def loop_budget(self) -> int:
        """`max_iterations` steps, and with ``'generate'`` the call that asks for the final answer."""
        return self.max_turn + (1 if self.early_stopping_method == "generate" else 0)

    def template_values(self) -> dict[str, Any]:
        """Adds ``{tools}``: one ``> name: description (arguments)`` line per tool."""
        values = super().template_values()
        lines = self.tool_lines("> {name}: {description} Arguments: {arguments}.")
        values["tools"] = "\n".join(lines) or "(no tools)"
        return values

    def get_prompt(self, session_id: Hashable = 0) -> list[dict[str, Any]]:
        """System prompt, chat history, and the human message for the pending input (no scratchpad)."""
        history, pending = self.split_memory(session_id)
        user_input = "\n".join(content_to_text(m.content) for m in pending)
        values = {**self.template_values(), "input": user_input}
        human = self.human_template.format(**{k: values[k] for k in format_placeholders(self.human_template)})
        return [*self.render(history, self.system_prompt()), {"role": "user", "content": human}]

    def loop_protocol(self, inputs: Sequence[AgentMessage] = ()) -> ConversationalProtocol:
        """This agent's paradigm on the tool loop (for a new run, or a paused one to resume)."""
        return ConversationalProtocol(self)

    def _parse(self, raw: Any) -> tuple[dict[str, Any] | None, str | None]:
        reply = self.make_response(raw)
        formatted = reply.formatted
        if isinstance(formatted, Mapping) and isinstance(formatted.get("action"), str) and formatted["action"].strip():
            return dict(formatted), None
        return None, parse_error(reply) or 'the reply has no "action".'

    def _reply(self, answer: str, steps: list[dict[str, Any]], stopped: bool = False) -> AgentMessage:
        extra: dict[str, Any] = {"intermediate_steps": steps}
        if stopped:
            extra["stopped"] = self.early_stopping_method
        return AgentMessage(sender=self.name, content=answer, extra_info=extra)


class ConversationalProtocol(TextToolProtocol[ConversationalCore]):
    """LangChain's conversational loop on the tool loop.

    The scratchpad of the run (model replies and tool responses) lives in the run state,
    not in memory: only the question and the final answer are kept in the conversation.
    A reply that does not parse is sent back once with the error (``scratch['fix']``);
    when the budget is spent, ``early_stopping_method='force'`` answers with a fixed
    message (policy ``'stop'``) and ``'generate'`` keeps the last call for a final answer.
    """

    name = "conversational"

    def __init__(self, agent: ConversationalCore) -> None:
        super().__init__(agent)
        self.out_of_budget: OutOfBudget = "force" if agent.early_stopping_method == "generate" else "stop"
        self._base: list[dict[str, Any]] | None = None

    def begin(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> None:
        """An empty scratchpad and no pending fix-up."""
        state.scratch.update(scratchpad=[], fix=None)

    def _prompt(self, state: RunState, session_id: Hashable) -> list[dict[str, Any]]:
        if self._base is None:  # memory does not change during a run: render the history once
            self._base = self.agent.get_prompt(session_id)
        return [*self._base, *state.scratch["scratchpad"]]

    def ask(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> Ask:
        """System, history, the human message, the scratchpad; and the fix-up request when one is due."""
        prompt = self._prompt(state, session_id)
        fix = state.scratch.get("fix")
        if fix is not None:
            prompt += [
                {"role": "assistant", "content": fix["log"]},
                {"role": "user", "content": prompts.CONVERSATIONAL_FIX.format(error=fix["error"])},
            ]
        return Ask(self.agent.model_call("chat", prompt, session_id, kwargs))

    def final(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> Ask:
        """``early_stopping_method='generate'``: the scratchpad, then a request for the final answer."""
        prompt = [*self._prompt(state, session_id), {"role": "user", "content": prompts.CONVERSATIONAL_GENERATE}]
        return Ask(self.agent.model_call("chat", prompt, session_id, kwargs))

    def stop(self, state: RunState, session_id: Hashable) -> Done:
        """``early_stopping_method='force'``: the fixed stop message."""
        stopped = prompts.CONVERSATIONAL_STOPPED.format(max_iterations=self.agent.max_turn)
        return Done(self.agent._reply(stopped, state.steps, stopped=True))

    def on_reply(self, state: RunState, reply: Any, session_id: Hashable) -> Decision:
        """A final answer ends the run; an action runs; a bad reply is sent back once, then recorded."""
        agent = self.agent
        log = str(reply)
        if state.forced:
            message = agent.make_response(reply)
            final = (
                message.formatted if isinstance(message.formatted, Mapping) and _is_final(message.formatted) else None
            )
            answer = _text(final.get("action_input")) if final is not None else log.strip()
            return Done(agent._reply(answer, state.steps, stopped=True))
        parsed, error = agent._parse(reply)
        retried, state.scratch["fix"] = state.scratch.get("fix") is not None, None
        if parsed is None and not retried:
            state.scratch["fix"] = {"log": log, "error": error}
            return None
        if parsed is None:
            observation = f"Invalid or incomplete reply: {error}"
            state.steps.append({"tool": PARSE_ERROR_TOOL, "tool_input": log, "log": log, "observation": observation})
            self._note(state, log, observation)
            return None
        if _is_final(parsed):
            return Done(agent._reply(_text(parsed.get("action_input")), state.steps))
        state.scratch["log"] = log
        return Act([PlannedCall(name=str(parsed["action"]).strip(), arguments=parsed.get("action_input"))])

    def on_results(
        self, state: RunState, calls: Sequence[PlannedCall], results: Sequence[Any], session_id: Hashable
    ) -> Decision:
        """The tool's response goes into the scratchpad and the step records."""
        (call,), (result,) = calls, results
        log = str(state.scratch.pop("log", ""))
        observation = self.agent.result_text(result)
        state.steps.append(
            {"tool": call["name"], "tool_input": call["arguments"], "log": log, "observation": observation}
        )
        self._note(state, log, observation)
        return None

    def _note(self, state: RunState, log: str, observation: str) -> None:
        response = self.agent.tool_response_template.format(observation=observation)
        state.scratch["scratchpad"] += [{"role": "assistant", "content": log}, {"role": "user", "content": response}]


def _is_final(parsed: Mapping[str, Any]) -> bool:
    return str(parsed.get("action", "")).strip().lower() == FINAL_ANSWER.lower()


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


class ConversationalAgent(ConversationalCore, Agent):
    """The conversational agent, called synchronously (arguments: `ConversationalCore`)."""


class AsyncConversationalAgent(ConversationalCore, AsyncAgent):
    """Async twin of `ConversationalAgent`."""

    _executor_cls = "AsyncActionExecutor"


ConversationalAgent.register(AsyncConversationalAgent)
