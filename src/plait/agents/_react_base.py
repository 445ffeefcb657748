"""Shared parts of the text-protocol agents (`ReAct`, `ReWOO`, `AutoGPT`, `ConversationalAgent`).

These agents tell the model about their tools in the prompt and read tool calls out of
the model's text. What they share lives here:

* `ToolProtocolAgent`: builds the executor from ``actions`` (the async subclasses get an
  `AsyncActionExecutor`), renders ``template`` placeholders (tool descriptions, tool
  names...), and turns a tool name plus whatever input the model wrote into the executor
  call effect (see `plait.effects`);
* `ProtocolAggregator`: memory -> chat messages, with tool results rendered through an
  observation template and the agent's own parsed replies written back in the protocol
  (``output_format.format_response``);
* `tool_parameters`: the model's tool input (a JSON object, or plain text for a
  one-parameter tool) -> the executor's parameters.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..effects import ToolCall
from ..exceptions import ParseError, UserError
from ..memory import Memory
from ..prompts.prompt_template import format_placeholders
from ..schema import ActionReturn, AgentMessage, FunctionCall
from ..untrusted import decode_arguments, loads
from .aggregator.default_aggregator import DefaultAggregator, content_to_text
from .run_state import PlannedCall, RunState
from .tool_agent import ToolLoopCore
from .tool_loop import LoopProtocol, build_executor, check_budget

if TYPE_CHECKING:
    from ..actions.action_executor import ActionExecutorCore

__all__ = [
    "EXECUTOR_SENDER",
    "ProtocolAggregator",
    "TextToolProtocol",
    "ToolProtocolAgent",
    "describe_parameters",
    "merge_stop_words",
    "tool_parameters",
]

EXECUTOR_SENDER = "ActionExecutor"
_DESCRIPTION_KEYS = ("name", "description", "parameters", "required")


class ProtocolAggregator(DefaultAggregator):
    """`DefaultAggregator` for text protocols.

    Args:
        observation: How a tool result reaches the model: a template with
            ``{observation}`` (the result text) and optionally ``{name}`` (the tool).
        replay: The agent's output format; its own replies that were parsed are written
            back with ``replay.format_response(formatted)`` so the history shows the
            protocol, even when the reply's content is only the final answer.

    Example:
        ```python
        ProtocolAggregator('Observation: {observation}')
        ```
    """

    def __init__(self, observation: str = "{observation}", replay: Any = None) -> None:
        self.observation = observation
        self.replay = replay

    def aggregate(
        self, messages: Memory, name: str, parser: Any = None, system_instruction: Any = None
    ) -> list[dict[str, object]]:
        """System messages, then the session: own turns as assistant, tool results as observations."""
        result = self.preamble(parser, system_instruction)
        for message in messages.get_memory():
            if message.sender == name:
                result.append({"role": "assistant", "content": self._own_text(message)})
                continue
            text = content_to_text(_revive(message.content) if message.sender == EXECUTOR_SENDER else message.content)
            if message.sender == EXECUTOR_SENDER:
                tool = (message.extra_info or {}).get("name", "") if isinstance(message.extra_info, dict) else ""
                text = self.observation.format(observation=text, name=tool)
            if result and result[-1]["role"] == "user":
                result[-1] = {"role": "user", "content": f"{result[-1]['content']}\n{text}"}
            else:
                result.append({"role": "user", "content": text})
        return result

    def _own_text(self, message: AgentMessage) -> str:
        if self.replay is not None and message.formatted is not None:
            try:
                return str(self.replay.format_response(message.formatted))
            except UserError:
                pass  # the parser cannot write this value back: the stored text is the next best thing
        return content_to_text(message.content)


_RETURN_FIELDS = frozenset(f.name for f in dataclasses.fields(ActionReturn))


def _revive(content: Any) -> Any:
    """A tool result loaded from a saved state (a plain dict) back as an `ActionReturn`."""
    if isinstance(content, Mapping) and {"state", "result", "errmsg"} <= content.keys() <= _RETURN_FIELDS:
        return ActionReturn(**content)
    return content


def _records(value: object) -> list[Mapping[str, object]]:
    """The mappings in a list (a schema's ``parameters``); anything else is no records."""
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, (list, tuple)) else []


def _names(value: object) -> list[object]:
    return list(value) if isinstance(value, (list, tuple)) else []


def describe_parameters(api: Mapping[str, object]) -> str:
    """One line per tool API: ``city (STRING, required): the city; days (NUMBER, optional)``."""
    required = _names(api.get("required"))
    parts = []
    for param in _records(api.get("parameters")):
        need = "required" if param.get("name") in required else "optional"
        text = f"{param.get('name')} ({param.get('type', 'STRING')}, {need})"
        if param.get("description"):
            text += f": {param['description']}"
        parts.append(text)
    return "; ".join(parts) if parts else "no arguments"


def _find_api(executor: ActionExecutorCore, name: str) -> Mapping[str, object] | None:
    for api in executor.description():
        if api["name"] == name:
            return api
    resolved = executor.resolve_name(name)
    if resolved != name:
        return _find_api(executor, resolved)
    return None


def tool_parameters(executor: ActionExecutorCore, name: str, raw: object) -> dict[str, object] | str:
    """The parameters to send for tool `name`, from what the model wrote.

    * a mapping is used as is; None or blank text means no arguments;
    * text holding a JSON object is decoded;
    * other text goes to the tool's single parameter (a JSON scalar is decoded unless
      the parameter is a string), so ``Action Input: Paris`` works for ``weather(city)``;
    * anything else is passed on as text, and the tool's argument parser reports
      what it expected.
    """
    arguments = decode_arguments(raw.strip() if isinstance(raw, str) else raw)
    if isinstance(arguments, dict):
        return arguments
    text = arguments
    try:
        decoded: object = loads(text)
    except ParseError:
        decoded = None
    api = _find_api(executor, name)
    params = _records((api or {}).get("parameters"))
    required = _names((api or {}).get("required"))
    if len(params) == 1 or len(required) == 1:
        param = params[0] if len(params) == 1 else next(p for p in params if p.get("name") == required[0])
        key = str(param.get("name"))
        if isinstance(decoded, str):
            return {key: decoded}
        if decoded is not None and param.get("type") != "STRING":
            return {key: decoded}
        return {key: _unquote(text)}
    return text


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"`":
        return text[1:-1]
    return text


def _words(value: object) -> list[object]:
    if not value:
        return []
    return [value] if isinstance(value, str) or not isinstance(value, Iterable) else list(value)


def merge_stop_words(llm: object, kwargs: Mapping[str, object], extra: Sequence[str]) -> dict[str, object]:
    """`kwargs` with `extra` stop words added to the model's and the caller's own."""
    if not extra:
        return dict(kwargs)
    gen_params = getattr(llm, "gen_params", None)
    own = _words(gen_params.get("stop_words")) if isinstance(gen_params, Mapping) else []
    given = _words(kwargs.get("stop_words"))
    merged: list[object] = []
    for word in [*own, *given, *extra]:
        if word not in merged:
            merged.append(word)
    return {**kwargs, "stop_words": merged}


class ToolProtocolAgent(ToolLoopCore):
    """Base of the agents that describe tools in the prompt and parse calls from text.

    Args:
        llm: The model (instance or config dict).
        actions: Tools (instances, classes, config dicts or functions) or a ready
            `ActionExecutor`.
        template: The system prompt; a str whose placeholders (among
            `template_fields`) are filled on every call, or any other system
            instruction the aggregator accepts, used as is.
        max_turn: Model calls per run (`plait.agents.tool_loop`).
        action_hooks: Hooks given to the executor (``before_action``/``after_action``).
        **kwargs: Other `Agent` arguments (``memory``, ``output_format``, ``name``, ``hooks``...).

    A paradigm states its defaults once, as class attributes: `default_template` (the system
    prompt when none is given), `default_observation` (how its `ProtocolAggregator` shows a
    tool result, when no aggregator is given) and `default_output_format` (its reply parser).

    Raises:
        UserError: `template` uses a placeholder the agent cannot fill, or `max_turn` < 1.
    """

    _executor_cls: ClassVar[str] = "ActionExecutor"
    template_fields: ClassVar[tuple[str, ...]] = ("action_info", "tool_names")
    default_template: ClassVar[object] = None
    """The system prompt of an agent built without ``template``."""
    default_observation: ClassVar[str | None] = None
    """How tool results are shown: set, the default aggregator is ``ProtocolAggregator(default_observation)``."""

    def default_output_format(self) -> object:
        """The reply parser of an agent built without ``output_format`` (None: the `Agent` default)."""
        return None

    def __init__(
        self,
        llm: object = None,
        actions: object = None,
        template: object = None,
        max_turn: int = 5,
        action_hooks: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if self.default_observation is not None and kwargs.get("aggregator") is None:
            kwargs["aggregator"] = ProtocolAggregator(self.default_observation)
        if kwargs.get("output_format") is None:
            kwargs["output_format"] = self.default_output_format()
        template = self.default_template if template is None else template
        super().__init__(llm=llm, template=template, **kwargs)
        self.executor = build_executor(actions, self._executor_cls, action_hooks)
        self.max_turn = check_budget(max_turn)
        if isinstance(template, str):
            unknown = [f for f in format_placeholders(template) if f not in self.template_fields]
            if unknown:
                raise UserError(
                    f"{type(self).__name__} template uses unknown placeholder(s) {unknown}; "
                    f"available: {list(self.template_fields)} (write literal braces as '{{{{' and '}}}}')"
                )

    # -- prompt pieces --

    def tool_names(self) -> list[str]:
        """The names models may call (``Toolkit.api`` for toolkit APIs)."""
        return [api["name"] for api in self.executor.description()]

    def tool_descriptions(self) -> list[dict[str, object]]:
        """The tools' descriptions (name, description, parameters, required)."""
        return [{k: api[k] for k in _DESCRIPTION_KEYS if k in api} for api in self.executor.description()]

    def template_values(self) -> dict[str, object]:
        """Values for the template's placeholders; subclasses add their own."""
        infos = self.tool_descriptions()
        action_info = "\n".join(json.dumps(info, ensure_ascii=False) for info in infos)
        instruction = getattr(self.output_format, "format_instruction", None)
        return {
            "action_info": action_info or "(no tools)",
            "tool_names": ", ".join(self.tool_names()),
            "output_format": instruction() if instruction is not None else "",
        }

    def system_prompt(self) -> Any:
        """The system instruction for this call: `template` with its placeholders filled."""
        template = self.template
        if not isinstance(template, str):
            return template
        fields = format_placeholders(template)
        if not fields:
            return template
        values = self.template_values()
        return template.format(**{name: values[name] for name in fields})

    def get_prompt(self, session_id: Hashable = 0) -> list[dict[str, object]]:
        """The messages the model would receive for this session now (template filled in).

        The output format's instruction goes where the template has ``{output_format}``,
        or else into a system message of its own.
        """
        memory = (self._memory.get(session_id) if self._memory is not None else None) or Memory()
        embedded = isinstance(self.template, str) and "output_format" in format_placeholders(self.template)
        parser = None if embedded else self.output_format
        return self.aggregator.aggregate(memory, self.name, parser, self.system_prompt())

    def split_memory(self, session_id: Hashable) -> tuple[list[AgentMessage], list[AgentMessage]]:
        """``(history, pending)``: pending = the messages after this agent's last reply (the new input)."""
        messages = self._memory.get_memory(session_id) if self._memory is not None else []
        last_own = max((i for i, m in enumerate(messages) if m.sender == self.name), default=-1)
        return messages[: last_own + 1], messages[last_own + 1 :]

    def render(self, messages: Sequence[AgentMessage], system: Any = None) -> list[dict[str, object]]:
        """Chat messages for `messages` (a slice of memory) behind a system instruction."""
        memory = Memory()
        memory.add(list(messages))
        return self.aggregator.aggregate(memory, self.name, None, system)

    # -- tool calls --

    def tool_call(self, name: str, raw_input: Any, session_id: Hashable) -> ToolCall:
        """The effect of calling tool `name` with the model's input, through the executor."""
        parameters = tool_parameters(self.executor, name, raw_input)
        request = AgentMessage(sender=self.name, content=FunctionCall(name, parameters))
        return ToolCall(self.executor, request, session_id)

    @staticmethod
    def observation_message(result: Any, name: str) -> AgentMessage:
        """The executor's reply as a memory message tagged with the tool name."""
        content = result.content if isinstance(result, AgentMessage) else result
        return AgentMessage(sender=EXECUTOR_SENDER, content=content, extra_info={"name": name})

    def tool_lines(self, line: str) -> list[str]:
        """One line per tool API: `line` with ``{index}`` (from 1), ``{name}``, ``{description}``, ``{arguments}``."""
        return [
            line.format(
                index=index,
                name=api["name"],
                description=api.get("description", ""),
                arguments=describe_parameters(api),
            )
            for index, api in enumerate(self.tool_descriptions(), 1)
        ]

    @classmethod
    def step_record(cls, result: object, **fields: object) -> dict[str, object]:
        """A step of ``intermediate_steps``: `fields` (the call, as the paradigm names it), then the result.

        The result adds its ``observation`` text and its ``state`` (an `ActionStatusCode` value or None).
        """
        return {**fields, "observation": cls.result_text(result), "state": cls.result_state(result)}

    @staticmethod
    def result_text(result: Any) -> str:
        """The text a tool result shows the model: the output, or the error message."""
        return content_to_text(result.content if isinstance(result, AgentMessage) else result)

    @staticmethod
    def result_state(result: Any) -> int | None:
        """The `ActionStatusCode` of a tool result, when it carries one."""
        content = result.content if isinstance(result, AgentMessage) else result
        state = getattr(content, "state", None)
        return int(state) if state is not None else None


T = TypeVar("T", bound=ToolProtocolAgent)


class TextToolProtocol(LoopProtocol[T]):
    """Base of the text protocols' loops: a planned call runs through `ToolProtocolAgent.tool_call`."""

    def reject(self, state: RunState, session_id: Hashable, correction: str, error: str, **fields: object) -> None:
        """A reply the loop cannot act on: `correction` goes to the model, a step with `error` to the records.

        `fields` name the step's call fields as the paradigm does (all None: there was no call).
        """
        self.agent.update_memory(AgentMessage(sender="system", content=correction), session_id)
        state.steps.append({**fields, "observation": error, "state": None})

    def observe(self, state: RunState, call: PlannedCall, result: Any, session_id: Hashable, **fields: object) -> None:
        """One call's result: into memory as an observation, and into the step records with `fields`."""
        agent = self.agent
        agent.update_memory(agent.observation_message(result, call["name"]), session_id)
        state.steps.append(agent.step_record(result, **fields))

    def tool_effect(self, state: RunState, call: PlannedCall, session_id: Hashable) -> ToolCall:
        """The call through the agent's executor, with the model's input turned into parameters."""
        return self.agent.tool_call(call["name"], call["arguments"], session_id)
