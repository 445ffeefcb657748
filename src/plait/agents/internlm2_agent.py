r"""`Internlm2Agent` and `Internlm2Protocol`: Lagent's pre-1.0 InternLM2 API on plait's agent loop.

The old API has no memory: the caller passes the conversation (a str, a message dict or a
list of them, including the ``language`` / ``tool`` / ``environment`` steps of earlier
answers) and gets an `AgentReturn` back; `stream_chat` yields one while the answer is
produced, its ``state`` moving through `AgentStatusCode`::

    STREAM_ING ... -> PLUGIN_START ... -> PLUGIN_END -> PLUGIN_RETURN -> STREAM_ING ... -> END
                      (CODING ...)        (CODE_END)    (CODE_RETURN)

`Internlm2Agent` is an `AgentForInternLM` whose prompt and parser come from the protocol,
so both APIs run the same loop; ``agent(message)`` (the new API, with memory) works too.

Example (seed 001's web demo):
    ```python
    agent = Internlm2Agent(
        llm=model,
        protocol=Internlm2Protocol(
            tool=dict(
                begin='{start_token}{name}\n',
                start_token='<|action_start|>',
                name_map=dict(plugin='<|plugin|>', interpreter='<|interpreter|>'),
                belong='assistant',
                end='<|action_end|>\n',
            ),
        ),
        max_turn=7,
    )
    agent.plugin_executor = ActionExecutor(actions=[ArxivSearch()])
    for ret in agent.stream_chat('Find papers on LLM agents'):
        print(ret.state, ret.response)
    ```
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..driver import run_stream, run_sync
from ..effects import Flow, ToolCall
from ..exceptions import UserError
from ..hooks.action_preprocessor import InternLMActionProcessor
from ..memory import Memory
from ..prompts.parsers.tool_parser import InterpreterParser, MixedToolParser, PluginParser, ToolStatusCode
from ..schema import ActionReturn, AgentMessage, AgentStatusCode
from .aggregator.default_aggregator import content_to_text
from .aggregator.tool_aggregator import InternLMToolAggregator
from .stream import API_PREFIX, INTERPRETER_EN, META_EN, PLUGIN_EN, AgentForInternLM, get_plugin_prompt, steps_of

__all__ = ["AgentReturn", "Internlm2Agent", "Internlm2Protocol"]

_TOOL: Mapping[str, object] = MappingProxyType(
    {
        "begin": "{start_token}{name}\n",
        "start_token": "<|action_start|>",
        "name_map": {"plugin": "<|plugin|>", "interpreter": "<|interpreter|>"},
        "belong": "assistant",
        "end": "<|action_end|>\n",
    }
)
_LANGUAGE: Mapping[str, object] = MappingProxyType({"begin": "", "end": "", "belong": "assistant"})
_EXECUTE: Mapping[str, object] = MappingProxyType(
    {"role": "execute", "begin": "", "end": "", "fallback_role": "environment"}
)
_CALL_STATES = {AgentStatusCode.PLUGIN_END, AgentStatusCode.CODE_END}
_RETURN_STATES = {AgentStatusCode.PLUGIN_RETURN, AgentStatusCode.CODE_RETURN}


@dataclass
class AgentReturn:
    """One answer of the old API (or a snapshot of it while streaming).

    Attributes:
        type: A free-form kind label.
        content: Free-form content.
        state: Where the answer stands (`AgentStatusCode`).
        actions: The tool calls made so far, as `ActionReturn` objects.
        response: The answer text; while a call is written, the call (text, then the parsed action).
        inner_steps: This answer's steps (``language`` / ``tool`` / ``environment`` dicts), to
            append to the history of the next call.
        errmsg: What went wrong (a model error, or running out of turns).
    """

    type: str | None = None
    content: Any = None
    state: AgentStatusCode = AgentStatusCode.END
    actions: list[ActionReturn] = field(default_factory=list)
    response: Any = ""
    inner_steps: list[dict[str, object]] = field(default_factory=list)
    errmsg: str | None = None


class Internlm2Protocol:
    """The InternLM2 prompt and call format: system prompts, special tokens, tool-result role.

    Args:
        meta_prompt: The first system message.
        interpreter_prompt: The interpreter instruction (shown when there is an interpreter);
            may use ``{begin}`` / ``{end}``.
        plugin_prompt: The plugin instruction (shown when there are plugins); ``{prompt}``
            receives the tool list, ``{begin}`` / ``{end}`` the call markers.
        few_shot: Example dialogues placed before the conversation (see `InternLMToolAggregator`).
        language: ``dict(begin, end, belong)`` of the model's plain text; only empty
            markers and ``belong='assistant'`` are supported.
        tool: ``dict(begin, start_token, name_map, belong, end)``: a call opens with
            ``begin.format(start_token=..., name=name_map[tool_type])`` and closes with `end`.
            Keys not given keep their defaults.
        execute: ``dict(role, begin, end, fallback_role)`` of tool results: they are sent
            with `fallback_role` when given (InternLM2's templates know ``environment``),
            else with `role`, wrapped in begin/end.
        api_desc_template: How plugin descriptions are written (`get_plugin_prompt`).
    """

    def __init__(
        self,
        meta_prompt: str = META_EN,
        interpreter_prompt: str = INTERPRETER_EN,
        plugin_prompt: str = PLUGIN_EN,
        few_shot: Sequence[Sequence[dict[str, object]]] | None = None,
        language: Mapping[str, object] | None = None,
        tool: Mapping[str, object] | None = None,
        execute: Mapping[str, object] | None = None,
        api_desc_template: str = API_PREFIX,
    ) -> None:
        self.meta_prompt = meta_prompt
        self.interpreter_prompt = interpreter_prompt
        self.plugin_prompt = plugin_prompt
        self.few_shot = [list(dialogue) for dialogue in few_shot or []]
        self.language = {**_LANGUAGE, **(language or {})}
        self.tool = {**_TOOL, **(tool or {})}
        self.execute = {**_EXECUTE, **(execute or {})}
        self.api_desc_template = api_desc_template
        if self.language["begin"] or self.language["end"] or self.language["belong"] != "assistant":
            raise UserError("Internlm2Protocol: language must have empty begin/end and belong='assistant'")
        if self.tool["belong"] != "assistant":
            raise UserError(f"Internlm2Protocol: tool calls belong to the assistant, not {self.tool['belong']!r}")
        missing = {"plugin", "interpreter"} - set(self._name_map())
        if missing:
            raise UserError(f"Internlm2Protocol: tool['name_map'] needs entries for {sorted(missing)}")
        for kind in ("plugin", "interpreter"):
            self.tool_begin(kind)  # fail now, not at the first call

    def _name_map(self) -> Mapping[str, object]:
        name_map = self.tool["name_map"]
        if not isinstance(name_map, Mapping):
            raise UserError(f"Internlm2Protocol: tool['name_map'] must map tool types to tokens, not {name_map!r}")
        return name_map

    def tool_begin(self, tool_type: str) -> str:
        """The marker that opens a call of `tool_type`: the start token, the tool's name token, a newline."""
        try:
            return str(self.tool["begin"]).format(
                start_token=self.tool["start_token"], name=self._name_map()[tool_type]
            )
        except (KeyError, IndexError, ValueError) as exc:
            raise UserError(
                f"Internlm2Protocol: tool['begin'] may use only {{start_token}} and {{name}}: {exc!r}"
            ) from None

    def output_format(self, plugin_executor: Any = None, interpreter_executor: Any = None) -> MixedToolParser:
        """The reply parser, with instructions for the tools that are available."""
        end = str(self.tool["end"])
        plugin_fields: dict[str, str] = {}
        if plugin_executor is not None and len(plugin_executor) and self.plugin_prompt:
            prompt = get_plugin_prompt(plugin_executor, self.api_desc_template)
            plugin_fields = {"template": self.plugin_prompt, "prompt": prompt}
        interpreter = self.interpreter_prompt if interpreter_executor is not None else ""
        parsers = [
            PluginParser(begin=self.tool_begin("plugin"), end=end, **plugin_fields),
            InterpreterParser(begin=self.tool_begin("interpreter"), end=end, template=interpreter),
        ]
        return MixedToolParser(parsers=parsers)

    def aggregator(self) -> InternLMToolAggregator:
        """Turns the conversation into the model's messages."""
        role = self.execute.get("fallback_role") or self.execute["role"]
        return InternLMToolAggregator(
            environment_role=str(role),
            environment_begin=str(self.execute["begin"]),
            environment_end=str(self.execute["end"]),
            few_shot=self.few_shot,
        )

    def template(self, extra_system: Sequence[Mapping[str, object]] = ()) -> list[dict[str, object]]:
        """The system instruction: the meta prompt, then the history's own system messages."""
        messages: list[dict[str, object]] = (
            [{"role": "system", "content": self.meta_prompt}] if self.meta_prompt else []
        )
        return messages + [dict(m) for m in extra_system]

    def format(
        self, inner_step: Any, plugin_executor: Any = None, interpreter_executor: Any = None
    ) -> list[dict[str, object]]:
        """The model's messages for a conversation (str, message dict or list of them)."""
        parser = self.output_format(plugin_executor, interpreter_executor)
        system, messages = history_to_messages(inner_step, "assistant", parser)
        memory = Memory()
        memory.add(messages)
        return self.aggregator().aggregate(memory, "assistant", parser, self.template(system))

    def parse(self, message: str, plugin_executor: Any = None, interpreter_executor: Any = None) -> dict[str, object]:
        """Parse a reply: ``{'tool_type', 'thought', 'action', 'status'}`` (see `MixedToolParser`)."""
        parsed: dict[str, object] = self.output_format(plugin_executor, interpreter_executor).parse_response(message)
        return parsed


def _history(message: Any) -> list[Mapping[str, object]]:
    if isinstance(message, str):
        return [{"role": "user", "content": message}]
    if isinstance(message, Mapping):
        return [message]
    if isinstance(message, Sequence) and all(isinstance(m, Mapping) for m in message):
        return list(message)
    raise UserError(f"chat() takes a str, a message dict or a list of them, not {type(message).__name__}")


def history_to_messages(
    message: Any, name: str, parser: Any, code_parameter: str = "command"
) -> tuple[list[dict[str, object]], list[AgentMessage]]:
    """Split an old-API conversation into system messages and agent memory.

    Roles: ``system``, ``user``, ``assistant``, ``language`` / ``thought`` (the text of a
    reply, joined with a following ``tool`` step), ``tool`` (content: the plugin call dict,
    or the code / ``{'parameters': {code_parameter: code}}`` for the interpreter; ``name``:
    the tool type) and ``environment`` / ``execute`` (tool results).

    Raises:
        UserError: An unknown role.
    """
    system: list[dict[str, object]] = []
    messages: list[AgentMessage] = []
    pending: str | None = None

    def own(text: str) -> AgentMessage:
        formatted = {"tool_type": None, "thought": text, "action": None, "status": ToolStatusCode.NO_TOOL}
        return AgentMessage(sender=name, content=text, formatted=formatted)

    for item in _history(message):
        role, content = item.get("role"), item.get("content")
        if role == "tool":
            tool_type = item.get("name")
            action = content
            if tool_type == "interpreter" and isinstance(content, Mapping):
                action = (content.get("parameters") or {}).get(code_parameter, content)
            formatted = {
                "tool_type": tool_type,
                "thought": pending or "",
                "action": action,
                "status": ToolStatusCode.VALID_TOOL,
            }
            messages.append(AgentMessage(sender=name, content=parser.format_response(formatted), formatted=formatted))
            pending = None
            continue
        if pending is not None:
            messages.append(own(pending))
            pending = None
        if role in ("language", "thought"):
            pending = content_to_text(content)
        elif role == "system":
            system.append({"role": "system", "content": content_to_text(content)})
        elif role == "assistant":
            messages.append(own(content_to_text(content)))
        elif role == "user":
            messages.append(AgentMessage(sender="user", content=content))
        elif role in ("environment", "execute"):
            messages.append(AgentMessage(sender="ActionExecutor", content=content))
        else:
            raise UserError(
                f"unknown role {role!r} in the history; use system, user, assistant, language, tool or environment"
            )
    if pending is not None:
        messages.append(own(pending))
    return system, messages


def _action_return(message: AgentMessage, thought: str | None) -> ActionReturn:
    content = message.content
    if isinstance(content, ActionReturn):
        result = copy.copy(content)
    else:
        result = ActionReturn(result=[{"type": "text", "content": content_to_text(content)}])
    if result.thought is None:
        result.thought = thought
    return result


def _alias(target: str) -> property:
    """A property that reads and writes the attribute called `target`."""
    return property(lambda self: getattr(self, target), lambda self, value: setattr(self, target, value))


class Internlm2Agent(AgentForInternLM):
    r"""The InternLM2 chat agent of Lagent's old API (``chat`` / ``stream_chat`` -> `AgentReturn`).

    Args:
        llm: The model. `stream_chat` uses its ``stream_chat``.
        plugin_executor: An `ActionExecutor` of plugins (or tools to build one from).
        interpreter_executor: An `ActionExecutor` holding the code interpreter.
        protocol: The prompt and call format (`Internlm2Protocol` or a config dict).
        max_turn: The most model replies per answer.
        **kwargs: `Agent` arguments of the wrapper (``name``, ``hooks``).

    The executors and the protocol's prompts may be changed between calls (seed 001's web
    demo does); each call reads them afresh. ``_action_executor``, ``_interpreter_executor`` and
    ``_protocol`` are aliases of `plugin_executor`, `interpreter_executor` and `protocol`,
    the names the demo assigns.
    """

    def __init__(
        self,
        llm: object = None,
        plugin_executor: object = None,
        interpreter_executor: object = None,
        protocol: object = None,
        max_turn: int = 3,
        **kwargs: Any,
    ) -> None:
        from ..utils.config import create_object

        protocol = create_object(protocol) if protocol is not None else Internlm2Protocol()
        if not isinstance(protocol, Internlm2Protocol):
            raise UserError(f"protocol must be an Internlm2Protocol, not {type(protocol).__name__}")
        super().__init__(
            llm,
            plugins=plugin_executor,
            interpreter=interpreter_executor,
            output_format=protocol.output_format(),
            aggregator=protocol.aggregator(),
            action_hooks=(),
            max_turn=max_turn,
            **kwargs,
        )
        self.protocol = protocol
        self._processor = InternLMActionProcessor()
        self._apply_protocol()

    # -- Lagent's attribute names (the web demo assigns them) --
    _action_executor = _alias("plugin_executor")
    _interpreter_executor = _alias("interpreter_executor")
    _protocol = _alias("protocol")

    def _apply_protocol(self, extra_system: Sequence[Mapping[str, object]] = ()) -> None:
        agent = self.agent
        agent.output_format = self.protocol.output_format(self.plugin_executor, self.interpreter_executor)
        agent.aggregator = self.protocol.aggregator()
        agent.template = self.protocol.template(extra_system)

    def tool_call(self, executor: Any, reply: AgentMessage, session_id: Hashable) -> ToolCall:
        """Turn interpreter code into a tool call (as `InternLMActionProcessor` does), then run it."""
        request = self._processor.before_action(executor, reply, session_id) or reply
        return super().tool_call(executor, request, session_id)

    def forward_flow(
        self, inputs: Sequence[AgentMessage], session_id: Hashable, kwargs: Mapping[str, object]
    ) -> Flow[AgentMessage]:
        """The new API (``agent(message)``, with memory), using the current protocol and executors."""
        self._apply_protocol()
        return (yield from super().forward_flow(inputs, session_id, kwargs))

    # -- the old API --

    def chat(self, message: Any, session_id: Hashable = 0, **kwargs: object) -> AgentReturn:
        """Answer a conversation; keyword arguments reach the model (e.g. ``stop_words=``)."""
        inputs, offset = self._start(message, session_id)
        reply = run_sync(self._flow(inputs, session_id, kwargs), self.interceptors())
        return self._finish(AgentReturn(), reply, session_id, offset)

    def stream_chat(self, message: Any, session_id: Hashable = 0, **kwargs: object) -> Iterator[AgentReturn]:
        """Answer a conversation, yielding a snapshot at every model chunk and tool phase; END comes last."""
        inputs, offset = self._start(message, session_id)
        current = AgentReturn(state=AgentStatusCode.STREAM_ING)
        thought: str | None = None
        items = run_stream(self._flow(inputs, session_id, kwargs), self.interceptors())
        try:
            for item in items:
                state = item.stream_state
                if state == AgentStatusCode.END:
                    yield self._finish(current, item, session_id, offset)
                    return
                if state < 0:
                    current.state, current.errmsg = state, content_to_text(item.content) or state.name
                    yield copy.deepcopy(current)
                    return
                formatted = item.formatted if isinstance(item.formatted, Mapping) else {}
                if state in _RETURN_STATES:
                    current.actions.append(_action_return(item, thought))
                    current.state = state
                elif state in _CALL_STATES:
                    thought = formatted.get("thought")
                    current.state, current.response = state, formatted.get("action")
                elif formatted.get("tool_type") and formatted.get("status") != ToolStatusCode.NO_TOOL:
                    interpreter = formatted["tool_type"] == "interpreter"
                    current.state = AgentStatusCode.CODING if interpreter else AgentStatusCode.PLUGIN_START
                    current.response = formatted.get("action")
                else:
                    current.state = AgentStatusCode.STREAM_ING
                    current.response = formatted.get("thought", content_to_text(item.content))
                yield copy.deepcopy(current)
        finally:
            items.close()

    def _start(self, message: Any, session_id: Hashable) -> tuple[list[AgentMessage], int]:
        """Load the conversation into the session's trajectory; return the new input and where steps begin."""
        parser = self.protocol.output_format(self.plugin_executor, self.interpreter_executor)
        system, messages = history_to_messages(message, self.agent.name, parser)
        if not messages:
            raise UserError("chat() needs at least one user message")
        self._apply_protocol(system)
        memory = self.agent._memory
        if memory is None:
            raise UserError("Internlm2Agent needs a memory for its trajectory")
        memory.reset(session_id)
        memory.add(messages[:-1], session_id)
        return messages[-1:], len(messages)

    def _finish(self, current: AgentReturn, reply: AgentMessage, session_id: Hashable, offset: int) -> AgentReturn:
        memory = self.agent._memory
        trajectory = memory.get_memory(session_id)[offset:] if memory is not None else []
        result = copy.deepcopy(current)
        result.state = AgentStatusCode.END
        result.inner_steps = steps_of(trajectory, self.agent.name, thought_role="language")
        result.actions, thought = [], None
        for message in trajectory:
            if message.sender == self.agent.name and isinstance(message.formatted, Mapping):
                thought = message.formatted.get("thought")
            elif message.sender != "user":
                result.actions.append(_action_return(message, thought))
        formatted = reply.formatted if isinstance(reply.formatted, Mapping) else {}
        result.response = formatted.get("thought", content_to_text(reply.content))
        if isinstance(reply.extra_info, Mapping) and reply.extra_info.get("max_turn_reached"):
            result.errmsg = f"stopped after {self.max_turn} model replies without a final answer"
        return result
