"""`ToolLog`: every tool call of each session, as plain data, collected by an interceptor.

```python
log = ToolLog()
with intercept(agent, log):
    agent("What is 37 * 91?", session_id="u1")
log.take("u1")   # [{'tool': 'Calculator', 'arguments': '{"expression": "37 * 91"}', 'result': '3367', 'ok': True}]
```

The HTTP server's OpenAI-compatible route streams these to clients (``plait_tool_calls``),
whatever the paradigm: each tool API call is an `ActionCall` effect, seen here after it ran.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Hashable
from typing import TypeVar

from ..effects import ActionCall, Effect, Flow
from ..interceptors import Interceptor
from ..schema import ActionReturn, ActionStatusCode
from ..types import JSONValue

__all__ = ["ToolLog"]

R = TypeVar("R")
_MAX_TEXT = 2000


class ToolLog(Interceptor):
    """Collects each session's tool calls (name, arguments, result text, success) until `take`n."""

    effects = (ActionCall,)

    def __init__(self) -> None:
        self._sessions: dict[Hashable, list[dict[str, JSONValue]]] = {}
        self._lock = threading.Lock()

    def take(self, session_id: Hashable) -> list[dict[str, JSONValue]]:
        """The session's tool calls since the last `take`, oldest first."""
        with self._lock:
            return self._sessions.pop(session_id, [])

    def around(self, effect: Effect[R]) -> Flow[R]:
        """Run the tool call, then note it."""
        result: R = yield effect
        if isinstance(effect, ActionCall) and isinstance(result, ActionReturn):
            entry: dict[str, JSONValue] = {
                "tool": result.type or getattr(effect.action, "name", type(effect.action).__name__),
                "arguments": json.dumps(result.args or {}, ensure_ascii=False, default=str),  # as OpenAI's: JSON text
                "result": (result.format_result() if result.result else result.errmsg or "")[:_MAX_TEXT],
                "ok": result.state == ActionStatusCode.SUCCESS,
            }
            with self._lock:
                self._sessions.setdefault(effect.session_id, []).append(entry)
        return result
