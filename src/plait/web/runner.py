"""Building the agent the sidebar describes, and running one answer as a stream of events.

An answer runs on a worker thread (`Turn`) and reports its events (`plait.web.events`)
through a queue, so the page can redraw (or be re-run by streamlit) while the agent works:
the function-calling and ReAct agents give their typed stream events (``stream_events``,
`plait.events`: model text as it is written, tool calls and results, approvals); the
InternLM2 agent's ``stream_chat`` snapshots are read into the same events (`InternLM2Reader`).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..events import Final, StreamEvent
from ..exceptions import PlaitError
from ..schema import AgentMessage
from .events import Event, Failed, InternLM2Reader, Notice
from .settings import INTERPRETER_TOOL, Settings

if TYPE_CHECKING:
    from ..actions import BaseAction
    from ..actions.mcp import MCPToolkit
    from ..llms.base_llm import BaseLLM
    from ..llms.llama_cpp import LlamaCppModel
    from ..llms.openai import GPTAPI

__all__ = ["Turn", "build_agent", "build_llm", "build_tools", "resume_tool_agent", "run_internlm2", "run_tool_agent"]

_log = logging.getLogger(__name__)
Emit = Callable[[Event], None]

#: The call format of seed 001's web demo.
INTERNLM2_TOOL_FORMAT = {
    "begin": "{start_token}{name}\n",
    "start_token": "<|action_start|>",
    "name_map": {"plugin": "<|plugin|>", "interpreter": "<|interpreter|>"},
    "belong": "assistant",
    "end": "<|action_end|>\n",
}


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
                    cache[spec] = MCPToolkit.from_spec(spec, elicit="approval")
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

        react = ReAct(llm, tools, template=settings.system_prompt, max_turn=settings.max_turn, context_policy=policy)
        return react, problems
    from ..agents.function_calling import FunctionCallingAgent

    calling = FunctionCallingAgent(
        llm,
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
            if isinstance(event, Final):
                history.extend(snapshot.inner_steps)
            emit(event)


def run_tool_agent(agent: Any, message: str, session_id: Hashable, emit: Emit) -> None:
    """Answer `message` with a function-calling or ReAct agent, emitting its stream events."""
    _answer(agent.stream_events(message, session_id=session_id), emit)


def resume_tool_agent(agent: Any, decisions: Mapping[str, object], session_id: Hashable, emit: Emit) -> None:
    """Take a run paused for approval up again with the user's `decisions` (see `run_tool_agent`)."""
    _answer(agent.resume_events(dict(decisions), session_id=session_id), emit)


def _answer(events: Iterator[StreamEvent], emit: Emit) -> None:
    for event in events:
        if isinstance(event, Final):
            extra = event.message.extra_info if isinstance(event.message.extra_info, dict) else {}
            if extra.get("forced_final_answer"):
                emit(Notice("the agent used all its tool rounds; this answer was asked for explicitly"))
        emit(event)


class Turn:
    """One answer running on a worker thread; its events are read with `events`.

    Args:
        work: ``work(emit)`` runs the agent, emitting events; it should end with
            `Final`. Errors it raises become a `Failed` event.
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
            ended = ended or isinstance(event, (Final, Failed))
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
            self._queue.put(Final("", AgentMessage(sender="", content="")))  # keep what was streamed

    def _fail(self, message: str) -> None:
        if self._on_failure is not None:
            self._on_failure()
        self._queue.put(Failed(message))

    def events(self, poll: float = 0.05) -> Iterator[Event]:
        """Events as they come, until the answer ends (`Final` or `Failed`), then `over` is True."""
        while not self.over:
            try:
                event = self._queue.get(timeout=poll)
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    self.over = True
                    yield Failed("the answer stopped without a result")
                continue
            if isinstance(event, (Final, Failed)):
                self.over = True
            yield event
