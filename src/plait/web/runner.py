"""Building the agent the sidebar describes, and running one answer as a stream of events.

An answer runs on a worker thread (`Turn`) and reports `plait.web.events` through a
queue, so the page can redraw (or be re-run by streamlit) while the agent works:

* the InternLM2 agent reports through its own ``stream_chat`` snapshots;
* the function-calling and ReAct agents call their model through `StreamingLLM`, which
  streams every reply to the page, and their executor reports each tool call and result
  through a hook (`ToolEvents`).
"""

from __future__ import annotations

import collections
import inspect
import logging
import queue
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ..agents.aggregator.default_aggregator import content_to_text
from ..exceptions import PlaitError
from ..hooks.hook import Hook
from ..llms._tool_llm import ToolCalling, ToolRequest
from ..llms.response import ModelResponse
from ..schema import AgentStatusCode, FunctionCall
from ..types import ChatInput, SessionId
from .events import (
    Approval,
    Event,
    Failed,
    Finished,
    InternLM2Reader,
    Notice,
    Text,
    ToolCall,
    tool_kind,
    tool_result,
)
from .settings import INTERPRETER_TOOL, Settings

if TYPE_CHECKING:
    from ..actions import BaseAction
    from ..actions.mcp import MCPToolkit
    from ..llms.base_llm import BaseLLM, StreamItem
    from ..llms.llama_cpp import LlamaCppModel
    from ..llms.openai import GPTAPI

__all__ = ["StreamingLLM", "ToolEvents", "Turn", "build_agent", "build_llm", "build_tools"]

_log = logging.getLogger(__name__)
Emit = Callable[[Event], None]
T = TypeVar("T")

#: The call format of seed 001's web demo.
INTERNLM2_TOOL_FORMAT = {
    "begin": "{start_token}{name}\n",
    "start_token": "<|action_start|>",
    "name_map": {"plugin": "<|plugin|>", "interpreter": "<|interpreter|>"},
    "belong": "assistant",
    "end": "<|action_end|>\n",
}


class StreamingLLM(ToolCalling):
    """A model wrapper that streams every reply to `sink` while agents call ``chat`` / ``complete``.

    ``complete(messages, tools=...)`` streams too when the model's ``stream_chat`` takes
    ``tools`` (`GPTAPI`, `LlamaCppModel`); otherwise the reply is reported whole. Other
    attributes (``gen_params``...) are the model's.

    Args:
        llm: The wrapped model.

    Attributes:
        sink: Called with the cumulative text of the current reply (None: nobody listens).
    """

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.sink: Callable[[str], None] | None = None

    def __getattr__(self, name: str) -> object:
        return getattr(self.llm, name)

    def _emit(self, text: str) -> None:
        if self.sink is not None:
            self.sink(text)

    def stream_chat(self, inputs: ChatInput, **gen_params: object) -> Iterator[StreamItem]:
        """The model's ``stream_chat``, reporting each step."""
        for item in self.llm.stream_chat(inputs, **gen_params):
            self._emit(item[1])
            yield item

    def chat(self, inputs: ChatInput, **gen_params: object) -> str:
        """The reply text, streamed to `sink` as it is produced."""
        last = _last(self.stream_chat(inputs, **gen_params))
        return str(last[1]) if last is not None else ""

    def _respond(self, call: ToolRequest) -> ModelResponse:
        """The reply of `complete` (text and tool calls), streamed to `sink` where the model can."""
        tools, tool_choice, gen_params = call.tools, call.tool_choice, call.overrides
        if tools and "tools" not in inspect.signature(self.llm.stream_chat).parameters:
            response: ModelResponse = self.llm.complete(call.inputs, tools=tools, tool_choice=tool_choice, **gen_params)
            self._emit(response.content)
            return response
        if tools:
            gen_params = {**gen_params, "tools": tools, "tool_choice": tool_choice}
        last = _last(self.stream_chat(call.inputs, **gen_params))
        if last is not None and isinstance(last[2], ModelResponse):
            return last[2]
        return ModelResponse(content=str(last[1]) if last is not None else "")


def _last(items: Iterator[T]) -> T | None:
    """Exhaust `items`; return the last one (None when there was none)."""
    tail = collections.deque(items, maxlen=1)
    return tail[0] if tail else None


class ToolEvents(Hook):
    """Executor hook reporting each tool call and its result as events."""

    def __init__(self, emit: Emit) -> None:
        self.emit = emit

    def before_action(self, executor: object, message: object, session_id: SessionId) -> None:
        """Report the call (name and arguments)."""
        call = getattr(message, "content", message)
        if isinstance(call, FunctionCall):
            self.emit(ToolCall(call.name, call.parameters, tool_kind(call.name)))
        else:
            self.emit(ToolCall("?", content_to_text(call)))

    def after_action(self, executor: object, message: object, session_id: SessionId) -> None:
        """Report the result."""
        self.emit(tool_result(getattr(message, "content", message)))


def build_llm(settings: Settings) -> GPTAPI | LlamaCppModel:
    """The model of `settings`: the server at ``api_base``, else the embedded model."""
    from ..cli import build_llm as cli_build_llm

    return cli_build_llm(
        settings.model or None,
        settings.api_base or None,
        settings.api_key or None,
        max_new_tokens=settings.max_new_tokens,
        temperature=settings.temperature,
    )


def build_tools(
    settings: Settings, work_dir: str, mcp: dict[str, MCPToolkit] | None = None
) -> tuple[list[BaseAction], BaseAction | None, list[str]]:
    """``(plugins, interpreter or None, problems)``: tools that cannot be built are left out and reported.

    `mcp` caches MCP toolkits by server (so rebuilding the agent does not restart them).
    """
    from ..actions import get_tool

    plugins: list[BaseAction] = []
    problems: list[str] = []
    for name in settings.plugins:
        try:
            plugins.append(get_tool(name))
        except (PlaitError, TypeError, ValueError, KeyError, OSError) as exc:
            problems.append(f"plugin {name} is not available: {type(exc).__name__}: {exc}")
    if settings.mcp_servers:
        from ..actions.mcp import MCPToolkit

        cache = {} if mcp is None else mcp
        for spec in settings.mcp_servers:
            try:
                if spec not in cache:
                    cache[spec] = MCPToolkit.from_spec(spec)
                plugins.append(cache[spec])
            except PlaitError as exc:
                problems.append(f"MCP server {spec!r} is not available: {exc}")
    interpreter = None
    if settings.interpreter:
        try:
            interpreter = get_tool(INTERPRETER_TOOL, user_data_dir=work_dir, work_dir=work_dir)
        except PlaitError as exc:
            problems.append(f"the code interpreter is not available: {exc}")
    return plugins, interpreter, problems


def build_agent(
    settings: Settings, llm: BaseLLM, work_dir: str, mcp: dict[str, MCPToolkit] | None = None
) -> tuple[Any, list[str]]:
    """The agent of `settings` over `llm`, and the problems met building its tools.

    Raises:
        UserError: The settings cannot make an agent (e.g. a ReAct template with an
            unknown placeholder).
    """
    from ..context import app_policy

    plugins, interpreter, problems = build_tools(settings, work_dir, mcp)
    policy = app_policy("auto", embedded=not settings.api_base)  # summarise; trim on the embedded model
    if settings.agent == "internlm2":
        from ..actions import ActionExecutor
        from ..agents.internlm2_agent import Internlm2Agent, Internlm2Protocol

        protocol = Internlm2Protocol(
            meta_prompt=settings.system_prompt,
            plugin_prompt=settings.plugin_prompt,
            interpreter_prompt=settings.interpreter_prompt,
            tool=INTERNLM2_TOOL_FORMAT,
        )
        agent = Internlm2Agent(
            llm=llm,
            plugin_executor=ActionExecutor(tuple(plugins)) if plugins else None,
            interpreter_executor=ActionExecutor([interpreter]) if interpreter is not None else None,
            protocol=protocol,
            max_turn=settings.max_turn,
            context_policy=policy,
        )
        return agent, problems
    tools = plugins + ([interpreter] if interpreter is not None else [])
    if settings.agent == "react":
        from ..agents.react import ReAct

        react = ReAct(
            StreamingLLM(llm), tools, template=settings.system_prompt, max_turn=settings.max_turn, context_policy=policy
        )
        return react, problems
    from ..agents.function_calling import FunctionCallingAgent

    calling = FunctionCallingAgent(
        StreamingLLM(llm),
        tools,
        template=settings.system_prompt,
        max_turn=settings.max_turn,
        tool_choice="routed",  # the Calculator for arithmetic, no tool for a poem (plait.agents.routing)
        context_policy=policy,
    )
    return calling, problems


def run_internlm2(agent: Any, history: list[dict[str, object]], session_id: Hashable, emit: Emit) -> None:
    """Answer the last user message of `history` with an `Internlm2Agent`; extend `history` when done."""
    reader = InternLM2Reader()
    for snapshot in agent.stream_chat(history, session_id=session_id):
        for event in reader.feed(snapshot):
            if isinstance(event, Finished):
                history.extend(snapshot.inner_steps)
            emit(event)


def run_tool_agent(agent: Any, message: str, session_id: Hashable, emit: Emit) -> None:
    """Answer `message` with a function-calling or ReAct agent (its model a `StreamingLLM`)."""
    _answer(agent, lambda: agent(message, session_id=session_id), emit)


def resume_tool_agent(agent: Any, decisions: Mapping[str, bool], session_id: Hashable, emit: Emit) -> None:
    """Take a run paused for approval up again with the user's `decisions` (see `run_tool_agent`)."""
    _answer(agent, lambda: agent.resume(dict(decisions), session_id=session_id), emit)


def _answer(agent: Any, call: Callable[[], Any], emit: Emit) -> None:
    llm = agent.llm
    if isinstance(llm, StreamingLLM):
        llm.sink = lambda text: emit(Text(text))
    handle = agent.executor.register_hook(ToolEvents(emit))
    try:
        reply = call()
    finally:
        handle.remove()
        if isinstance(llm, StreamingLLM):
            llm.sink = None
    if reply.stream_state == AgentStatusCode.INTERRUPTED:
        emit(Approval(tuple(reply.content)))
        return
    extra = reply.extra_info if isinstance(reply.extra_info, dict) else {}
    if extra.get("forced_final_answer"):
        emit(Notice("the agent used all its tool rounds; this answer was asked for explicitly"))
    emit(Finished(content_to_text(reply.content)))


class Turn:
    """One answer running on a worker thread; its events are read with `events`.

    Args:
        work: ``work(emit)`` runs the agent, emitting events; it should end with
            `Finished`. Errors it raises become a `Failed` event.
        on_failure: Called (on the worker thread) before `Failed` is emitted.
    """

    def __init__(self, work: Callable[[Emit], None], on_failure: Callable[[], None] | None = None) -> None:
        self._work = work
        self._on_failure = on_failure
        self._queue: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="plait-web-turn", daemon=True)
        self.over = False

    def start(self) -> Turn:
        """Start the worker; returns self."""
        self._thread.start()
        return self

    def _run(self) -> None:
        ended = False

        def emit(event: Event) -> None:
            nonlocal ended
            ended = ended or isinstance(event, (Finished, Failed))
            self._queue.put(event)

        try:
            self._work(emit)
        except PlaitError as exc:
            self._fail(f"{type(exc).__name__}: {exc}")
            return
        except Exception as exc:  # a bug or a tool's crash: shown on the page, logged with its traceback
            _log.exception("the agent failed")
            self._fail(f"unexpected error: {type(exc).__name__}: {exc}")
            return
        if not ended:
            self._queue.put(Finished())

    def _fail(self, message: str) -> None:
        if self._on_failure is not None:
            self._on_failure()
        self._queue.put(Failed(message))

    def events(self, poll: float = 0.05) -> Iterator[Event]:
        """Events as they come, until the answer ends (`Finished` or `Failed`), then `over` is True."""
        while not self.over:
            try:
                event = self._queue.get(timeout=poll)
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    self.over = True
                    yield Failed("the answer stopped without a result")
                continue
            if isinstance(event, (Finished, Failed)):
                self.over = True
            yield event
