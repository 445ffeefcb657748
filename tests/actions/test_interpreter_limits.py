"""Every `Limits` field holds end to end through every interpreter tool, or fails at construction (issue 33, item 2)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))
from _leftovers import processes_under, wait_until

from plait.actions.ipython_interactive import IPythonInteractive, IPythonInteractiveManager
from plait.actions.ipython_interpreter import IPythonInterpreter
from plait.actions.python_interpreter import PythonInterpreter
from plait.sandbox import Limits, Op, Wait, drive, sandbox_capabilities
from plait.schema import ActionStatusCode

pytest.importorskip("ipykernel")

MiB = 1 << 20
GiB = 1 << 30
ROOT = os.geteuid() == 0
TOOLS = {"python": PythonInterpreter, "interactive": IPythonInteractive, "kernel": IPythonInterpreter}
STARTED: list[Any] = []


@pytest.fixture(scope="module", autouse=True)
def no_leftover_processes() -> Iterator[None]:
    yield
    roots = [tool.sessions.root for tool in STARTED]
    for tool in STARTED:
        tool.shutdown()
    assert wait_until(lambda: not processes_under(roots), 10), processes_under(roots)


def make(kind: str, **kwargs: Any) -> Any:
    tool = TOOLS[kind](**kwargs)
    STARTED.append(tool)
    return tool


def call(tool: Any, code: str) -> Any:
    """One call: PythonInterpreter answers ``solution()``, the session tools show the last expression."""
    if isinstance(tool, PythonInterpreter):
        return tool({"command": f"{code}\ndef solution():\n    return value\n"})
    return tool({"command": f"{code}\nvalue"}, session_id="limits")


def test_limits_timeout_stops_a_busy_loop() -> None:
    """``PythonInterpreter(limits=Limits(timeout=1.0))``, as in docs/sandbox.md, stops a busy loop at 1 s, not 20."""
    tool = make("python", limits=Limits(timeout=1.0))
    tool.sessions.prewarm(wait=True)
    start = time.monotonic()
    ret = tool({"command": "def solution():\n    while True:\n        pass\n"})
    elapsed = time.monotonic() - start
    assert ret.state == ActionStatusCode.API_ERROR
    assert "TimeoutError: the code ran for more than 1 s" in (ret.errmsg or ""), ret.errmsg
    assert elapsed < 10, elapsed  # far below the 20 s default (a busy machine may add a few seconds)


def _spy(op: Op[Any], waits: list[Wait]) -> Op[Any]:
    """`op`, recording the `Wait` effects it yields."""
    ready = None
    while True:
        try:
            effect = next(op) if ready is None else op.send(ready)
        except StopIteration as stop:
            return stop.value
        if isinstance(effect, Wait):
            waits.append(effect)
        ready = yield effect


@pytest.mark.parametrize(("kind", "seconds"), [("python", 30), ("kernel", 30), ("interactive", 25)])
def test_limits_timeout_is_the_deadline_of_the_call(kind: str, seconds: float) -> None:
    """``Limits(timeout=30)`` is the call's deadline, not the tool's default (20 s; 30 s for interactive).

    Checked on the deadline the call waits for, rather than by running 25 s.
    """
    tool = make(kind, limits=Limits(timeout=seconds))
    assert tool.limits.timeout == seconds
    tool.sessions.prewarm(wait=True)  # the call's waits are then the execution's own
    waits: list[Wait] = []
    if isinstance(tool, PythonInterpreter):
        op = tool.sessions.once_op(tool._request("def solution():\n    return 2\n"))
    else:
        op = tool._op("1 + 1", None, "deadline")
    result = drive(_spy(op, waits))
    assert result.ok, result
    deadline = max(w.timeout or 0 for w in waits)
    assert seconds - 4 < deadline <= seconds, [w.timeout for w in waits]


def test_the_timeout_argument_and_the_defaults() -> None:
    assert PythonInterpreter().limits.timeout == 20
    assert IPythonInteractive().limits.timeout == 30
    assert IPythonInterpreter().limits.timeout == 20
    assert IPythonInteractiveManager().interactive.limits.timeout == 30
    assert PythonInterpreter(timeout=5, limits=Limits(timeout=30)).limits.timeout == 5  # the argument overrides
    assert IPythonInteractiveManager(limits=Limits(timeout=7)).interactive.limits.timeout == 7
    kept = IPythonInteractive(limits=Limits(timeout=3, max_output_bytes=100)).limits
    assert (kept.timeout, kept.max_output_bytes) == (3, 100)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"timeout": -1}, "Limits.timeout must be > 0, got -1"),
        ({"timeout": 0}, "Limits.timeout must be > 0"),
        ({"grace": -0.5}, "Limits.grace must be >= 0"),
        ({"cpu_seconds": 0.5}, "Limits.cpu_seconds must be >= 1 (RLIMIT_CPU counts whole seconds)"),
        ({"cpu_seconds_total": 0}, "Limits.cpu_seconds_total must be >= 1"),
        ({"memory_bytes": 4096}, "Limits.memory_bytes must be >= 67,108,864"),
        ({"max_processes": 0}, "Limits.max_processes must be >= 1"),
        ({"max_output_bytes": -1}, "Limits.max_output_bytes must be >= 0"),
        ({"max_file_bytes": -5}, "Limits.max_file_bytes must be >= 1"),
        ({"max_open_files": 3}, "Limits.max_open_files must be >= 16"),
        ({"start_timeout": 0}, "Limits.start_timeout must be > 0"),
        ({"max_disk_bytes": 1024}, "Limits.max_disk_bytes must be >= 1,048,576"),
        ({"timeout": float("nan")}, "Limits.timeout must be > 0"),
    ],
)
def test_invalid_limits_fail_at_construction(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        Limits(**fields)
    assert message in str(raised.value)


def test_wrong_types_fail_at_construction() -> None:
    with pytest.raises(TypeError, match=r"Limits\.network must be True or False"):
        Limits(network=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Limits\.max_processes must be an int or None"):
        Limits(max_processes=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Limits\.timeout must be > 0"):
        PythonInterpreter(timeout=-1)
    with pytest.raises(ValueError, match=r"Limits\.grace"):
        Limits().replace(grace=-1)


LIMITS = Limits(
    timeout=60,
    cpu_seconds=60,
    cpu_seconds_total=10,  # below a call's allowance: the session's hard cap still holds
    memory_bytes=3 * GiB,
    max_processes=40,
    max_output_bytes=300,
    max_file_bytes=5 * MiB,
    max_open_files=200,
    max_disk_bytes=32 * MiB,
)
PROBE = (
    "import resource, shutil, socket\n"
    "g = resource.getrlimit\n"
    "value = (g(resource.RLIMIT_AS)[0], g(resource.RLIMIT_NPROC)[0], g(resource.RLIMIT_FSIZE)[0],"
    " g(resource.RLIMIT_NOFILE)[0], g(resource.RLIMIT_CPU)[1], shutil.disk_usage('.').total,"
    " shutil.disk_usage('/dev/shm').total, socket.socket().connect_ex(('127.0.0.1', 9)))"
)


@pytest.mark.skipif(not ROOT, reason="the disk quota, /dev/shm cap and RLIMIT_NPROC per session need root")
@pytest.mark.parametrize("kind", sorted(TOOLS))
def test_every_limit_reaches_the_code(kind: str) -> None:
    tool = make(kind, limits=LIMITS)
    ret = call(tool, PROBE)
    assert ret.state == ActionStatusCode.SUCCESS, ret.errmsg
    address, nproc, fsize, nofile, cpu_hard, disk, scratch, connect = eval(ret.result[0]["content"])
    assert (address, nproc, fsize, nofile, cpu_hard) == (3 * GiB, 40, 5 * MiB, 200, 10)
    caps = sandbox_capabilities()
    if caps["disk_quota"]:
        assert disk == 32 * MiB
    if caps["private_tmp"]:
        assert scratch == 3 * GiB // 2
    if caps["network_namespace"]:
        assert connect != 111  # not ECONNREFUSED: there is no loopback to refuse it
    loud = call(tool, "print('x' * 1000)\nraise ValueError('after the output')")
    assert loud.state == ActionStatusCode.API_ERROR
    assert "output truncated" in loud.errmsg and "x" * 301 not in loud.errmsg, loud.errmsg
    if caps["disk_quota"]:
        files = "for i in range(10):  # 40 MiB in 4 MiB files\n    open(f'f{i}', 'wb').write(bytes(4 << 20))"
        full = call(tool, files)
        assert "No space left on device" in full.errmsg
        assert "working directory holds at most 32 MiB (Limits.max_disk_bytes)" in full.errmsg, full.errmsg
