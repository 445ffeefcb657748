"""What a confined child runs: the worker loop (`Worker`) and a Jupyter kernel (`kernel_main`).

Standard library only (ipykernel is imported by the kernel child itself), like the rest of
the child side (see `_zygote`): forked from the zygote, after `confine`.
"""

from __future__ import annotations

import ast
import builtins
import io
import json
import linecache
import os
import signal
import socket
import sys
import time
import traceback
from types import FrameType
from typing import TYPE_CHECKING, Any

# Stdlib-only siblings, loaded as package modules when imported (``plait.sandbox``) and as
# top-level modules when this folder runs as the zygote script (it is then ``sys.path[0]``).
if TYPE_CHECKING or __package__:
    from . import _zygote_os as zos
else:
    import _zygote_os as zos


def _dup_to_std(fd: int) -> None:
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


# -- the worker: stateful exec with last-expression display -----------------------------------
class _Interrupted(BaseException):
    """Raised in user code by SIGINT while a cell runs (the parent's timeout)."""


class CPUTimeExceeded(Exception):
    """The call used more CPU seconds than its limit."""


def _clean_traceback(exc: BaseException) -> str:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb)
    return "".join(lines).rstrip("\n")


class Worker:
    """The loop a worker child runs: one namespace, cells executed in order."""

    def __init__(self, sock: socket.socket, spec: zos.ChildSpec) -> None:
        self.sock = sock
        self.spec = spec
        self.pid = os.getpid()
        self.cells = 0
        self.running = False
        self.ns: dict[str, object] = {}
        self.reset()
        signal.signal(signal.SIGINT, self._on_sigint)
        signal.signal(signal.SIGXCPU, self._on_sigxcpu)
        os.register_at_fork(after_in_child=self._after_fork)
        sys.stdout = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
        )
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
        )
        sys.stdin = io.TextIOWrapper(io.BytesIO(b""))
        sys.argv = [""]

    def reset(self) -> None:
        self.ns = {"__name__": "__main__", "__builtins__": builtins, "__doc__": None}

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self.running:
            raise _Interrupted()

    def _on_sigxcpu(self, signum: int, frame: FrameType | None) -> None:
        if self.running:
            raise CPUTimeExceeded(f"the code used more than {self.spec['limits'].get('cpu_seconds')} s of CPU time")

    def _after_fork(self) -> None:
        # A process forked by user code must never speak on the channel.
        try:
            self.sock.close()
        except OSError:
            pass

    def serve(self) -> None:
        while True:
            request = zos.recv_frame(self.sock)
            if request is None:
                return
            op = request.get("op")
            if op == "reset":
                self.reset()
                reply: zos.WorkerReply = {"ok": True}
            else:
                reply = self.execute(request)
            if os.getpid() != self.pid:  # pragma: no cover - a fork of user code got here
                os._exit(0)
            self._flush()
            if self.spec.get("kill_background"):
                self._kill_background()
            zos.send_frame(self.sock, reply)

    def _flush(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass

    def _kill_background(self) -> None:
        """Kill every other process of this private uid (what the code left running)."""
        if os.getuid() == 0 or os.getuid() == self.spec.get("parent_uid"):
            return
        for _ in range(100):
            others = [p for p in zos.pids_of_uid(os.getuid()) if p != self.pid]
            if not others:
                return
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                return
            time.sleep(0.001)

    def execute(self, request: zos.WorkerRequest) -> zos.WorkerReply:
        self.cells += 1
        code = request["code"]
        filename = f"<cell-{self.cells}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        mode = request.get("mode", "interactive")
        reply: zos.WorkerReply = {"ok": True, "result": None, "error": None, "interrupted": False}
        if mode == "script":
            self.reset()
        zos.arm_cpu(self.spec["limits"])
        self.running = True
        try:
            value = self._run(code, filename, mode, request)
            self.running = False
            if value is not None:
                reply["result"] = value
        except _Interrupted:
            self.running = False
            reply.update({"ok": False, "interrupted": True, "error": "KeyboardInterrupt"})
        except BaseException as exc:  # the user's code failed: report it, keep serving
            self.running = False
            if os.getpid() != self.pid:
                os._exit(1)
            zos.explain_no_space(exc, self.spec.get("space_note", ""))
            reply.update({"ok": False, "error": _clean_traceback(exc), "ename": type(exc).__name__})
        finally:
            self.running = False
        return reply

    def _run(self, code: str, filename: str, mode: str, request: zos.WorkerRequest) -> str | None:
        ns = self.ns
        if mode == "script":
            answer = request.get("answer") or {}
            if answer.get("from_stdout"):
                exec(compile(code, filename, "exec"), ns)
                return None
            if symbol := answer.get("symbol"):
                exec(compile(code, filename, "exec"), ns)
                return str(ns[symbol])
            if expr := answer.get("expr"):
                exec(compile(code, filename, "exec"), ns)
                return str(eval(expr, ns))
            lines = code.split("\n")
            exec(compile("\n".join(lines[:-1]), filename, "exec"), ns)
            return str(eval(compile(lines[-1], filename, "eval"), ns))
        tree = ast.parse(code, filename, "exec")
        last: ast.Expression | None = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body[-1].value)
            tree.body.pop()
        exec(compile(tree, filename, "exec"), ns)
        if last is None:
            return None
        value = eval(compile(last, filename, "eval"), ns)
        if value is None:
            return None
        ns["_"] = value
        return repr(value)


def worker_main(spec: zos.ChildSpec, sock: socket.socket, out_fd: int) -> None:
    """Entry point of a worker child (after `confine`)."""
    _dup_to_std(out_fd)
    os.close(out_fd)
    worker = Worker(sock, spec)
    zos.send_frame(sock, spec["hello"])
    worker.serve()


# -- the kernel child ----------------------------------------------------------------------------
TRUNCATION = "\n... [output truncated: {n} more characters]"


def _cap_stream(stream: Any, state: dict[str, int]) -> Any:
    original = stream.write

    def write(text: str) -> int:
        left = state["left"]
        if left <= 0:
            state["dropped"] += len(text)
            return len(text)
        if len(text) > left:
            state["dropped"] += len(text) - left
            state["left"] = 0
            original(text[:left])
            return len(text)
        state["left"] = left - len(text)
        return int(original(text) or len(text))

    stream.write = write
    return original


def kernel_main(spec: zos.ChildSpec, sock: socket.socket) -> None:
    """Entry point of a kernel child: a real ipykernel on the connection the parent chose."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    conn = os.path.join(spec["dir"], ".kernel.json")
    fd = os.open(conn, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(spec["connection"], fh)
    from ipykernel.kernelapp import IPKernelApp

    app: Any = IPKernelApp.instance()  # its methods are untyped
    app.initialize(["-f", conn, "--HistoryManager.enabled=False", "--IPKernelApp.quiet=True"])
    limits = spec["limits"]
    me = os.getpid()
    cap = {"left": limits.get("max_output_bytes", 1 << 62), "dropped": 0}
    raw_write = _cap_stream(sys.stdout, cap)
    _cap_stream(sys.stderr, cap)

    def pre_run_cell(*_: object) -> None:
        cap["left"] = limits.get("max_output_bytes", 1 << 62)
        cap["dropped"] = 0
        zos.arm_cpu(limits)

    def post_run_cell(*_: object) -> None:
        if os.getpid() != me:  # a process forked by the cell: never return into the kernel loop
            os._exit(0)
        if cap["dropped"]:
            raw_write(TRUNCATION.format(n=cap["dropped"]))
            cap["dropped"] = 0
        if spec.get("kill_background") and os.getuid() not in (0, spec.get("parent_uid")):
            for _attempt in range(100):
                if not [p for p in zos.pids_of_uid(os.getuid()) if p != me]:
                    break
                os.kill(-1, signal.SIGKILL)
                time.sleep(0.001)

    def on_sigxcpu(signum: int, frame: FrameType | None) -> None:
        raise CPUTimeExceeded(f"the code used more than {limits.get('cpu_seconds')} s of CPU time")

    def on_oserror(
        shell: Any, etype: type[BaseException], value: BaseException, tb: Any, tb_offset: Any = None
    ) -> None:
        zos.explain_no_space(value, spec.get("space_note", ""))
        shell.showtraceback(running_compiled_code=True)  # as IPython shows any other error

    signal.signal(signal.SIGXCPU, on_sigxcpu)
    if spec.get("space_note"):
        app.shell.set_custom_exc((OSError,), on_oserror)
    app.shell.events.register("pre_run_cell", pre_run_cell)
    app.shell.events.register("post_run_cell", post_run_cell)
    app.shell.user_ns["input"] = _no_input
    zos.send_frame(sock, spec["hello"])
    sock.close()
    app.start()


def _no_input(*args: object, **kwargs: object) -> str:
    raise NotImplementedError("input() is not available in this interpreter")
