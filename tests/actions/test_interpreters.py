"""The code interpreters: seeds 000/003, hostile code, session isolation, 64 concurrent sessions.

Every tool here runs code in sandboxed processes (see `plait.sandbox`). The tools' own time
limit (`TIMEOUT`) is generous, so benign code never runs into it on a crowded machine; hostile
code that never ends by itself runs under a short per-call limit (`HOSTILE_TIMEOUT`) and must
come back as the error that names that limit (the deadline was hit). Each hostile case must
leave the test process and the other sessions alone, and the same tool instance must answer
``print(1+1)`` right after. At the end of the module no sandboxed process may be left.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tracemalloc
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sandbox"))
from _leftovers import pid_alive, processes_of_uid, processes_under, wait_until

from plait.actions import ActionExecutor, JsonParser, TupleParser
from plait.actions.ipython_interactive import (
    AsyncIPythonInteractive,
    IPythonInteractive,
    IPythonInteractiveManager,
)
from plait.actions.ipython_interpreter import AsyncIPythonInterpreter, IPythonInterpreter
from plait.actions.python_interpreter import AsyncPythonInterpreter, PythonInterpreter
from plait.hooks import Hook
from plait.sandbox import Limits, get_zygote, sandbox_capabilities, shutdown_zygote
from plait.schema import ActionReturn, ActionStatusCode, AgentMessage

pytest.importorskip("ipykernel")
pytest.importorskip("jupyter_client")

ROOT = os.geteuid() == 0
TIMEOUT = 60  # the tools' own limit: only a bound for code that hangs, never reached by benign code
HOSTILE_TIMEOUT = 1.5  # the limit code that never ends runs under (what each such case waits for)
TOOLS: list[Any] = []


def _keep(tool: Any) -> Any:
    TOOLS.append(tool)
    return tool


@pytest.fixture(scope="module", autouse=True)
def no_leftover_processes() -> Iterator[None]:
    """After the module: shut every tool down and prove no sandboxed process is left."""
    yield
    roots = [t.sessions.root for t in TOOLS if getattr(t, "_sessions", None) is not None]
    roots += [t.interactive.sessions.root for t in TOOLS if isinstance(t, IPythonInteractiveManager)]
    zygote_pid = get_zygote().pid
    for tool in TOOLS:
        (tool.clear if isinstance(tool, IPythonInteractiveManager) else tool.shutdown)()
    shutdown_zygote()
    assert wait_until(lambda: not processes_under(roots), 60), processes_under(roots)
    assert not pid_alive(zygote_pid)


# -- the tools under test ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def interactive() -> IPythonInteractive:
    return _keep(IPythonInteractive(timeout=TIMEOUT))


@pytest.fixture(scope="module")
def kernel() -> IPythonInterpreter:
    return _keep(IPythonInterpreter(timeout=TIMEOUT, max_kernels=16))


@pytest.fixture(scope="module")
def script() -> PythonInterpreter:
    return _keep(PythonInterpreter(timeout=TIMEOUT, answer_from_stdout=True))


@pytest.fixture(scope="module")
def short_script() -> PythonInterpreter:
    """`PythonInterpreter` takes no per-call timeout: code that never ends runs in this one."""
    return _keep(PythonInterpreter(timeout=HOSTILE_TIMEOUT, answer_from_stdout=True))


@pytest.fixture(params=["interactive", "kernel", "script"])
def tool(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def text(ret: ActionReturn) -> str:
    assert ret.state == ActionStatusCode.SUCCESS, ret.errmsg
    assert ret.result
    return str(ret.result[0]["content"])


# -- seeds ----------------------------------------------------------------------------------------
SEED_000_CODE = (
    "def find_numbers():\n    # 正因数\n    positive_factors = [1, 3, 7, 9, 21, 63]\n    # 负因数\n"
    "    negative_factors = [-1, -3, -7, -9, -21, -63]\n    \n    # 找到与正因数相乘的结果为63的数\n"
    "    positive_numbers = [63 / factor for factor in positive_factors]\n    # 找到与负因数相乘的结果为63的数\n"
    "    negative_numbers = [-63 / factor for factor in negative_factors]\n    \n    # 计算两个数的乘积\n"
    "    product = positive_numbers[0] * negative_numbers[0]\n    \n    return product\n\n"
    "result = find_numbers()\nprint(result)"
)


class CodeProcessor(Hook):
    def before_action(self, executor: Any, message: AgentMessage, session_id: Any) -> AgentMessage:
        message = message.copy(deep=True)
        message.content = dict(name="IPythonInteractive", parameters={"command": message.formatted["action"]})
        return message

    def after_action(self, executor: Any, message: AgentMessage, session_id: Any) -> AgentMessage:
        action_return = message.content
        if isinstance(action_return, ActionReturn):
            if action_return.state == ActionStatusCode.SUCCESS:
                response = action_return.format_result()
            else:
                response = action_return.errmsg
        else:
            response = action_return
        message.content = response
        return message


def test_seed_000_code_processor() -> None:
    tool = _keep(IPythonInteractive())
    executor = ActionExecutor(actions=[tool], hooks=[CodeProcessor()])
    bot_msg = AgentMessage(
        sender="Agent",
        content="首先,我们需要...",
        formatted={
            "tool_type": "code interpreter",
            "thought": "首先,我们需要...",
            "action": SEED_000_CODE,
            "status": 1,
        },
    )
    executor_msg = executor(bot_msg)
    assert executor_msg.content == "3969.0"
    assert executor_msg.sender == "ActionExecutor"


def test_seed_003_ipython_interpreter_parsers() -> None:
    action1 = _keep(IPythonInterpreter())
    assert action1('{"command": "import math;math.sqrt(100)"}').result == [{"type": "text", "content": "10.0"}]
    assert action1({"command": "import math;math.sqrt(100)"}).result == [{"type": "text", "content": "10.0"}]
    action2 = _keep(IPythonInterpreter(parser=TupleParser))
    assert action2('("import math;math.sqrt(100)", )').result == [{"type": "text", "content": "10.0"}]
    assert action2(("import math;math.sqrt(100)",)).result == [{"type": "text", "content": "10.0"}]
    executor = ActionExecutor(actions=[action1])
    assert executor("IPythonInterpreter", '{"command": "import math;math.sqrt(100)"}').result == [
        {"type": "text", "content": "10.0"}
    ]
    desc = action1.description
    assert [p["name"] for p in desc["parameters"]] == ["command", "timeout"]
    assert desc["required"] == ["command"]
    assert desc["parameter_description"] == JsonParser.PARAMETER_DESCRIPTION


def test_python_interpreter_answers() -> None:
    tool = _keep(PythonInterpreter())
    fenced = "```python\ndef solution():\n    return 6 * 7\n```"
    assert tool({"command": fenced}).result == [{"type": "text", "content": "42"}]
    assert text(_keep(PythonInterpreter(answer_symbol="ans"))({"command": "ans = 'ok'"})) == "ok"
    assert text(_keep(PythonInterpreter(answer_expr=None))({"command": "a = 2\na * 21"})) == "42"
    ret = tool({"command": "def solution():\n    return 1 / 0"})
    assert ret.state == ActionStatusCode.API_ERROR
    assert "ZeroDivisionError" in (ret.errmsg or "")
    # stateless: nothing survives a call
    tool({"command": "leak = 1\ndef solution():\n    return leak"})
    assert "NameError" in (tool({"command": "def solution():\n    return leak"}).errmsg or "")


# -- hostile code ----------------------------------------------------------------------------------
HOSTILE: dict[str, tuple[str, Any]] = {
    "busy_loop": ("while True: pass", "TimeoutError"),
    "sleep_loop": ("import time\nwhile True: time.sleep(0.01)", "TimeoutError"),
    # fork() fails at the process limit; a kernel whose forks wedge it is interrupted/killed instead
    "fork_bomb": ("import os\nwhile True: os.fork()", ("BlockingIOError", "TimeoutError")),
    "allocate_30GB": ("x = bytearray(30 * 2**30)", "MemoryError"),
    "os_exit": ("import os; os._exit(1)", "exited with status 1"),
    "kill_self": ("import os; os.kill(os.getpid(), 9)", "killed by SIGKILL"),
    "write_outside": ("open('/etc/plait-sandbox-was-here', 'w').write('x')", ("PermissionError", "Read-only file")),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_code(request: pytest.FixtureRequest, tool: Any, case: str) -> None:
    if case == "fork_bomb" and not ROOT:
        pytest.skip("RLIMIT_NPROC is only enforced per private uid when plait runs as root")
    if case == "write_outside" and not ROOT:
        pytest.skip("a write outside the session directory is only blocked under a private uid")
    code, expected = HOSTILE[case]
    expected = (expected,) if isinstance(expected, str) else expected
    endless = "TimeoutError" in expected  # only the short limit ends it: run it under that limit
    stateful = not isinstance(tool, PythonInterpreter)
    if stateful:
        assert tool({"command": "other = 5"}, session_id="bystander").state == ActionStatusCode.SUCCESS
        assert text(tool({"command": "print('warm')"}, session_id="hostile")) == "warm"  # a running session
        command = {"command": code, "timeout": HOSTILE_TIMEOUT} if endless else {"command": code}
        ret = tool(command, session_id="hostile")
    else:
        if endless:
            tool = request.getfixturevalue("short_script")
        tool.sessions.prewarm(wait=True)
        ret = tool({"command": code})
    assert ret.state == ActionStatusCode.API_ERROR, ret
    assert any(e in (ret.errmsg or "") for e in expected), ret.errmsg
    if "TimeoutError" in (ret.errmsg or ""):  # the deadline was hit: the short one, not the tool's own
        assert f"more than {HOSTILE_TIMEOUT:g} s" in (ret.errmsg or ""), ret.errmsg
    after = tool({"command": "print(1+1)"}, session_id="hostile") if stateful else tool({"command": "print(1+1)"})
    assert text(after) == "2"
    if stateful:
        assert text(tool({"command": "print(other)"}, session_id="bystander")) == "5"
        if case == "fork_bomb":  # nothing the bomb forked is left once the call is over
            proc = tool.sessions.pool.get("hostile")
            uid = proc.child.uid if hasattr(proc, "child") else proc.uid
            assert wait_until(lambda: processes_of_uid(uid, exclude=(proc.pid,)) == [], 60)
    assert not os.path.exists("/etc/plait-sandbox-was-here")


def test_huge_output_is_capped_and_memory_stays_small(tool: Any) -> None:
    tracemalloc.start()
    try:
        ret = tool({"command": "print('x' * 100_000_000)"})
        grown_mb = tracemalloc.get_traced_memory()[1] / 2**20  # peak Python memory of the agent's side
    finally:
        tracemalloc.stop()
    assert ret.state == ActionStatusCode.SUCCESS
    content = str(ret.result[0]["content"])
    assert "[output truncated:" in content
    assert len(content) < 2 * Limits().max_output_bytes
    assert grown_mb < 64, grown_mb
    assert text(tool({"command": "print(1+1)"})) == "2"


@pytest.mark.parametrize("name", ["interactive", "kernel"])
def test_files_are_private_per_session(request: pytest.FixtureRequest, name: str) -> None:
    tool = request.getfixturevalue(name)
    assert text(tool({"command": "open('secret.txt', 'w').write('top'); print('ok')"}, session_id="alice")) == "ok"
    alice_dir = tool.session_dir("alice")
    assert alice_dir and os.path.exists(os.path.join(alice_dir, "secret.txt"))  # relative writes land there
    steal = f"print(open({os.path.join(alice_dir, 'secret.txt')!r}).read())"
    ret = tool({"command": steal}, session_id="mallory")
    if ROOT:  # not readable under another uid, and not even there where the session has a root of its own
        assert ret.state == ActionStatusCode.API_ERROR
        assert any(e in (ret.errmsg or "") for e in ("PermissionError", "FileNotFoundError")), ret.errmsg
    assert text(tool({"command": "import os; print(os.getcwd())"}, session_id="mallory")) == tool.session_dir("mallory")


@pytest.mark.skipif(not sandbox_capabilities()["network_namespace"], reason="needs unshare(CLONE_NEWNET)")
def test_no_network_by_default(interactive: IPythonInteractive) -> None:
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)"
        ret = interactive({"command": code}, session_id="net")
        assert ret.state == ActionStatusCode.API_ERROR
        assert "Error" in (ret.errmsg or "")
    finally:
        server.close()


def test_reused_kernel_slot_sees_nothing_of_the_previous_session() -> None:
    tool = _keep(IPythonInterpreter(timeout=TIMEOUT, max_kernels=1, pool_size=0))
    setup = (
        "import os, json\nsecret = 42\njson.plait_marker = 1\nos.environ['PLAIT_SECRET'] = 'x'\n"
        "open('left.txt', 'w').write('x')\nprint(os.getpid())"
    )
    first_pid = int(text(tool({"command": setup}, session_id="a")))
    first_dir = tool.session_dir("a")
    tool.close_session("a")  # frees the only slot
    probe = (
        "import os, sys, json\n"
        "print('secret' in globals(), hasattr(json, 'plait_marker'), 'PLAIT_SECRET' in os.environ, "
        "os.path.exists('left.txt'), os.getpid())"
    )
    out = text(tool({"command": probe}, session_id="b")).split()
    assert out[:4] == ["False", "False", "False", "False"]
    assert int(out[4]) != first_pid
    assert tool.session_dir("b") != first_dir
    assert wait_until(lambda: not os.path.exists(str(first_dir)), 60)


def test_user_data_dir_is_readable_not_writable(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The web demo's uploads folder (``user_data_dir``) stays readable in the session's own root."""
    shared = tmp_path_factory.mktemp("uploads")
    for folder in (shared, *shared.parents):  # as the web demo's folders are: others may traverse
        if str(folder) in ("/", "/tmp"):
            break
        folder.chmod(0o755)
    (shared / "notes.txt").write_text("alpha beta")
    (shared / "notes.txt").chmod(0o644)
    tool = _keep(IPythonInterpreter(timeout=TIMEOUT, user_data_dir=str(shared), pool_size=0))
    code = "import os\nprint(open(os.path.join(os.environ['USER_DATA_DIR'], 'notes.txt')).read())"
    assert text(tool({"command": code}, session_id="reader")) == "alpha beta"
    ret = tool({"command": f"open({str(shared / 'new.txt')!r}, 'w')"}, session_id="reader")
    assert ret.state == ActionStatusCode.API_ERROR and not (shared / "new.txt").exists()


def test_reset_gives_a_fresh_state(interactive: IPythonInteractive, kernel: IPythonInterpreter) -> None:
    for tool in (interactive, kernel):
        tool({"command": "z = 1"}, session_id="r")
        tool.reset("r")
        assert "NameError" in (tool({"command": "z"}, session_id="r").errmsg or "")


def test_timeout_keeps_variables_when_the_code_stops() -> None:
    tool = _keep(IPythonInteractive(timeout=HOSTILE_TIMEOUT))  # the tool's own limit is what stops the code
    assert tool({"command": "kept = 7"}, session_id="t").state == ActionStatusCode.SUCCESS
    ret = tool({"command": "import time\ntime.sleep(600)"}, session_id="t")
    assert f"TimeoutError: the code ran for more than {HOSTILE_TIMEOUT:g} s" in (ret.errmsg or ""), ret.errmsg
    assert text(tool({"command": "kept"}, session_id="t")) == "7"
    # a model-given timeout can only lower the tool's limit: the deadline hit is the lower one
    lowered = tool({"command": "import time\ntime.sleep(600)", "timeout": 0.3}, session_id="t")
    assert "TimeoutError: the code ran for more than 0.3 s" in (lowered.errmsg or ""), lowered.errmsg
    raised = tool({"command": "import time\ntime.sleep(600)", "timeout": 600}, session_id="t")
    assert f"TimeoutError: the code ran for more than {HOSTILE_TIMEOUT:g} s" in (raised.errmsg or ""), raised.errmsg


def test_interactive_output_shape(interactive: IPythonInteractive) -> None:
    assert text(interactive({"command": "print('a')\n1 + 1"}, session_id="o")) == "a\n2"
    assert text(interactive({"command": "'s'"}, session_id="o")) == "'s'"
    assert text(interactive({"command": "x = None\nx"}, session_id="o")) == ""
    small = _keep(IPythonInteractive(max_out_len=10))
    content = text(small({"command": "print('y' * 50)"}))
    assert content.startswith("y" * 10) and "[output truncated: 40 more characters]" in content
    err = interactive({"command": "def f():\n    raise ValueError('bad')\nf()"}, session_id="o")
    assert err.errmsg is not None and err.errmsg.startswith("Traceback (most recent call last):")
    assert 'File "<cell-' in err.errmsg and "ValueError: bad" in err.errmsg and "_zygote" not in err.errmsg


def test_kernel_traceback_is_clean_and_images_are_saved(kernel: IPythonInterpreter, tmp_path: Path) -> None:
    err = kernel({"command": "1/0"}, session_id="img").errmsg or ""
    assert "ZeroDivisionError" in err and "\x1b[" not in err
    tool = _keep(IPythonInterpreter(work_dir=str(tmp_path)))
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    code = f"import base64\nfrom IPython.display import Image, display\ndisplay(Image(data=base64.b64decode('{png}')))"
    ret = tool({"command": code + "\nprint('drawn')"})
    assert ret.state == ActionStatusCode.SUCCESS
    assert ret.result[0] == {"type": "text", "content": "drawn"}
    assert ret.result[1]["type"] == "image"
    path = ret.result[1]["content"]
    assert path.startswith(str(tmp_path)) and Path(path).read_bytes().startswith(b"\x89PNG")


# -- concurrency -------------------------------------------------------------------------------------
SESSIONS = 64


@pytest.mark.parametrize("kind", ["interactive", "kernel"])
def test_64_concurrent_sessions_sync(kind: str) -> None:
    tool = _keep(IPythonInteractive(timeout=60) if kind == "interactive" else IPythonInterpreter(timeout=60))
    with ThreadPoolExecutor(SESSIONS) as pool:
        list(pool.map(lambda i: text(tool({"command": f"x = {i}\nprint('set')"}, session_id=i)), range(SESSIONS)))
        got = list(pool.map(lambda i: text(tool({"command": "print(x)"}, session_id=i)), range(SESSIONS)))
    assert got == [str(i) for i in range(SESSIONS)]
    tool.shutdown()


@pytest.mark.parametrize("kind", ["interactive", "kernel"])
def test_64_concurrent_sessions_async(kind: str) -> None:
    tool = _keep(AsyncIPythonInteractive(timeout=60) if kind == "interactive" else AsyncIPythonInterpreter(timeout=60))

    async def main() -> list[str]:
        await asyncio.gather(*(tool({"command": f"x = {i}"}, session_id=i) for i in range(SESSIONS)))
        rets = await asyncio.gather(*(tool({"command": "print(x)"}, session_id=i) for i in range(SESSIONS)))
        return [text(r) for r in rets]

    assert asyncio.run(main()) == [str(i) for i in range(SESSIONS)]
    tool.shutdown()


def test_async_tools_do_not_block_the_event_loop() -> None:
    interactive = _keep(AsyncIPythonInteractive(timeout=TIMEOUT))
    script = _keep(AsyncPythonInterpreter(timeout=TIMEOUT))

    async def main() -> tuple[int, list[ActionReturn]]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        rets = await asyncio.gather(
            interactive({"command": "import time; time.sleep(1); print('slept')"}),
            script({"command": "import time\ndef solution():\n    time.sleep(1)\n    return 'done'"}),
        )
        done.set()
        await task
        return ticks, list(rets)

    ticks, rets = asyncio.run(main())
    assert [text(r) for r in rets] == ["slept", "done"]
    # the loop kept running while the code slept (1 s: 100 ticks on an idle machine, still tens on a
    # crowded one); a tool that blocked the loop would leave it a tick or two between the calls
    assert ticks >= 10, ticks


def test_manager_batches_sessions() -> None:
    manager = _keep(IPythonInteractiveManager(max_workers=8, timeout=TIMEOUT))
    assert all(r.state == ActionStatusCode.SUCCESS for r in manager([f"v = {i}" for i in range(8)]))
    rets = manager(["v"] * 8, list(range(8)))
    assert [text(r) for r in rets] == [str(i) for i in range(8)]
    single = manager("v * 10", 3)
    assert isinstance(single, ActionReturn) and text(single) == "30"
    with pytest.raises(ValueError):
        manager(["1", "2"], [1, 1])
