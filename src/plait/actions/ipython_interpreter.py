"""`IPythonInterpreter` / `AsyncIPythonInterpreter`: a real Jupyter kernel per session, pooled.

Each session id gets its own ipykernel, started in the sandbox (see `plait.sandbox`):
private uid and working directory, resource limits, no network by default. New sessions
take a kernel that has already started (``pool_size`` spares are kept warm), and a kernel
is never handed from one session to another: `reset` and `close_session` kill it and a
fresh spare takes its place. Results come back as ``[{'type': 'text', 'content': ...}]``
plus one ``{'type': 'image', 'content': path}`` per PNG the code displayed (saved under
``work_dir``). A timeout interrupts the kernel; if it does not stop, it is killed and the
session's next call starts on a fresh one. Kernels never outlive the process: `shutdown`
(also run at exit) kills them all.

Example:
    ```python
    tool = IPythonInterpreter()
    tool('{"command": "import math;math.sqrt(100)"}').result  # [{'type': 'text', 'content': '10.0'}]
    ```

Needs the ``interpreter`` extra (``pip install 'plait[interpreter]'``: jupyter_client, ipykernel).
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Callable, Hashable, Mapping

from ..sandbox import Kernel, Limits, Op
from ..sandbox.sessions import Sessions
from ..sandbox.text import extract_code, join_output
from ..sandbox.worker import ExecResult
from ..schema import ActionReturn, ActionStatusCode
from ._sandboxed import SessionTool
from .base_action import AsyncActionMixin, BaseAction, tool_api
from .parser import BaseParser, JsonParser

__all__ = ["AsyncIPythonInterpreter", "IPythonInterpreter"]


class _IPythonInterpreterCore(SessionTool[Kernel], register=False):
    """What `IPythonInterpreter` and `AsyncIPythonInterpreter` share (the arguments are `IPythonInterpreter`'s)."""

    requires = (("jupyter_client", "interpreter"), ("ipykernel", "interpreter"), ("zmq", "interpreter"))

    def __init__(
        self,
        timeout: float | None = None,
        user_data_dir: str = "ENV",
        work_dir: str = "./work_dir/tmp_dir",
        description: Mapping[str, object] | None = None,
        parser: type[BaseParser] | Callable[[BaseAction], BaseParser] = JsonParser,
        enable: bool = True,
        limits: Limits | None = None,
        pool_size: int = 1,
        max_kernels: int | None = 64,
    ) -> None:
        super().__init__(description, parser, enable, timeout=timeout, limits=limits)
        if user_data_dir == "ENV":
            user_data_dir = os.environ.get("USER_DATA_DIR", "")
        self.user_data_dir = user_data_dir
        self.work_dir = work_dir
        self.pool_size = pool_size
        self.max_kernels = max_kernels

    def _new_sessions(self) -> Sessions[Kernel]:
        shared = [os.path.abspath(self.user_data_dir)] if self.user_data_dir else []
        env = {"USER_DATA_DIR": shared[0]} if shared else {}
        return Sessions(
            "kernel", self.limits, spares=self.pool_size, max_live=self.max_kernels, env=env, readable=shared
        )

    def _save_image(self, data: str) -> str:
        os.makedirs(self.work_dir, exist_ok=True)
        path = os.path.join(self.work_dir, f"{uuid.uuid4().hex}.png")
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(data))
        return path

    def _to_return(self, outcome: ExecResult) -> ActionReturn:
        images = [{"type": "image", "content": self._save_image(data)} for data in outcome.images]
        if outcome.ok:
            text = join_output(outcome.output, outcome.result)
            return ActionReturn(type=self.name, result=[{"type": "text", "content": text}, *images])
        return ActionReturn(
            type=self.name,
            errmsg=join_output(outcome.output, outcome.error),
            state=ActionStatusCode.API_ERROR,
            result=images or None,
        )

    def _op(self, command: str, timeout: float | None, session_id: Hashable) -> Op[ExecResult]:
        return self.sessions.execute_op(session_id, extract_code(command), self._timeout(timeout))

    def prewarm(self, wait: bool = False) -> None:
        """Start the spare kernels now (optionally waiting until they are ready)."""
        self.sessions.prewarm(wait=wait)


class IPythonInterpreter(_IPythonInterpreterCore, BaseAction):
    """Stateful Python on Jupyter kernels, one sandboxed kernel per session.

    Args:
        timeout: Wall-clock seconds per call, a model-given timeout can only lower it
            (default: ``limits.timeout`` if `limits` is given, else 20).
        user_data_dir: A directory of files for the code: its path is in the kernel's
            ``USER_DATA_DIR`` environment variable (``'ENV'``: take ``$USER_DATA_DIR``).
            Sandboxed code may read it (not write), if its permissions let other users read it.
        work_dir: Where displayed images are saved.
        description: The tool description.
        parser: The argument parser class.
        enable: Whether executors offer the tool.
        limits: Resource limits (a `timeout` given overrides their wall clock).
        pool_size: Started kernels kept ready for new sessions.
        max_kernels: The most live kernels (sessions + spares); a new session waits for room.
    """

    @tool_api
    def run(self, command: str, timeout: int | None = None, session_id: Hashable = 0) -> ActionReturn:
        """When you send a message containing Python code to python, it will be executed in a stateful Jupyter notebook environment. python will respond with the output of the execution or time out. Files written to relative paths are kept in the session's private working directory. Internet access for this session is disabled. Do not make external web requests or API calls as they will fail.

        Args:
            command: Python code
            timeout: Upper bound of waiting time for Python script execution.
            session_id: the caller's session (passed by executors, hidden from the model)
        """  # noqa: E501
        return self._execute(command, timeout, session_id)


class AsyncIPythonInterpreter(AsyncActionMixin, _IPythonInterpreterCore, sibling_of=IPythonInterpreter):
    """`IPythonInterpreter` for async agents: ``await tool(...)`` never blocks the event loop."""

    async def run(self, command: str, timeout: int | None = None, session_id: Hashable = 0) -> ActionReturn:  # noqa: D102
        return await self._aexecute(command, timeout, session_id)
