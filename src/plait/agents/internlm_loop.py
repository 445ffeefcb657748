"""The InternLM tool agents' run on the common tool loop: `InternLMProtocol` and the reply helpers.

`AgentForInternLM` (in `plait.agents.stream`) keeps an inner agent whose replies a
`MixedToolParser` parses into ``formatted``; this module says what a reply leads to — the
end of the run, a tool call for the executor of its ``tool_type``, or a hint the model can
act on — and announces each tool phase to streaming callers. `steps_of` turns the inner
trajectory into Lagent's step dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from ..effects import AgentCall, ToolCall
from ..prompts.parsers.tool_parser import ToolStatusCode
from ..schema import ActionReturn, ActionStatusCode, ActionValidCode, AgentMessage, AgentStatusCode
from .agent import AgentCore, parse_error
from .aggregator.default_aggregator import content_to_text
from .run_state import PlannedCall, RunState
from .tool_loop import Act, Ask, Decision, Done, LoopAgent, LoopProtocol

__all__ = ["InternLMAgent", "InternLMProtocol", "no_tool_call", "observe", "steps_of"]

_OBSERVER = "ActionExecutor"


class InternLMAgent(LoopAgent, Protocol):
    """What the loop needs of an InternLM agent (`plait.agents.stream.InternLMAgent`)."""

    agent: AgentCore
    """The inner agent: it makes each model turn and keeps the trajectory."""
    finish_condition: Callable[[AgentMessage], bool]

    def executor_for(self, tool_type: Any) -> Any:
        """The executor that runs calls of `tool_type` (None when there is none)."""
        ...

    def tool_call(self, executor: Any, reply: AgentMessage, session_id: Hashable) -> ToolCall:
        """The effect of running the call in `reply`."""
        ...


def _formatted(message: AgentMessage) -> Mapping[str, object]:
    return message.formatted if isinstance(message.formatted, Mapping) else {}


def no_tool_call(message: AgentMessage) -> bool:
    """The default finish condition: the reply parsed and calls no tool."""
    if isinstance(message.formatted, Mapping):
        return message.formatted.get("status") == ToolStatusCode.NO_TOOL
    return parse_error(message) is None


def _tool_states(message: AgentMessage) -> tuple[AgentStatusCode, AgentStatusCode]:
    if _formatted(message).get("tool_type") == "interpreter":
        return AgentStatusCode.CODE_END, AgentStatusCode.CODE_RETURN
    return AgentStatusCode.PLUGIN_END, AgentStatusCode.PLUGIN_RETURN


def _chunk(message: AgentMessage, state: AgentStatusCode) -> AgentMessage:
    """`message` as a chunk of tool phase `state` for streaming callers."""
    return message.model_copy(update={"stream_state": state})


def _notice(tool_type: Any, text: str, state: ActionStatusCode) -> AgentMessage:
    result = ActionReturn(type=tool_type, errmsg=text, state=state, valid=ActionValidCode.INVALID)
    return AgentMessage(sender=_OBSERVER, content=result)


def steps_of(messages: Iterable[AgentMessage], name: str, thought_role: str = "thought") -> list[dict[str, object]]:
    """A trajectory as role dicts: ``thought`` (or `thought_role`), ``tool`` and ``environment``.

    Messages from `name` give a thought and, when they call a tool, a ``tool`` step named
    after the tool type; messages from anyone but the user are ``environment`` steps named
    after the last tool type. User messages are skipped.
    """
    steps: list[dict[str, object]] = []
    tool_type: str | None = None
    for message in messages:
        if message.sender == name:
            formatted = _formatted(message)
            if not formatted:
                steps.append({"role": thought_role, "content": content_to_text(message.content)})
                continue
            steps.append({"role": thought_role, "content": formatted.get("thought") or ""})
            if formatted.get("tool_type") and formatted.get("status") != ToolStatusCode.NO_TOOL:
                tool_type = str(formatted["tool_type"])
                steps.append({"role": "tool", "content": formatted.get("action"), "name": tool_type})
        elif message.sender != "user":
            step: dict[str, object] = {"role": "environment", "content": content_to_text(message.content)}
            if tool_type:
                step["name"] = tool_type
            steps.append(step)
    return steps


def observe(reply: AgentMessage, agent: InternLMAgent) -> AgentMessage | PlannedCall:
    """What a reply that did not finish leads to: a tool call to run, or a hint for the model."""
    formatted = _formatted(reply)
    tool_type = formatted.get("tool_type")
    if formatted.get("status") == ToolStatusCode.PARSING_ERROR:
        reason = formatted.get("error") or "it does not follow the format"
        text = f"The {tool_type} call could not be parsed: {reason}. Write the call again in the required format."
        return _notice(tool_type, text, ActionStatusCode.ARGS_ERROR)
    error = parse_error(reply)
    if not formatted and error is not None:
        return _notice(None, f"Your reply could not be parsed: {error}", ActionStatusCode.ARGS_ERROR)
    if not tool_type or formatted.get("status") == ToolStatusCode.NO_TOOL:
        text = "Your reply calls no tool and does not finish the task. Call a tool, or give your final answer."
        return _notice(None, text, ActionStatusCode.API_ERROR)
    if agent.executor_for(tool_type) is None:
        available = [kind for kind in ("plugin", "interpreter") if agent.executor_for(kind) is not None]
        offer = f"Available: {', '.join(available)}." if available else "No tools are available; answer directly."
        text = f"The {tool_type} tool is not available here. {offer}"
        return _notice(tool_type, text, ActionStatusCode.API_ERROR)
    action = formatted.get("action")
    name = action.get("name") if isinstance(action, Mapping) else None
    arguments = action.get("parameters") if isinstance(action, Mapping) else action
    return PlannedCall(name=str(name or tool_type), arguments=arguments, kind=str(tool_type))


class InternLMProtocol(LoopProtocol[InternLMAgent]):
    """InternLM's tool tokens on the tool loop: the inner agent makes each turn, tools answer by type.

    The next input of the inner agent (the user's message, then each observation) and the
    last reply are kept in the run state; each tool phase is announced to streaming callers
    (``PLUGIN_END`` / ``CODE_END`` with the call, ``PLUGIN_RETURN`` / ``CODE_RETURN`` with the
    result). When the budget is spent the last reply is returned as it is (policy ``'last'``),
    flagged ``max_turn_reached``, its tool result kept in the trajectory.
    """

    name = "internlm"
    out_of_budget = "last"

    def __init__(self, agent: InternLMAgent, inputs: Sequence[AgentMessage]) -> None:
        super().__init__(agent)
        self.inputs = list(inputs)

    def begin(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> None:
        """The caller's messages are the first input."""
        state.messages["inputs"] = self.inputs

    def ask(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> Ask:
        """One turn of the inner agent with the pending input."""
        return Ask(AgentCall(self.agent.agent, tuple(state.messages["inputs"]), session_id, kwargs))

    def on_reply(self, state: RunState, reply: Any, session_id: Hashable) -> Decision:
        """A finished reply ends the run; otherwise its tool runs, or a hint becomes the next input."""
        state.messages["last"] = [reply]
        if self.agent.finish_condition(reply):
            return Done(reply)
        call_state, return_state = _tool_states(reply)
        self.emit(_chunk(reply, call_state))
        observed = observe(reply, self.agent)
        if isinstance(observed, AgentMessage):
            self.emit(_chunk(observed, return_state))
            state.messages["inputs"] = [observed]
            return None
        return Act([observed])

    def needs_approval(self, state: RunState, call: PlannedCall) -> bool:
        """Whether the call's tool, in the executor of its tool type, needs a person's approval."""
        check = getattr(self.agent.executor_for(call.get("kind")), "needs_approval", None)
        return bool(check(call["name"], call.get("arguments"))) if callable(check) else False

    def tool_effect(self, state: RunState, call: PlannedCall, session_id: Hashable) -> ToolCall:
        """The executor of the call's tool type, given the reply itself (its hooks make the call)."""
        executor = self.agent.executor_for(call.get("kind"))
        return self.agent.tool_call(executor, state.messages["last"][0], session_id)

    def on_results(
        self, state: RunState, calls: Sequence[PlannedCall], results: Sequence[Any], session_id: Hashable
    ) -> Decision:
        """The result is announced and becomes the next input."""
        (result,) = results
        observation = result if isinstance(result, AgentMessage) else AgentMessage(sender=_OBSERVER, content=result)
        self.emit(_chunk(observation, _tool_states(state.messages["last"][0])[1]))
        state.messages["inputs"] = [observation]
        return None

    def stop(self, state: RunState, session_id: Hashable) -> Done:
        """The last reply, flagged; the last tool result goes into the trajectory."""
        self.agent.agent.update_memory(list(state.messages["inputs"]), session_id)
        reply: AgentMessage = state.messages["last"][0]
        extra = reply.extra_info
        if extra is None or isinstance(extra, Mapping):
            reply = reply.model_copy(update={"extra_info": {**(extra or {}), "max_turn_reached": True}})
        return Done(reply)
