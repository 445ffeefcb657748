"""Jupyter kernels in the sandbox: start one, wait until it is ready, execute code on it.

The kernel is a real ipykernel (``IPKernelApp``) forked from the zygote and confined like
any other sandboxed process; it listens on ``ipc://`` sockets inside its private directory
(so it works in an empty network namespace). plait talks to it with jupyter_client's
`Session` (message signing and (de)serialisation) over plain pyzmq sockets; the waiting is
done by the sans-IO ops of `plait.sandbox._io`, so the same code serves sync and async
callers.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from ..exceptions import MissingDependencyError
from ._io import Op, Sleep, Wait
from .limits import Limits
from .process import Child, SandboxError, spawn_op
from .worker import ExecResult, OutputCap, describe_exit, exit_status_op, killed_result, lost_result

if TYPE_CHECKING:
    import zmq

__all__ = ["Kernel", "clean_traceback", "start_kernel_op"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class _Ports(TypedDict):
    shell_port: int
    iopub_port: int
    stdin_port: int
    control_port: int
    hb_port: int


class Connection(_Ports):
    """A kernel's Jupyter connection info (its sockets are ``ipc://{ip}-{port}``)."""

    transport: str
    ip: str
    key: str
    signature_scheme: str
    kernel_name: str


PORTS: _Ports = {"shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5}


def clean_traceback(lines: list[str]) -> str:
    """A Jupyter traceback as plain text (no ANSI colour codes)."""
    return _ANSI.sub("", "\n".join(lines)).strip("\n")


def _require_jupyter() -> None:
    """Import pyzmq and jupyter_client (which the callers then import by name), or say what to install."""
    try:
        import zmq  # noqa: F401
        from jupyter_client.session import Session  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError("jupyter_client", "interpreter", "IPythonInterpreter") from exc


_CONTEXT: zmq.Context[zmq.Socket[bytes]] | None = None


def _context() -> zmq.Context[zmq.Socket[bytes]]:
    global _CONTEXT
    _require_jupyter()
    import zmq

    if _CONTEXT is None:
        _CONTEXT = zmq.Context()
    return _CONTEXT


class Kernel:
    """A started kernel and plait's connection to it."""

    def __init__(self, child: Child, connection: Connection) -> None:
        _require_jupyter()
        import zmq
        from jupyter_client.session import Session

        self.child = child
        self.connection = connection
        self.session = Session(
            key=connection["key"].encode(), signature_scheme=connection["signature_scheme"], username="plait"
        )
        ctx = _context()
        base = f"ipc://{connection['ip']}"
        self.shell = ctx.socket(zmq.DEALER)
        self.iopub = ctx.socket(zmq.SUB)
        for sock in (self.shell, self.iopub):
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.RECONNECT_IVL, 10)
            sock.setsockopt(zmq.MAXMSGSIZE, 64 << 20)
        self.iopub.setsockopt(zmq.SUBSCRIBE, b"")
        self.shell.connect(f"{base}-{connection['shell_port']}")
        self.iopub.connect(f"{base}-{connection['iopub_port']}")
        self.shell_fd = int(self.shell.getsockopt(zmq.FD))
        self.iopub_fd = int(self.iopub.getsockopt(zmq.FD))
        self.closed = False

    @property
    def pid(self) -> int:
        """The kernel's process id."""
        return self.child.pid

    @property
    def dir(self) -> str:
        """The kernel's private working directory."""
        return self.child.dir

    def dead(self) -> bool:
        """Whether the kernel process has exited."""
        return self.closed or self.child.dead()

    def release(self) -> None:
        """Kill the kernel and everything it started; close the connection. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.child.release()
        self.shell.close(0)
        self.iopub.close(0)

    def _recv_all(self, sock: zmq.Socket[bytes]) -> list[dict[str, Any]]:
        """The Jupyter messages waiting on `sock` (as jupyter_client's `Session` decodes them)."""
        import zmq

        messages = []
        while True:
            try:
                _, msg = self.session.recv(sock, mode=zmq.NOBLOCK)
            except zmq.ZMQError:
                break
            except Exception:  # a message that does not deserialise: skip it
                continue
            if msg is None:
                break
            messages.append(msg)
        return messages

    def _fds(self) -> tuple[int, ...]:
        return (self.shell_fd, self.iopub_fd, self.child.pidfd)

    def ready_op(self, timeout: float) -> Op[None]:
        """Wait until the kernel answers and its output channel is connected."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            request = self.session.msg("kernel_info_request", {})
            self.session.send(self.shell, request)
            window = min(0.2, max(0.0, end - time.monotonic()))
            window_end = time.monotonic() + window
            while True:
                seen_iopub = bool(self._recv_all(self.iopub))
                self._recv_all(self.shell)
                if seen_iopub:
                    # Let the rest of the start-up chatter arrive, then drop it.
                    yield Sleep(0.005)
                    self._recv_all(self.iopub)
                    self._recv_all(self.shell)
                    return
                if self.child.dead():
                    raise SandboxError(f"the kernel {describe_exit(self.child.exit_status())} while starting")
                left = window_end - time.monotonic()
                if left <= 0:
                    break
                yield Wait(self._fds(), left)
        raise SandboxError(f"the kernel did not answer within {timeout:g} s")

    def execute_op(self, code: str, limits: Limits, timeout: float | None = None) -> Op[ExecResult]:
        """Execute `code`; collect streams, results, images and errors until the kernel is idle.

        On timeout the kernel is interrupted (SIGINT); if it is not idle within
        ``limits.grace`` seconds it is killed and the result says ``restarted``.
        """
        timeout = limits.timeout if timeout is None else timeout
        self._recv_all(self.iopub)  # leftovers of an earlier, abandoned call
        self._recv_all(self.shell)
        content = {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        }
        request = self.session.msg("execute_request", content)
        msg_id = request["header"]["msg_id"]
        self.session.send(self.shell, request)
        # The kernel caps its own output (and says how much it dropped); this cap, a little
        # larger, only guards plait against a kernel that bypasses it.
        collector = _Collector(msg_id, OutputCap(limits.max_output_bytes + 4096))
        deadline = time.monotonic() + timeout
        interrupted = False
        reply_at: float | None = None
        while True:
            for msg in self._recv_all(self.shell):
                if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "execute_reply":
                    collector.reply = msg["content"]
                    reply_at = reply_at or time.monotonic()
            for msg in self._recv_all(self.iopub):
                collector.add(msg)
            if collector.reply is not None and (collector.idle or time.monotonic() - (reply_at or 0) > 0.2):
                return collector.result(interrupted, timeout)
            if self.child.dead():
                status = yield from exit_status_op(self.child)
                self.release()
                return lost_result("kernel", status, collector.cap.text(), collector.images)
            now = time.monotonic()
            if now >= deadline:
                if not interrupted:
                    interrupted = True
                    self.child.interrupt()
                    deadline = now + limits.grace
                    continue
                self.release()
                return killed_result("the kernel was restarted", timeout, collector.cap.text(), collector.images)
            wait = deadline - now
            if collector.reply is not None:
                wait = min(wait, 0.05)
            yield Wait(self._fds(), wait)


class _Collector:
    """Gathers the IOPub messages of one execute request."""

    def __init__(self, msg_id: str, cap: OutputCap) -> None:
        self.msg_id = msg_id
        self.cap = cap
        self.result_text: str | None = None
        self.error: str | None = None
        self.ename: str | None = None
        self.images: list[str] = []
        self.reply: dict[str, object] | None = None
        self.idle = False

    def add(self, msg: dict[str, Any]) -> None:
        if msg["parent_header"].get("msg_id") != self.msg_id:
            return
        kind = msg["msg_type"]
        content = msg["content"]
        if kind == "status":
            self.idle = self.idle or content.get("execution_state") == "idle"
        elif kind == "stream":
            self.cap.add(content.get("text", "").encode("utf-8", errors="replace"))
        elif kind in ("execute_result", "display_data"):
            data = content.get("data", {})
            if "image/png" in data:
                self.images.append(data["image/png"])
            elif kind == "execute_result":
                self.result_text = data.get("text/plain", "")
            elif "text/plain" in data:
                self.cap.add((data["text/plain"] + "\n").encode("utf-8", errors="replace"))
        elif kind == "error":
            self.ename = content.get("ename")
            self.error = (
                clean_traceback(content.get("traceback", [])) or f"{content.get('ename')}: {content.get('evalue')}"
            )

    def result(self, interrupted: bool, timeout: float) -> ExecResult:
        status = (self.reply or {}).get("status")
        if interrupted and self.ename == "KeyboardInterrupt":
            return ExecResult(
                ok=False,
                output=self.cap.text(),
                error=f"TimeoutError: the code ran for more than {timeout:g} s and was interrupted",
                timed_out=True,
                images=self.images,
            )
        error = self.error
        if status != "ok" and error is None:
            reply = self.reply or {}
            error = f"{reply.get('ename', 'Error')}: {reply.get('evalue', '')}"
        return ExecResult(
            ok=status == "ok",
            output=self.cap.text(),
            result=self.result_text,
            error=error,
            images=self.images,
        )


def start_kernel_op(
    directory: str, limits: Limits, env: dict[str, str] | None = None, readable: Sequence[str] = ()
) -> Op[Kernel]:
    """Start a confined kernel in `directory` (that may read the host paths `readable`) and wait until it is ready."""
    _require_jupyter()
    connection: Connection = {
        "transport": "ipc",
        "ip": f"{directory}/.k",
        "key": secrets.token_hex(16),
        "signature_scheme": "hmac-sha256",
        "kernel_name": "plait",
        **PORTS,
    }
    child = yield from spawn_op(
        "kernel", directory, limits, extra={"connection": connection}, env=env, readable=readable
    )
    try:
        kernel = Kernel(child, connection)
    except BaseException:
        child.release()
        raise
    ok = False
    try:
        yield from kernel.ready_op(limits.start_timeout)
        ok = True
    finally:
        if not ok:
            kernel.release()
    return kernel
