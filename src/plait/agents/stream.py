r"""InternLM-style tool agents: `AgentForInternLM`, `MathCoder` and their async twins.

The model calls tools by writing special tokens (InternLM2's plugin/interpreter protocol)::

    Let me look that up.<|action_start|><|plugin|>
    {"name": "ArxivSearch.get_arxiv_article_information", "parameters": {"query": "lagent"}}<|action_end|>

    Let me compute it.<|action_start|><|interpreter|>
    print(2 ** 10)<|action_end|>

An inner `Agent` (``self.agent``) keeps the trajectory: the model's replies (parsed by a
`MixedToolParser` into ``formatted``) and the tool results. Each turn the wrapper asks the
inner agent, stops when `finish_condition` holds (by default: no tool call), and otherwise
dispatches the call by its ``tool_type`` to `plugin_executor` or `interpreter_executor`.
The model's mistakes become observations it can act on: a call that does not parse comes
back with the parser's hint, a tool type with no executor says which tools exist.

The loop is the common tool loop (`plait.agents.tool_loop`) with `InternLMProtocol`
(`plait.agents.internlm_loop`);
`max_turn` counts model replies, and when it is spent the last reply is returned as it is.
The sync agents drive it synchronously, the async ones on the event loop. It announces each
tool phase as a message whose ``stream_state`` is ``PLUGIN_END`` / ``CODE_END`` (the call)
and ``PLUGIN_RETURN`` / ``CODE_RETURN`` (its result): streaming drivers pass these on
(`Internlm2Agent.stream_chat` uses them), the others ignore them.

Prompts come in English (``*_EN``) and Chinese (``*_CN``); ``{begin}`` / ``{end}`` in them
are the call markers and ``{prompt}`` (plugin prompts) the tool list of `get_plugin_prompt`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

from ..effects import Call, Flow, ToolCall
from ..exceptions import UserError
from ..hooks.action_preprocessor import InternLMActionProcessor
from ..memory import Memory
from ..prompts.parsers.tool_parser import InterpreterParser, MixedToolParser, PluginParser
from ..schema import AgentMessage
from ..utils.config import create_object
from .agent import Agent, AgentCore, AsyncAgent
from .aggregator.tool_aggregator import InternLMToolAggregator
from .internlm_loop import InternLMProtocol, no_tool_call, steps_of
from .tool_agent import ToolLoopCore
from .tool_loop import build_executor, check_budget, run_tool_loop

__all__ = [
    "API_PREFIX",
    "INTERPRETER_CN",
    "INTERPRETER_EN",
    "MATH_PROMPT",
    "META_CN",
    "META_EN",
    "PLUGIN_CN",
    "PLUGIN_EN",
    "AgentForInternLM",
    "AsyncAgentForInternLM",
    "AsyncMathCoder",
    "InternLMProtocol",
    "MathCoder",
    "get_plugin_prompt",
    "internlm_output_format",
    "no_tool_call",
    "steps_of",
]

API_PREFIX = "An API of the tool '{tool_name}'. What it does:\n{description}"

META_EN = (
    "When tools or code execution are available, judge from the user's question whether they are needed, "
    "and pick the one that fits the task best."
)
META_CN = "当你可以使用工具或运行代码时，请根据用户的问题判断是否需要借助它们，并挑选最合适的一个来完成任务。"

INTERPRETER_EN = (
    "You can run Python code in a stateful Jupyter environment: variables, imports and files persist "
    "between runs. To run code, write it in this format:\n{begin}<Python code>{end}"
    "Its output comes back to you in the next message. Use it for calculations, mathematics, data "
    "processing and analysis, plotting and file handling."
)
INTERPRETER_CN = (
    "你可以在一个有状态的 Jupyter 环境里运行 Python 代码，变量、导入的模块和生成的文件在多次运行之间都会保留。"
    "需要运行代码时，请按下面的格式输出：\n{begin}<Python 代码>{end}"
    "代码的输出会在下一条消息中返回给你。它适合数值计算、数学推导、数据处理与分析、画图以及读写文件等任务。"
)

PLUGIN_EN = (
    "You can call the following tools:\n{prompt}\n"
    'To call one, write the call in this format:\n{begin}{{"name": "<tool name>", "parameters": {{<arguments>}}}}{end}'
    "If you already have enough information, answer directly and avoid needless calls. Use only the tools "
    "listed above; never invent one."
)
PLUGIN_CN = (
    "你可以调用下列工具：\n{prompt}\n"
    '调用工具时，请按下面的格式输出：\n{begin}{{"name": "<工具名>", "parameters": {{<参数>}}}}{end}'
    "如果已经掌握足够的信息，请直接回答，不要进行不必要的调用；只能使用上面列出的工具，不要编造。"
)

MATH_PROMPT = (
    "Solve the math problem by combining step-by-step reasoning with Python code:\n"
    "- analyse the problem, then write code that works it out, running it as {begin}<code>{end}"
    "- give the final result in LaTeX inside \\boxed{{}}, without units.\n"
)

_PROMPTS = {
    "en": (META_EN, PLUGIN_EN, INTERPRETER_EN),
    "cn": (META_CN, PLUGIN_CN, INTERPRETER_CN),
}
_DEFAULT_MEMORY: Mapping[str, object] = MappingProxyType({"type": Memory})
_DEFAULT_AGGREGATOR: Mapping[str, object] = MappingProxyType({"type": InternLMToolAggregator})
_DEFAULT_HOOKS: tuple[Any, ...] = (MappingProxyType({"type": InternLMActionProcessor}),)
_OBSERVER = "ActionExecutor"


# -- tool descriptions ---------------------------------------------------------------------------


def _actions_of(actions: Any) -> list[Any]:
    from ..actions import ActionExecutor

    if isinstance(actions, ActionExecutor):
        return [action for action in actions.actions.values() if action.enable]
    return list(ActionExecutor(actions=actions).actions.values())


def _describe(template: str, tool_name: str, description: str, tool_description: str) -> str:
    try:
        return template.format(tool_name=tool_name, description=description, tool_description=tool_description)
    except (KeyError, IndexError, ValueError) as exc:
        raise UserError(
            f"api_desc_template {template!r} may use only {{tool_name}}, {{description}} and "
            f"{{tool_description}} (write other braces as {{{{ }}}}): {exc!r}"
        ) from None


def get_plugin_prompt(actions: Any, api_desc_template: str = "{description}") -> str:
    """The tool list of a plugin prompt: a pretty JSON array of API descriptions.

    Toolkit APIs are flattened to ``Toolkit.api`` entries (the name the model calls);
    every description is passed through `api_desc_template`, which may use
    ``{description}``, ``{tool_name}`` (the tool or toolkit name) and
    ``{tool_description}`` (the toolkit's own description).

    Args:
        actions: A tool (instance, class or config dict), a list of tools, or an
            `ActionExecutor` (its enabled tools).
        api_desc_template: How each description is written (e.g. `API_PREFIX`).

    Returns:
        ``json.dumps(descriptions, ensure_ascii=False, indent=4)``.

    Example:
        ```python
        PLUGIN_EN.format(prompt=get_plugin_prompt([ArxivSearch()]), begin='...', end='...')
        ```
    """
    descriptions: list[dict[str, object]] = []
    for action in _actions_of(actions):
        info = action.description
        tool_description = str(info.get("description", ""))
        if action.is_toolkit:
            for api in info["api_list"]:
                text = _describe(api_desc_template, action.name, str(api.get("description", "")), tool_description)
                descriptions.append({**api, "name": f"{action.name}.{api['name']}", "description": text})
        else:
            text = _describe(api_desc_template, action.name, tool_description, tool_description)
            descriptions.append({**info, "description": text})
    return json.dumps(descriptions, ensure_ascii=False, indent=4)


def internlm_output_format(
    plugin_executor: Any = None,
    interpreter_executor: Any = None,
    language: str = "en",
    api_desc_template: str = "{description}",
) -> MixedToolParser:
    """The default parser of `AgentForInternLM`: plugin and interpreter calls, instructions for the tools given.

    Args:
        plugin_executor: The plugins (an `ActionExecutor`); their list goes into the plugin
            prompt. Without plugins there is no plugin prompt.
        interpreter_executor: The interpreter; without one there is no interpreter prompt.
        language: ``'en'`` or ``'cn'`` prompts.
        api_desc_template: Passed to `get_plugin_prompt`.

    Raises:
        UserError: Unknown `language`.
    """
    if language not in _PROMPTS:
        raise UserError(f"language must be one of {sorted(_PROMPTS)}, not {language!r}")
    meta, plugin, interpreter = _PROMPTS[language]
    plugin_fields: dict[str, str] = {}
    if plugin_executor is not None and len(plugin_executor):
        plugin_fields = {"template": plugin, "prompt": get_plugin_prompt(plugin_executor, api_desc_template)}
    parsers = [PluginParser(**plugin_fields), InterpreterParser(template=interpreter if interpreter_executor else "")]
    return MixedToolParser(template=meta, parsers=parsers)


# -- the agents -----------------------------------------------------------------------------------


class InternLMAgentCore(ToolLoopCore):
    r"""An agent that calls plugins and a code interpreter through InternLM2's special tokens.

    `AgentForInternLM` and `AsyncAgentForInternLM` call it in their mode.

    Args:
        llm: The model (instance or config dict).
        plugins: Plugin tools (instances, classes, config dicts, a list of those) or a
            ready `ActionExecutor`.
        interpreter: The code interpreter tool(s), same forms.
        template: The system instruction of the inner agent.
        memory: Memory config of the inner agent (the trajectory).
        output_format: The reply parser; by default `internlm_output_format` for the given
            tools and `language`.
        aggregator: Turns the trajectory into the model's messages (`InternLMToolAggregator`).
        action_hooks: Hooks of the executors built here (`InternLMActionProcessor`).
        finish_condition: ``fn(reply) -> bool``; the default `no_tool_call` stops at a reply
            without a tool call.
        max_turn: The most model replies per call. When the last one still calls a tool, the
            tool runs (so the history stays whole) and that reply is returned with
            ``extra_info['max_turn_reached'] = True``.
        language: Prompt language of the default output format (``'en'`` or ``'cn'``).
        **kwargs: `Agent` arguments of the wrapper (``name``, ``hooks``, ``description``).

    Example:
        ```python
        agent = AgentForInternLM(llm, plugins=[ArxivSearch()], interpreter=IPythonInteractive())
        reply = agent('Find a recent paper on agents and count its authors.')
        agent.get_steps()  # [{'role': 'thought', ...}, {'role': 'tool', ..., 'name': 'plugin'}, ...]
        ```
    """

    _inner_cls: ClassVar[type[AgentCore]] = Agent
    _executor_cls: ClassVar[str] = "ActionExecutor"

    def __init__(
        self,
        llm: object = None,
        plugins: object = None,
        interpreter: object = None,
        template: object = None,
        memory: Mapping[str, object] | type[Memory] | None = _DEFAULT_MEMORY,
        output_format: object = None,
        aggregator: object = _DEFAULT_AGGREGATOR,
        action_hooks: Sequence[Any] | None = _DEFAULT_HOOKS,
        finish_condition: Callable[[AgentMessage], bool] = no_tool_call,
        max_turn: int = 4,
        language: str = "en",
        **kwargs: Any,
    ) -> None:
        check_budget(max_turn)
        super().__init__(**kwargs)
        self.plugin_executor = self._make_executor(plugins, action_hooks)
        self.interpreter_executor = self._make_executor(interpreter, action_hooks)
        if output_format is None:
            output_format = internlm_output_format(self.plugin_executor, self.interpreter_executor, language)
        self.agent = self._inner_cls(
            llm=llm,
            template=template,
            memory=memory,
            output_format=output_format,
            aggregator=aggregator,
            name=self.name,
        )
        self.finish_condition = finish_condition
        self.max_turn = max_turn

    def correction_flow(
        self, corrections: list[dict[str, object]], session_id: Hashable, params: Mapping[str, object]
    ) -> Flow[AgentMessage]:
        """Typed-answer corrections go to the inner agent, which holds the model and the trajectory."""
        inner = self.agent
        return (yield from inner._chat_flow(inner.get_prompt(session_id) + corrections, session_id, params))

    def answer_llm(self) -> Any:
        """The inner agent's model: it takes the corrections."""
        return self.agent.llm

    def _make_executor(self, actions: Any, hooks: Sequence[Any] | None) -> Any:
        from .. import actions as actions_module

        actions = create_object(actions)
        if actions is None or (isinstance(actions, (list, tuple)) and not actions):
            return None
        if isinstance(actions, actions_module.ActionExecutor):
            return actions  # a ready executor keeps its own hooks
        return build_executor(actions, self._executor_cls, hooks)

    def executor_for(self, tool_type: Any) -> Any:
        """The executor that runs calls of `tool_type` (None when there is none)."""
        return {"plugin": self.plugin_executor, "interpreter": self.interpreter_executor}.get(tool_type)

    # -- the loop --

    def loop_protocol(self, inputs: Sequence[AgentMessage] = ()) -> InternLMProtocol:
        """This agent's paradigm on the tool loop (for a new run, or a paused one to resume)."""
        return InternLMProtocol(self, inputs)

    def forward_flow(
        self, inputs: Sequence[AgentMessage], session_id: Hashable, kwargs: Mapping[str, object]
    ) -> Flow[AgentMessage]:
        """Run model turns and tool calls until the reply finishes or `max_turn` replies were made."""
        return (yield from self._flow(inputs, session_id, kwargs))

    def _flow(
        self, inputs: Sequence[AgentMessage], session_id: Hashable, kwargs: Mapping[str, object]
    ) -> Flow[AgentMessage]:
        memory = self.agent._memory
        mark = memory.length(session_id) if memory is not None else 0
        protocol = self.loop_protocol(inputs)
        try:
            return (yield from run_tool_loop(protocol, self.max_turn, session_id, kwargs))
        except BaseException:
            if memory is not None:  # a failed call leaves the trajectory as it was
                memory.truncate(session_id, mark)
            raise

    def tool_call(self, executor: Any, reply: AgentMessage, session_id: Hashable) -> ToolCall:
        """The effect of running the call in `reply` (the executor's hooks turn it into a tool call)."""
        return ToolCall(executor, reply, session_id)

    def get_steps(self, session_id: Hashable = 0) -> list[dict[str, object]]:
        """The session's trajectory as ``{'role': 'thought' | 'tool' | 'environment', 'content', 'name'?}`` dicts."""
        memory = self.agent._memory
        messages = memory.get_memory(session_id) if memory is not None else []
        return steps_of(messages, self.agent.name)


class AgentForInternLM(InternLMAgentCore, Agent):
    """The InternLM tool agent, called synchronously (arguments: `InternLMAgentCore`)."""


class AsyncAgentForInternLM(InternLMAgentCore, AsyncAgent):
    """Async twin of `AgentForInternLM`: ``await agent(...)``; async model and executors."""

    _inner_cls: ClassVar[type[AgentCore]] = AsyncAgent
    _executor_cls: ClassVar[str] = "AsyncActionExecutor"


class MathCoderCore(InternLMAgentCore):
    r"""An InternLM agent that solves math problems with a code interpreter only (`MathCoder`, `AsyncMathCoder`).

    Args:
        llm: The model.
        interpreter: The interpreter tool; by default ``IPythonInteractive(timeout=20,
            max_out_len=8192)`` (resolved when the agent is built).
        template: The system instruction of the inner agent.
        memory: Memory config of the inner agent.
        output_format: By default an `InterpreterParser` with `MATH_PROMPT`.
        aggregator: As for `AgentForInternLM`.
        action_hooks: As for `AgentForInternLM`.
        finish_condition: As for `AgentForInternLM`.
        max_turn: The most model replies per call.
        release_session: Call the interpreter's ``close_session(session_id)`` after every
            call, returning a per-session kernel to its pool (default: on for `AsyncMathCoder`).
        **kwargs: Other `AgentForInternLM` arguments; ``plugins`` is ignored.
    """

    _default_interpreter: ClassVar[Mapping[str, object]] = MappingProxyType(
        {"type": "plait.actions.IPythonInteractive", "timeout": 20, "max_out_len": 8192}
    )
    _release_by_default: ClassVar[bool] = False

    def __init__(
        self,
        llm: object = None,
        interpreter: object = None,
        template: object = None,
        memory: Mapping[str, object] | type[Memory] | None = _DEFAULT_MEMORY,
        output_format: object = None,
        aggregator: object = _DEFAULT_AGGREGATOR,
        action_hooks: Sequence[Any] | None = _DEFAULT_HOOKS,
        finish_condition: Callable[[AgentMessage], bool] = no_tool_call,
        max_turn: int = 6,
        release_session: bool | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("plugins", None)
        if interpreter is None:
            interpreter = dict(self._default_interpreter)
        if output_format is None:
            output_format = InterpreterParser(template=MATH_PROMPT)
        super().__init__(
            llm,
            None,
            interpreter,
            template,
            memory,
            output_format,
            aggregator,
            action_hooks,
            finish_condition,
            max_turn,
            **kwargs,
        )
        self.release_session = self._release_by_default if release_session is None else release_session

    def _flow(
        self, inputs: Sequence[AgentMessage], session_id: Hashable, kwargs: Mapping[str, object]
    ) -> Flow[AgentMessage]:
        if not self.release_session:
            return (yield from super()._flow(inputs, session_id, kwargs))
        try:
            result = yield from super()._flow(inputs, session_id, kwargs)
        except Exception:
            yield from self._release(session_id)
            raise
        yield from self._release(session_id)
        return result

    def _release(self, session_id: Hashable) -> Flow[None]:
        executor = self.interpreter_executor
        for action in executor.actions.values() if executor is not None else ():
            close = getattr(action, "close_session", None)
            if callable(close):
                yield Call(close, (session_id,), offload=True)


class MathCoder(MathCoderCore, Agent):
    """The math agent, called synchronously (arguments: `MathCoderCore`)."""


class AsyncMathCoder(MathCoderCore, AsyncAgent):
    """Async twin of `MathCoder`; by default each call releases its interpreter session afterwards."""

    _default_interpreter: ClassVar[Mapping[str, object]] = MappingProxyType(
        {"type": "plait.actions.AsyncIPythonInterpreter"}
    )
    _inner_cls: ClassVar[type[AgentCore]] = AsyncAgent
    _executor_cls: ClassVar[str] = "AsyncActionExecutor"
    _release_by_default: ClassVar[bool] = True


AgentForInternLM.register(AsyncAgentForInternLM)
AgentForInternLM.register(MathCoder)
MathCoder.register(AsyncMathCoder)
AsyncAgentForInternLM.register(AsyncMathCoder)
