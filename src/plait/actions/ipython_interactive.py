"""`IPythonInteractive` / `AsyncIPythonInteractive`: stateful Python per session, out of process.

Each session gets its own sandboxed worker process (see `plait.sandbox`): variables,
imports and files persist across calls of that session and are invisible to the others.
The last expression of a cell is shown (its ``repr``) after what the cell printed, as in
IPython; a timeout interrupts the code (the session keeps its variables) and kills the
process if the code does not stop. The worker is a lightweight plain-Python loop, not a
full IPython shell: magics (``%timeit``) and shell escapes (``!ls``) are not supported;
use `IPythonInterpreter` (a real Jupyter kernel) for those.

Example:
    ```python
    tool = IPythonInteractive(timeout=5)
    tool({'command': 'x = 21'}, session_id=1)
    tool({'command': 'x * 2'}, session_id=1).result  # [{'type': 'text', 'content': '42'}]
    ```
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from ..sandbox import Child, Limits, Op
from ..sandbox.sessions import Sessions
from ..sandbox.text import extract_code, join_output, truncate
from ..sandbox.worker import ExecResult
from ..schema import ActionReturn, ActionStatusCode
from ..types import JSONValue
from ._sandboxed import SessionTool
from .base_action import ActionCore, AsyncActionMixin, BaseAction, tool_api
from .parser import BaseParser, JsonParser

__all__ = ["AsyncIPythonInteractive", "IPythonInteractive", "IPythonInteractiveManager"]


class _IPythonInteractiveCore(SessionTool[Child], register=False):
    """What `IPythonInteractive` and `AsyncIPythonInteractive` share (the arguments are `IPythonInteractive`'s)."""

    default_timeout = 30.0

    def __init__(
        self,
        timeout: float | None = None,
        max_out_len: int = 8192,
        use_signals: bool = True,
        description: Mapping[str, object] | None = None,
        parser: type[BaseParser] | Callable[[BaseAction], BaseParser] = JsonParser,
        enable: bool = True,
        limits: Limits | None = None,
        pool_size: int = 1,
        max_sessions: int | None = 256,
    ) -> None:
        super().__init__(description, parser, enable, timeout=timeout, limits=limits)
        self.max_out_len = max_out_len
        self.pool_size = pool_size
        self.max_sessions = max_sessions

    def _new_sessions(self) -> Sessions[Child]:
        return Sessions("worker", self.limits, spares=self.pool_size, max_live=self.max_sessions)

    def _request(self, command: str) -> dict[str, JSONValue]:
        return {"op": "exec", "mode": "interactive", "code": extract_code(command)}

    def _to_return(self, outcome: ExecResult) -> ActionReturn:
        if outcome.ok:
            content = truncate(join_output(outcome.output, outcome.result), self.max_out_len)
            return ActionReturn(type=self.name, result=[{"type": "text", "content": content}])
        message = truncate(join_output(outcome.output, outcome.error), self.max_out_len)
        return ActionReturn(type=self.name, errmsg=message, state=ActionStatusCode.API_ERROR)

    def _op(self, command: str, timeout: float | None, session_id: Hashable) -> Op[ExecResult]:
        return self.sessions.exec_op(session_id, self._request(command), self._timeout(timeout))


class IPythonInteractive(_IPythonInteractiveCore, BaseAction):
    """An interactive Python session per session id, each in its own sandboxed process.

    Args:
        timeout: Wall-clock seconds per call, a model-given timeout can only lower it
            (default: ``limits.timeout`` if `limits` is given, else 30).
        max_out_len: Characters of output returned (the rest is replaced by a marker);
            negative: no truncation.
        use_signals: Accepted for Lagent compatibility; timeouts never use signals in the
            caller's process.
        description: The tool description.
        parser: The argument parser class.
        enable: Whether executors offer the tool.
        limits: Resource limits (a `timeout` given overrides their wall clock).
        pool_size: Started processes kept ready for new sessions.
        max_sessions: The most sessions with a live process (None: no bound).
    """

    @tool_api
    def run(self, command: str, timeout: int | None = None, session_id: Hashable = 0) -> ActionReturn:
        """Launch an IPython Interactive Shell to execute code.

        Args:
            command: Python code snippet
            timeout: timeout for execution in seconds (at most the tool's own limit)
            session_id: the caller's session (passed by executors, hidden from the model)
        """
        return self._execute(command, timeout, session_id)


class AsyncIPythonInteractive(AsyncActionMixin, _IPythonInteractiveCore, sibling_of=IPythonInteractive):
    """`IPythonInteractive` for async agents: ``await tool(...)`` never blocks the event loop."""

    run_in_thread = False

    async def run(self, command: str, timeout: int | None = None, session_id: Hashable = 0) -> ActionReturn:  # noqa: D102
        return await self._aexecute(command, timeout, session_id)


class IPythonInteractiveManager(ActionCore, sibling_of=BaseAction):
    """Runs a batch of code snippets, one per session, concurrently (Lagent's batch interface).

    ``manager(commands, session_ids)`` returns one `ActionReturn` per command (a single
    one for a single command). Each session id keeps its own state across calls.

    Args:
        max_workers: The most snippets running at once (and sessions with a live process).
        timeout: Wall-clock seconds per snippet (default: ``limits.timeout`` if `limits` is
            given, else 30).
        ci_lock: Accepted for Lagent compatibility (not needed: sessions never share a process).
        description: The tool description.
        parser: The argument parser class.
        enable: Whether executors offer the tool.
        limits: Resource limits.
        max_out_len: Characters of output returned per snippet.
    """

    def __init__(
        self,
        max_workers: int = 50,
        timeout: float | None = None,
        ci_lock: str | None = None,
        description: Mapping[str, object] | None = None,
        parser: type[BaseParser] | Callable[[BaseAction], BaseParser] = JsonParser,
        enable: bool = True,
        limits: Limits | None = None,
        max_out_len: int = 8192,
    ) -> None:
        super().__init__(description, parser, enable)
        self.max_workers = max_workers
        self.interactive = IPythonInteractive(
            timeout=timeout, max_out_len=max_out_len, limits=limits, max_sessions=None, pool_size=1
        )

    def __call__(  # Lagent's batch signature, not BaseAction's
        self, commands: str | Sequence[str], session_ids: Hashable | Sequence[Hashable] | None = None
    ) -> ActionReturn | list[ActionReturn]:
        """Run `commands[i]` in session `session_ids[i]` (default ``0..n-1``), all at once."""
        batch = not isinstance(commands, str)
        cmds = [commands] if isinstance(commands, str) else list(commands)
        if session_ids is None:
            ids: list[Hashable] = list(range(len(cmds)))
        elif isinstance(session_ids, (list, tuple, range)):
            ids = list(session_ids)
        else:
            ids = [session_ids]
        if len(ids) != len(cmds) or len(set(ids)) != len(ids):
            raise ValueError("session_ids must be distinct and as many as the commands")
        tool = self.interactive
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_workers, len(cmds)))) as pool:
            results = list(
                pool.map(lambda pair: tool({"command": pair[0]}, session_id=pair[1]), zip(cmds, ids, strict=True))
            )
        for ret in results:
            ret.type = self.name
        return results if batch else results[0]

    async def acall_batch(
        self, commands: Sequence[str], session_ids: Sequence[Hashable] | None = None
    ) -> list[ActionReturn]:
        """Async batch: the same as calling the manager, without blocking the event loop."""
        result = await asyncio.to_thread(self.__call__, list(commands), list(session_ids) if session_ids else None)
        return result if isinstance(result, list) else [result]

    def reset(self) -> None:
        """Forget every session's state."""
        self.interactive.reset()

    def clear(self) -> None:
        """Kill every process (a later call starts afresh)."""
        self.interactive.shutdown()
