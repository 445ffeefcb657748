"""What a session sees of the host (issue 33): its own /tmp, /dev/shm and /proc, no host files or sockets, a quota.

Each test runs real sessions (`Sessions` of worker processes forked by the real zygote) as
root, where the sandbox builds every session a root filesystem of its own.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _leftovers import wait_until

import plait
from plait.sandbox import Limits, drive, sandbox_capabilities
from plait.sandbox._zygote_fs import MOUNT_SOURCE, mount, unmount
from plait.sandbox.process import Zygote, _report_isolation, new_session_dir, spawn_op
from plait.sandbox.sessions import Sessions

CAPS = sandbox_capabilities()
pytestmark = pytest.mark.skipif(
    not (CAPS["private_uid"] and CAPS["host_hidden"]), reason=f"needs root and mount namespaces here: {CAPS}"
)
MiB = 1 << 20


@pytest.fixture
def sessions() -> Iterator[Sessions[object]]:
    tool: Sessions[object] = Sessions("worker", Limits(timeout=30), spares=0)
    yield tool
    tool.shutdown()


def mounted(path: str) -> bool:
    """Whether something is mounted at `path` (in plait's mount namespace)."""
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        return any(line.split(" ")[4] == path for line in fh)


def run(sessions: Sessions[object], session: str, code: str) -> tuple[bool, str]:
    """Run `code` in `session`: (ok, the last expression's value or the error)."""
    res = drive(sessions.exec_op(session, {"op": "exec", "code": code}))
    return res.ok, (res.result if res.ok else res.error) or res.output


def test_files_in_tmp_var_tmp_dev_shm_are_private_and_gone_with_the_session(sessions: Sessions[object]) -> None:
    """Issue 33, item 1: session A's files there are the session's own; nothing is left on the host after it."""
    name = f"plait-i33-{secrets.token_hex(4)}"
    places = [f"/tmp/{name}", f"/var/tmp/{name}", f"/dev/shm/{name}"]
    write = f"import os\nfor p in {places!r}:\n    open(p, 'w').write('from A')\n    os.chmod(p, 0o644)\n'written'"
    assert run(sessions, "A", write) == (True, "'written'")
    try:
        read = f"import os\n[os.path.exists(p) for p in {places!r}]"
        assert run(sessions, "A", read) == (True, "[True, True, True]")  # A keeps its files between calls
        assert run(sessions, "B", read) == (True, "[False, False, False]")  # B cannot see them at all
        assert [os.path.exists(p) for p in places] == [False, False, False]  # nor can the host
        sessions.close_session("A")
        assert [os.path.exists(p) for p in places] == [False, False, False]
    finally:
        for path in places:
            if os.path.exists(path):
                os.remove(path)


def test_a_dev_shm_write_past_the_cap_fails_inside_the_sandbox() -> None:
    """Issue 33, item 1: /tmp, /var/tmp and /dev/shm share one tmpfs of half of ``memory_bytes``."""
    tool: Sessions[object] = Sessions("worker", Limits(timeout=60, memory_bytes=256 * MiB), spares=0)
    code = (
        "chunk = b'x' * (1 << 20)\n"
        "written = 0\n"
        "with open('/dev/shm/fill', 'wb') as fh:\n"
        "    for _ in range(200):\n"
        "        fh.write(chunk)\n"
        "        written += 1\n"
    )
    try:
        ok, error = run(tool, "s", code)
        assert not ok and "No space left on device" in error, error
        assert "/dev/shm hold at most 128 MiB together" in error  # the error says what the cap is
        ok, written = run(tool, "s", "written")
        assert ok and 100 <= int(written) <= 128, written  # stopped at the cap (the session lives on)
        assert run(tool, "s", "import os; os.remove('/dev/shm/fill'); 'freed'") == (True, "'freed'")
    finally:
        tool.shutdown()


def test_the_working_directory_has_a_disk_quota_with_a_clear_error() -> None:
    """Issue 33, item 3: past ``max_disk_bytes`` a write fails with ``ENOSPC`` that names the quota."""
    tool: Sessions[object] = Sessions("worker", Limits(timeout=60, max_disk_bytes=8 * MiB), spares=0)
    code = "with open('big', 'wb') as fh:\n    for _ in range(16):\n        fh.write(b'x' * (1 << 20))\n"
    try:
        ok, error = run(tool, "s", code)
        assert not ok and "No space left on device" in error
        assert "session's working directory holds at most 8 MiB (Limits.max_disk_bytes)" in error, error
        assert run(tool, "s", "import os; os.path.getsize('big') <= 8 * 2**20") == (True, "True")
    finally:
        tool.shutdown()


def test_host_unix_sockets_cannot_be_reached(sessions: Sessions[object]) -> None:
    """Issue 33, item 3: a socket listening in the host's /tmp is not there for the session (network off or not)."""
    folder = tempfile.mkdtemp(prefix="plait-i33-sock-")
    os.chmod(folder, 0o755)
    path = os.path.join(folder, "agent.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(1)
    try:
        code = f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({path!r})\n'connected'"
        ok, error = run(sessions, "s", code)
        assert not ok and "FileNotFoundError" in error, error
    finally:
        server.close()
        os.remove(path)
        os.rmdir(folder)


def test_host_files_outside_what_the_interpreter_needs_are_not_readable(sessions: Sessions[object]) -> None:
    """Issue 33, item 3: neither the project's files nor a world-readable secret elsewhere on the host."""
    project = Path(plait.__file__).resolve().parents[2]
    own = [str(project / "pyproject.toml"), plait.__file__]
    assert all(os.stat(p).st_mode & 0o004 for p in own)  # world-readable: only the view keeps them out
    folder = tempfile.mkdtemp(prefix="plait-i33-secret-")
    os.chmod(folder, 0o755)
    secret = os.path.join(folder, "secret.txt")
    Path(secret).write_text("hunter2")
    os.chmod(secret, 0o644)
    try:
        code = (
            "import os\n"
            f"[os.path.exists(p) for p in {[*own, secret]!r}], os.path.exists('/etc/shadow'), os.path.exists('/root')"
        )
        assert run(sessions, "s", code) == (True, "([False, False, False], False, True)")  # /root: on Python's path
        listing = f"import os\nsorted(os.listdir({str(project)!r})) if os.path.exists({str(project)!r}) else []"
        ok, names = run(sessions, "s", listing)  # the project folder: at most the way to its virtualenv
        assert ok and set(eval(names)) <= {".venv", "venv"}, names
        ok, numbers = run(sessions, "s", "import numpy, sys\nint(numpy.arange(3).sum()), sys.executable")  # still works
        assert ok and numbers.startswith("(3, "), numbers
    finally:
        os.remove(secret)
        os.rmdir(folder)


def test_proc_shows_no_host_processes(sessions: Sessions[object]) -> None:
    """Issue 33, item 3: no other process's command line: /proc holds the session's processes only."""
    code = (
        "import os, subprocess\n"
        "child = subprocess.Popen(['sleep', '5'])\n"
        "pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
        "child.kill(); child.wait()\n"
        "pids, os.getpid(), child.pid"
    )
    ok, value = run(sessions, "s", code)
    assert ok, value
    pids, me, child = eval(value)
    assert sorted(pids) == sorted({me, child})
    assert os.getpid() not in pids and 1 not in pids
    ok, error = run(sessions, "s", f"open('/proc/{os.getpid()}/cmdline').read()")
    assert not ok and "FileNotFoundError" in error


def test_readable_paths_are_shared_read_only() -> None:
    """A tool's shared folder (``IPythonInterpreter(user_data_dir=...)``) is readable, not writable."""
    folder = tempfile.mkdtemp(prefix="plait-i33-shared-")
    os.chmod(folder, 0o755)
    Path(folder, "data.csv").write_text("a,b\n")
    os.chmod(os.path.join(folder, "data.csv"), 0o644)
    tool: Sessions[object] = Sessions("worker", Limits(timeout=30), spares=0, readable=[folder])
    try:
        data = os.path.join(folder, "data.csv")
        assert run(tool, "s", f"open({data!r}).read()") == (True, repr("a,b\n"))
        ok, error = run(tool, "s", f"open({os.path.join(folder, 'new')!r}, 'w')")
        assert not ok and ("Read-only file system" in error or "PermissionError" in error), error
    finally:
        tool.shutdown()
        for name in os.listdir(folder):
            os.remove(os.path.join(folder, name))
        os.rmdir(folder)


def test_a_session_reports_what_holds_and_capabilities_agree(sessions: Sessions[object]) -> None:
    assert run(sessions, "s", "1")[0]
    child = sessions.pool.get("s")
    assert child is not None
    isolation = child.isolation  # type: ignore[attr-defined]
    assert isolation == {name: CAPS[name] for name in ("private_tmp", "host_hidden", "private_proc", "disk_quota")}
    directory = child.dir  # type: ignore[attr-defined]
    assert mounted(directory)  # the quota's tmpfs
    sessions.close_session("s")  # unmounted before close_session returns, removed soon after
    assert not mounted(directory)
    assert wait_until(lambda: not os.path.exists(directory), 5)


def test_a_refused_mechanism_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    """Where the kernel refuses part of the isolation, plait says so (a warning, once per reason)."""
    hello = {
        "isolation": {"private_tmp": True, "host_hidden": True, "private_proc": False, "disk_quota": True},
        "isolation_error": "a private /proc could not be mounted (test)",
    }
    with caplog.at_level(logging.WARNING, logger="plait.sandbox"):
        _report_isolation(hello)  # type: ignore[arg-type]
        _report_isolation(hello)  # type: ignore[arg-type]
    warnings = [r.getMessage() for r in caplog.records if r.name == "plait.sandbox"]
    assert len(warnings) == 1 and "private_proc" in warnings[0] and "sandbox_capabilities()" in warnings[0]


def test_a_new_zygote_unmounts_working_directories_a_dead_one_left() -> None:
    """A zygote killed before it could clean up leaves tmpfs mounts; the next one removes them."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid is not a zygote's any more
    folder = tempfile.mkdtemp(prefix="plait-i33-stale-")
    mount(f"{MOUNT_SOURCE}{dead.pid}", folder, "tmpfs", 0, "size=1m")
    try:
        zygote = Zygote()
        with tempfile.TemporaryDirectory(prefix="plait-i33-z-") as root:
            os.chmod(root, 0o711)
            child = drive(spawn_op("worker", new_session_dir(root, "z"), Limits(), zygote=zygote))  # started up
            child.release()
        zygote.close()
        assert not mounted(folder)
    finally:
        unmount(folder)
        time.sleep(0.01)
        os.rmdir(folder)
