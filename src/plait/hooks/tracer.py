"""`JSONLTracer`: a local trace of every agent, model and tool call, as JSON lines on disk.

```python
tracer = JSONLTracer("trace.jsonl").attach(agent)      # every agent, model call and tool call of the tree
agent("What is 37 * 91?", session_id="s1")
# {"event": "model", "span": "...", "parent": "...", "model": "GPTAPI", "method": "complete", "duration_ms": 310.2, ...}
# {"event": "tool", "span": "...", "parent": "...", "tool": "Calculator", "state": 0, "duration_ms": 1.2, ...}
# {"event": "agent", "span": "...", "parent": null, "agent": "team", "session": "s1", "duration_ms": 812.4, ...}
```

Agent spans come from hooks (``before_agent`` / ``after_agent`` / ``on_agent_error``); model
and tool spans from an interceptor (`plait.interceptors`) around every `ModelCall` and
`ActionCall` of the tree, whatever the paradigm and wherever its executors live.

Nothing leaves the machine: the trace is a file you own (tail it, load it with pandas, ship
it where you like). Each span has an id and the id of the agent span it ran in, so nested
agents and their tools form a tree; an agent call that raised is written with its ``error``,
a tool that failed with its state and message.
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
import threading
import time
import uuid
import weakref
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..effects import ActionCall, Effect, Flow, ModelCall
from ..interceptors import Interceptor, register_interceptor
from ..llms.response import ModelResponse
from ..schema import AgentStatusCode, PendingCall
from ..types import SessionId
from ._spans import SpanContext, content_of, dumps
from .hook import Hook

if TYPE_CHECKING:
    from ..actions.action_executor import ActionExecutorCore
    from ..agents.agent import AgentCore
    from ..schema import AgentMessage

__all__ = ["JSONLTracer"]

R = TypeVar("R")
_CURRENT: SpanContext[str] = SpanContext("plait_trace_span")


@dataclasses.dataclass
class _Span:
    id: str
    parent: str | None
    start: float
    token: contextvars.Token[str | None]
    inputs: object = None


class JSONLTracer(Hook, Interceptor):
    """Writes one JSON line per finished agent, model or tool call.

    Args:
        path: The trace file (appended to; created with its folder).
        record_content: Also write the messages in and out (off: only names, ids and timings).
    """

    def __init__(self, path: str | os.PathLike[str], record_content: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.record_content = record_content
        self._file = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._open_spans: dict[tuple[int, Hashable], list[_Span]] = {}
        self._finalizer = weakref.finalize(self, self._file.close)

    effects = (ModelCall, ActionCall)

    def attach(self, agent: Any) -> JSONLTracer:
        """Trace every agent of `agent`'s tree, and every model and tool call they make; returns self."""
        for _, module in agent.named_agents():
            module.register_hook(self)
        register_interceptor(agent, self)
        return self

    # -- spans ---------------------------------------------------------------------------------
    def _open(self, inputs: object = None) -> _Span:
        span = uuid.uuid4().hex[:16]
        parent = _CURRENT.get()
        return _Span(span, parent, time.perf_counter(), _CURRENT.enter(span), inputs)

    def _begin(self, owner: object, session_id: Hashable, inputs: object = None) -> None:
        opened = self._open(inputs)
        with self._lock:
            self._open_spans.setdefault((id(owner), session_id), []).append(opened)

    def _end(self, owner: object, session_id: Hashable, record: dict[str, object]) -> None:
        with self._lock:
            stack = self._open_spans.get((id(owner), session_id))
            if not stack:
                return
            span = stack.pop()
            if not stack:
                del self._open_spans[(id(owner), session_id)]
        self._write(span, session_id, record)

    def _write(self, span: _Span, session_id: Hashable, record: dict[str, object]) -> None:
        _CURRENT.leave(span.token, span.parent)
        line = {
            "span": span.id,
            "parent": span.parent,
            "session": session_id,
            "time": time.time(),
            "duration_ms": round((time.perf_counter() - span.start) * 1000, 3),
            **record,
        }
        if self.record_content and span.inputs is not None:
            line["input"] = span.inputs
        text = dumps(line)
        with self._lock:
            if not self._file.closed:
                self._file.write(text + "\n")
                self._file.flush()

    # -- the interceptor: model and tool spans -------------------------------------------------
    def around(self, effect: Effect[R]) -> Flow[R]:
        """Time a model or tool call and write its span (with the error, if it raised)."""
        span = self._open()
        session: Hashable = getattr(effect, "session_id", None)
        try:
            result: R = yield effect
        except BaseException as error:
            self._write(span, session, {**self._describe(effect), "error": f"{type(error).__name__}: {error}"})
            raise
        self._write(span, session, {**self._describe(effect), **self._outcome(effect, result)})
        return result

    @staticmethod
    def _describe(effect: Effect[R]) -> dict[str, object]:
        if isinstance(effect, ModelCall):
            return {"event": "model", "model": type(effect.llm).__name__, "method": effect.method}
        return {"event": "tool"}

    def _outcome(self, effect: Effect[R], result: R) -> dict[str, object]:
        if isinstance(effect, ModelCall):
            outcome: dict[str, object] = {}
            response = result if isinstance(result, ModelResponse) else None
            if response is not None and response.usage is not None:
                outcome["usage"] = dataclasses.asdict(response.usage)
            if self.record_content:
                outcome["output"] = response.content if response is not None else content_of(result)
                if response is not None and response.tool_calls:
                    outcome["tool_calls"] = [{"name": c.name, "arguments": c.arguments} for c in response.tool_calls]
            return outcome
        return self._tool_record(result)

    def _tool_record(self, result: object) -> dict[str, object]:
        record: dict[str, object] = {
            "event": "tool",
            "tool": getattr(result, "type", None),
            "state": int(getattr(result, "state", 0) or 0),
        }
        errmsg = getattr(result, "errmsg", None)
        if errmsg:
            record["error"] = errmsg
        if self.record_content:
            record["args"] = getattr(result, "args", None)
            record["result"] = getattr(result, "result", None)
        return record

    # -- hook points -----------------------------------------------------------------------------
    def before_agent(self, agent: AgentCore, messages: list[AgentMessage], session_id: SessionId) -> None:
        """Open the agent's span."""
        self._begin(agent, session_id, [content_of(m) for m in messages] if self.record_content else None)

    def after_agent(self, agent: AgentCore, message: AgentMessage, session_id: SessionId) -> None:
        """Close the agent's span and write it (a run paused for approval: the calls that wait)."""
        record: dict[str, object] = {"event": "agent", "agent": getattr(agent, "name", type(agent).__name__)}
        if message.stream_state == AgentStatusCode.INTERRUPTED:
            waiting = message.content if isinstance(message.content, list) else []
            record["interrupted"] = [{"id": c.id, "name": c.name} for c in waiting if isinstance(c, PendingCall)]
        elif self.record_content:
            record["output"] = content_of(message)
        self._end(agent, session_id, record)

    def on_resume(self, agent: AgentCore, decisions: Mapping[str, object], session_id: SessionId) -> None:
        """Open the span of a resumed run; its decisions are written with it."""
        self._begin(agent, session_id, {"decisions": dict(decisions)})

    def on_agent_error(self, agent: AgentCore, error: BaseException, session_id: SessionId) -> None:
        """Close the agent's span with the error."""
        name = getattr(agent, "name", type(agent).__name__)
        self._end(agent, session_id, {"event": "agent", "agent": name, "error": f"{type(error).__name__}: {error}"})

    def before_action(self, executor: ActionExecutorCore, message: AgentMessage, session_id: SessionId) -> None:
        """Open the tool call's span (for a tracer registered on an executor by hand)."""
        self._begin(executor, session_id)

    def after_action(self, executor: ActionExecutorCore, message: AgentMessage, session_id: SessionId) -> None:
        """Close the tool call's span and write it (tool, state, error message)."""
        self._end(executor, session_id, self._tool_record(getattr(message, "content", None)))

    def close(self) -> None:
        """Close the trace file."""
        self._finalizer()
