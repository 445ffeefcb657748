"""Shared fixtures: every behaviour test runs in sync and async mode from one body."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from _postgres import DIR_PREFIX as _POSTGRES_DIR_PREFIX, PostgresServer
from plait.testing.fake_openai import FakeOpenAIServer

# Tests never reach beyond 127.0.0.1: make sure no real key leaks into a test run.
for _var in (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "ANTHROPIC_API_KEY",
    "SERPER_API_KEY",
    "BING_MAP_KEY",
):
    os.environ.pop(_var, None)


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    """The mode a test body runs in; build components with `_support.make(mode, ...)`."""
    return str(request.param)


@pytest.fixture(params=["asyncio", "uvloop"])
def event_loop_kind(request: pytest.FixtureRequest) -> Iterator[str]:
    """The event loop implementation new loops get (``asyncio.run``'s, a sync client's private one).

    uvloop is the one Ray's workers install as the default, and that servers and users install.
    """
    if request.param == "uvloop":
        uvloop = pytest.importorskip("uvloop", reason="the uvloop cases need uvloop (test extra)")
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        yield str(request.param)
    finally:
        asyncio.set_event_loop_policy(None)


@pytest.fixture
def fake_server() -> Iterator[Callable[..., FakeOpenAIServer]]:
    """``fake_server(script=None, **options)``: a started `FakeOpenAIServer`, stopped after the test."""
    servers: list[FakeOpenAIServer] = []

    def start(script: Any = None, **options: Any) -> FakeOpenAIServer:
        server = FakeOpenAIServer(script, **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def llama_server() -> Iterator[Any]:
    """llama.cpp's own OpenAI-compatible server on the default model (`_llama_server.LlamaServer`), for the session.

    Started once, on a free port of 127.0.0.1, and stopped at the end. A test that cannot
    have it fails with the reason (xllamacpp or the model missing, llama.cpp's error): it is
    never skipped.
    """
    from _llama_server import TOOLS_TEMPLATE, LlamaServer, default_model

    try:
        server = LlamaServer(default_model(), chat_template=TOOLS_TEMPLATE.read_text("utf-8")).start()
    except RuntimeError as exc:
        pytest.fail(f"llama.cpp's server could not start: {exc}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A real PostgreSQL server (`_postgres.PostgresServer`) on a free port of 127.0.0.1, for the session.

    Started once per test process from the server binaries on the machine, stopped at the end. A
    test that cannot have it fails with the reason (binaries missing: the setup command that
    installs them; initdb's or the server's own words otherwise): it is never skipped.
    """
    try:
        server = PostgresServer().start()
    except RuntimeError as exc:
        pytest.fail(f"PostgreSQL could not start: {exc}", pytrace=False)
    yield server
    server.stop()


_DATABASES = itertools.count(1)


@pytest.fixture
def postgres_dsn(postgres: PostgresServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """The DSN of a fresh, empty database of its own for this test on the session's `postgres`; dropped after it."""
    stem = re.sub(r"[^a-z0-9_]+", "_", request.node.name.lower())[:48]
    name = f"t{next(_DATABASES)}_{stem}"
    dsn = postgres.create_database(name)
    yield dsn
    postgres.drop_database(name)


# -- no server left behind ----------------------------------------------------------------------
# Tests start real servers (streamlit, MCP servers, agent servers, `plait` itself, PostgreSQL). Whatever a run
# leaves running is a bug (an orphan keeps its port and memory): the controlling process checks
# once every test is done, reports the leftovers, stops them, and fails the run.

_BEFORE = pytest.StashKey[dict[int, str]]()
# Every process a run starts inherits this tag (xdist workers inherit the controller's), so a run
# never stops the servers of another test run on the same machine. A server started with a
# minimal environment (an MCP server under MCPToolkit) has no tag: it is ours when one of its
# ancestors is (other people's runs on a shared machine start such servers too, and stopping
# theirs killed their tests with SIGKILL).
_RUN_TAG_VAR = "PLAIT_TEST_RUN"
os.environ.setdefault(_RUN_TAG_VAR, f"{os.getpid()}-{time.time_ns()}")
_RUN_TAG = f"{_RUN_TAG_VAR}={os.environ[_RUN_TAG_VAR]}".encode()
_SERVER_MARKERS = (
    b"streamlit run",
    b"demo_server.py",
    b"plait.distributed.http_serve.app",
    b"plait.cli",
    _POSTGRES_DIR_PREFIX.encode(),  # a PostgreSQL server's data directory (`_postgres.PostgresServer`)
)


def _run_tags(pid: str) -> list[bytes] | None:
    """The run tags in a process's environment (None: it cannot be read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            environ = fh.read().split(b"\0")
    except OSError:
        return None
    return [item for item in environ if item.startswith(_RUN_TAG_VAR.encode() + b"=")]


def _parent(pid: str) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[1].decode()
    except (OSError, IndexError):
        return None


def _started_by_this_run(pid: str) -> bool:
    tags = _run_tags(pid)
    if tags is None:
        return True
    if tags:
        return _RUN_TAG in tags
    ancestor = _parent(pid)
    for _ in range(64):  # an untagged process: ours when an ancestor is this process or carries our tag
        if ancestor is None or ancestor in ("0", "1"):
            return False
        if ancestor == str(os.getpid()) or _RUN_TAG in (_run_tags(ancestor) or []):
            return True
        ancestor = _parent(ancestor)
    return False


def _servers() -> dict[int, str]:
    found: dict[int, str] = {}
    if not os.path.isdir("/proc"):
        return found
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if any(marker in cmdline for marker in _SERVER_MARKERS) and _started_by_this_run(name):
            found[int(name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")[:160]
    return found


def pytest_sessionstart(session: pytest.Session) -> None:
    # A suite started in the background by a non-interactive shell (`make test &`, nohup) has
    # SIGINT ignored, and children inherit that: the Ctrl-C tests' children would never see it.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    session.config.stash[_BEFORE] = _servers()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller checks after all of them
        return
    before = session.config.stash.get(_BEFORE, {})
    deadline = time.monotonic() + 10
    leftovers = {pid: cmd for pid, cmd in _servers().items() if pid not in before}
    while leftovers and time.monotonic() < deadline:  # give finalizers a moment
        time.sleep(0.2)
        leftovers = {pid: cmd for pid, cmd in _servers().items() if pid not in before}
    if not leftovers:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for pid, cmd in leftovers.items():
        if reporter is not None:
            reporter.write_line(f"left running by the tests (stopped now): {pid} {cmd}", red=True)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
