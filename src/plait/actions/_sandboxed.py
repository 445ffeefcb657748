"""The plumbing shared by the code tools that run in `plait.sandbox` processes.

* `SandboxedTool`: resource limits (the tool's ``timeout``, when given, is their wall
  clock; else ``limits.timeout``; else the tool's `default_timeout`), the tool's `Sessions`
  (started on first use) and `shutdown`.
* `SessionTool`: one process (or kernel) per session id: a model-given timeout that can only
  lower the tool's own, calls serialized per session (sync and async), `reset`,
  `close_session` and `session_dir`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Hashable, Mapping
from typing import ClassVar, Generic, TypeVar

from ..sandbox import Limits, Op, adrive, drive
from ..sandbox.sessions import SessionProcess, Sessions, lazy_sessions
from ..sandbox.worker import ExecResult
from ..schema import ActionReturn
from .base_action import ActionCore, BaseAction
from .parser import BaseParser

__all__ = ["SandboxedTool", "SessionTool"]

H = TypeVar("H", bound=SessionProcess)


class SandboxedTool(ActionCore, Generic[H], register=False):
    """A tool whose code runs in sandboxed processes (a core: the sync and async tools build on it).

    Args:
        description: The tool description.
        parser: The argument parser class.
        enable: Whether executors offer the tool.
        timeout: Wall-clock seconds per call (None: ``limits.timeout`` if `limits` is given,
            else `default_timeout`).
        limits: Resource limits (a `timeout` given overrides their wall clock).
    """

    default_timeout: ClassVar[float] = 20.0

    def __init__(
        self,
        description: Mapping[str, object] | None,
        parser: type[BaseParser] | Callable[[BaseAction], BaseParser],
        enable: bool,
        *,
        timeout: float | None,
        limits: Limits | None,
    ) -> None:
        super().__init__(description, parser, enable)
        if timeout is not None:
            limits = (limits or Limits()).replace(timeout=timeout)
        self.limits = Limits(timeout=self.default_timeout) if limits is None else limits
        self._sessions: Sessions[H] | None = None

    @abc.abstractmethod
    def _new_sessions(self) -> Sessions[H]:
        """A new `Sessions` for this tool's processes."""

    @abc.abstractmethod
    def _to_return(self, outcome: ExecResult) -> ActionReturn:
        """The tool's answer for a finished execution."""

    @property
    def timeout(self) -> float:
        """Wall-clock seconds per call."""
        return self.limits.timeout

    @property
    def sessions(self) -> Sessions[H]:
        """The sandboxed processes of this tool (started on first use)."""
        return lazy_sessions(self, self._new_sessions)

    def shutdown(self) -> None:
        """Kill every process of this tool (a later call starts afresh)."""
        if self._sessions is not None:
            self._sessions.shutdown()


class SessionTool(SandboxedTool[H], register=False):
    """A `SandboxedTool` with one stateful process per session id."""

    @abc.abstractmethod
    def _op(self, command: str, timeout: float | None, session_id: Hashable) -> Op[ExecResult]:
        """The sandbox flow that runs `command` in `session_id` within `timeout` seconds."""

    def _timeout(self, timeout: float | None) -> float:
        if timeout is None or timeout <= 0:
            return self.limits.timeout
        return min(float(timeout), self.limits.timeout)

    def _execute(self, command: str, timeout: float | None, session_id: Hashable) -> ActionReturn:
        with self.sessions.lock(session_id):
            return self._to_return(drive(self._op(command, timeout, session_id)))

    async def _aexecute(self, command: str, timeout: float | None, session_id: Hashable) -> ActionReturn:
        async with self.sessions.alock(session_id):
            return self._to_return(await adrive(self._op(command, timeout, session_id)))

    def reset(self, session_id: Hashable | None = None) -> None:
        """Start `session_id` (every session when None) afresh on its next call."""
        if self._sessions is not None:
            self._sessions.reset(session_id)

    def close_session(self, session_id: Hashable) -> None:
        """Kill the process of `session_id` and remove its files."""
        if self._sessions is not None:
            self._sessions.close_session(session_id)

    def session_dir(self, session_id: Hashable = 0) -> str | None:
        """The private working directory of `session_id` (None before its first call)."""
        return None if self._sessions is None else self._sessions.directory(session_id)
