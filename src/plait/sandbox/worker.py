"""Running code in a worker process: the exec call as one op, shared by sync and async callers.

A worker is a confined child (`plait.sandbox.process.Child`) running the loop in
`plait.sandbox._zygote_child.Worker`: it keeps one namespace (so variables survive between calls)
and answers each request with a frame; everything the code prints goes through a pipe that
the parent reads while it waits, keeping at most ``max_output_bytes``.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..types import JSONValue
from . import _zygote_child, _zygote_os
from ._io import Op, Sleep, Wait
from .limits import Limits
from .process import Child, FrameReader

__all__ = ["ExecResult", "OutputCap", "describe_exit", "exec_op", "exit_status_op"]

TRUNCATION = _zygote_child.TRUNCATION


@dataclass
class ExecResult:
    """What one call produced.

    Attributes:
        ok: The code ran to the end without an exception.
        output: Everything it printed (stdout and stderr, capped, with a truncation marker).
        result: The value of the last expression (``repr``), or the answer in script mode.
        error: A clean traceback or a description of what went wrong.
        timed_out: The call hit its wall-clock limit.
        restarted: The process died or was killed; the session's state is gone.
        images: Base64 PNG images the code displayed (Jupyter kernels only).
        dropped: Bytes of output that were dropped by the output cap.
    """

    ok: bool
    output: str = ""
    result: str | None = None
    error: str | None = None
    timed_out: bool = False
    restarted: bool = False
    images: list[str] = field(default_factory=list)
    dropped: int = 0


def lost_result(process: str, status: int | None, output: str, images: list[str] | None = None) -> ExecResult:
    """The result of a call whose process (``'Python process'``, ``'kernel'``) died while it ran."""
    noun = process.split()[-1]
    return ExecResult(
        ok=False,
        output=output,
        error=f"the {process} {describe_exit(status)} while running the code; its variables are lost and a "
        f"fresh {noun} starts with the next call",
        restarted=True,
        images=images or [],
    )


def killed_result(fate: str, timeout: float, output: str, images: list[str] | None = None) -> ExecResult:
    """The result of a call that outran `timeout` and ignored the interrupt; `fate` says what was done."""
    return ExecResult(
        ok=False,
        output=output,
        error=f"TimeoutError: the code ran for more than {timeout:g} s and did not stop when interrupted, "
        f"so {fate}; its variables are lost",
        timed_out=True,
        restarted=True,
        images=images or [],
    )


class OutputCap:
    """Keeps the first `limit` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buf = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        """Append `data`, dropping what does not fit."""
        room = self.limit - len(self._buf)
        if room >= len(data):
            self._buf += data
        else:
            if room > 0:
                self._buf += data[:room]
            self.dropped += len(data) - max(room, 0)

    def text(self) -> str:
        """The kept output as text, with a marker when something was dropped."""
        text = self._buf.decode("utf-8", errors="replace")
        if self.dropped:
            text += TRUNCATION.format(n=self.dropped).replace("characters", "bytes")
        return text


def describe_exit(status: int | None) -> str:
    """``'exited with status 1'`` / ``'was killed by SIGKILL'`` / ``'exited'``."""
    if status is None:
        return "exited"
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"was killed by {name}"
    return f"exited with status {status}"


def _drain(fd: int | None, cap: OutputCap | None) -> bool:
    """Read what is available; False at end of file."""
    if fd is None:
        return False
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        if not data:
            return False
        if cap is not None:
            cap.add(data)


def exit_status_op(child: Child) -> Op[int | None]:
    """The exit status of a `child` that died, waiting up to 0.1 s for it (None if still unknown)."""
    status = child.exit_status()
    for _ in range(10):
        if status is not None:
            break
        yield Sleep(0.01)
        status = child.exit_status()
    return status


def exec_op(
    child: Child, request: Mapping[str, JSONValue], limits: Limits, timeout: float | None = None
) -> Op[ExecResult]:
    """Run one request (``{'op': 'exec', 'code': ..., 'mode': ...}``) in `child`.

    On timeout the code is interrupted (KeyboardInterrupt); if it is not back within
    ``limits.grace`` seconds the child and everything it started are killed and the
    result says ``restarted``. A child that dies on its own is reported the same way.
    """
    timeout = limits.timeout if timeout is None else timeout
    cap = OutputCap(limits.max_output_bytes)
    _drain(child.output, None)  # what background processes printed since the last call
    try:
        child.channel.sendall(_frame(request))
    except OSError:
        status = yield from exit_status_op(child)
        return ExecResult(ok=False, error=f"the Python process {describe_exit(status)}", restarted=True)
    reader = FrameReader[_zygote_os.WorkerReply]()
    out_fd = child.output
    deadline = time.monotonic() + timeout
    interrupted = False
    while True:
        fds = tuple(fd for fd in (child.channel.fileno(), out_fd, child.pidfd) if fd is not None)
        ready = yield Wait(fds, max(0.0, deadline - time.monotonic()))
        if out_fd is not None and out_fd in ready and not _drain(out_fd, cap):
            out_fd = None
        frames = reader.read_from(child.channel) if child.channel.fileno() in ready else []
        if frames:
            _drain(child.output, cap)
            reply = frames[0]
            return _result(reply, cap, interrupted, timeout)
        if child.pidfd in ready or reader.eof:
            _drain(child.output, cap)
            status = yield from exit_status_op(child)
            child.release()
            return lost_result("Python process", status, cap.text())
        if time.monotonic() >= deadline:
            if not interrupted:
                interrupted = True
                child.interrupt()
                deadline = time.monotonic() + limits.grace
                continue
            _drain(child.output, cap)
            child.release()
            return killed_result("its process was killed", timeout, cap.text())


def _frame(obj: Mapping[str, JSONValue]) -> bytes:
    data = json.dumps(obj).encode()
    return _zygote_os.HEADER.pack(len(data)) + data


def _result(reply: _zygote_os.WorkerReply, cap: OutputCap, interrupted: bool, timeout: float) -> ExecResult:
    if interrupted and reply.get("interrupted"):
        return ExecResult(
            ok=False,
            output=cap.text(),
            error=f"TimeoutError: the code ran for more than {timeout:g} s and was interrupted",
            timed_out=True,
            dropped=cap.dropped,
        )
    return ExecResult(
        ok=bool(reply.get("ok")),
        output=cap.text(),
        result=reply.get("result"),
        error=reply.get("error"),
        dropped=cap.dropped,
    )
