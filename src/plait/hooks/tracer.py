"""`JSONLTracer`: a local trace of every agent and tool call, as JSON lines on disk.

```python
tracer = JSONLTracer("trace.jsonl").attach(agent)      # every agent and executor of the tree
agent("What is 37 * 91?", session_id="s1")
# {"event": "agent", "span": "...", "parent": null, "agent": "team", "session": "s1", "duration_ms": 812.4, ...}
# {"event": "tool", "span": "...", "parent": "...", "tool": "Calculator", "state": 0, "duration_ms": 1.2, ...}
```

Nothing leaves the machine: the trace is a file you own (tail it, load it with pandas, ship
it where you like). Each span has an id and the id of the agent span it ran in, so nested
agents and their tools form a tree; an agent call that raised is written with its ``error``,
a tool that failed with its state and message.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import os
import threading
import time
import uuid
import weakref
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from ..utils._json import json_default
from .hook import Hook

__all__ = ["JSONLTracer"]

_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("plait_trace_span", default=None)


def _content(message: Any) -> Any:
    content = getattr(message, "content", message)
    return content if isinstance(content, (str, int, float, bool, type(None), list, dict)) else str(content)


@dataclasses.dataclass
class _Span:
    id: str
    parent: str | None
    start: float
    token: contextvars.Token[str | None]
    inputs: Any = None


class JSONLTracer(Hook):
    """Writes one JSON line per finished agent or tool call.

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
        self._open: dict[tuple[int, Hashable], list[_Span]] = {}
        self._finalizer = weakref.finalize(self, self._file.close)

    def attach(self, agent: Any) -> JSONLTracer:
        """Trace every agent of `agent`'s tree and every executor they hold; returns self."""
        for _, module in agent.named_agents():
            module.register_hook(self)
            for name in ("executor", "plugin_executor", "interpreter_executor"):
                executor = getattr(module, name, None)
                if executor is not None and hasattr(executor, "register_hook"):
                    executor.register_hook(self)
        return self

    # -- spans ---------------------------------------------------------------------------------
    def _begin(self, owner: Any, session_id: Hashable, inputs: Any = None) -> None:
        span = uuid.uuid4().hex[:16]
        parent = _CURRENT.get()
        opened = _Span(span, parent, time.perf_counter(), _CURRENT.set(span), inputs)
        with self._lock:
            self._open.setdefault((id(owner), session_id), []).append(opened)

    def _end(self, owner: Any, session_id: Hashable, record: dict[str, Any]) -> None:
        with self._lock:
            stack = self._open.get((id(owner), session_id))
            if not stack:
                return
            span = stack.pop()
            if not stack:
                del self._open[(id(owner), session_id)]
        try:
            _CURRENT.reset(span.token)
        except ValueError:  # ended in another context (a thread or task): the parent link stays right anyway
            _CURRENT.set(span.parent)
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
        text = json.dumps(line, ensure_ascii=False, default=lambda v: _safe(v))
        with self._lock:
            if not self._file.closed:
                self._file.write(text + "\n")
                self._file.flush()

    # -- hook points -----------------------------------------------------------------------------
    def before_agent(self, agent: Any, messages: list[Any], session_id: Any) -> None:
        """Open the agent's span."""
        self._begin(agent, session_id, [_content(m) for m in messages] if self.record_content else None)

    def after_agent(self, agent: Any, message: Any, session_id: Any) -> None:
        """Close the agent's span and write it."""
        record: dict[str, Any] = {"event": "agent", "agent": getattr(agent, "name", type(agent).__name__)}
        if self.record_content:
            record["output"] = _content(message)
        self._end(agent, session_id, record)

    def on_agent_error(self, agent: Any, error: BaseException, session_id: Any) -> None:
        """Close the agent's span with the error."""
        name = getattr(agent, "name", type(agent).__name__)
        self._end(agent, session_id, {"event": "agent", "agent": name, "error": f"{type(error).__name__}: {error}"})

    def before_action(self, executor: Any, message: Any, session_id: Any) -> None:
        """Open the tool call's span."""
        self._begin(executor, session_id)

    def after_action(self, executor: Any, message: Any, session_id: Any) -> None:
        """Close the tool call's span and write it (tool, state, error message)."""
        result = getattr(message, "content", None)
        record: dict[str, Any] = {
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
        self._end(executor, session_id, record)

    def close(self) -> None:
        """Close the trace file."""
        self._finalizer()


def _safe(value: Any) -> Any:
    try:
        return json_default(value)
    except TypeError:
        return str(value)
