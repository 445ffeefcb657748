"""`EngineSpy`: what the embedded llama.cpp engine really did, for tests that stop a generation.

A spy stands between a model and its real engine and counts, for every engine call: the calls
in flight (a call is in flight until llama.cpp returns from it), the chunks the engine
generated, the times plait's chunk callback asked it to stop, the chunks the engine still
generated after that, and the calls the engine finished on its own (a chunk with a
``finish_reason``). So a test proves that a stop reached the engine and that the engine
obeyed it, by counting rather than by timing.

Run as a script it is ``plait`` itself with every embedded model spied on (``python
tests/_engine_spy.py run ...``); at the very end of the process (after plait's own exit
handlers) it writes one line ``ENGINE {json}`` to stderr: the counts, with ``in_flight`` as
it was when ``plait``'s ``main`` returned (``in_flight_at_return``) and at exit.
"""

from __future__ import annotations

import atexit
import json
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

ENGINE_LINE = "ENGINE "


class EngineSpy:
    """Counts the engine calls of the models it is attached to (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = 0
        self.in_flight = 0
        self.chunks = 0
        self.stops_asked = 0  # chunk callbacks that returned True: "stop generating"
        self.chunks_after_stop = 0  # chunks the engine still generated after it was asked to stop
        self.finished = 0  # engine calls that reached a finish_reason (stop, length) on their own

    @classmethod
    def attach(cls, model: Any) -> EngineSpy:
        """Load `model`'s engine and route that model's engine calls through a new spy."""
        spy = cls()
        server = model._server()
        model._server = lambda: _Spied(server, spy)
        return spy

    @classmethod
    def attach_to_every_model(cls) -> EngineSpy:
        """Route the engine calls of every embedded model (sync or async) through a new spy."""
        from plait.llms import llama_cpp

        spy = cls()
        real = llama_cpp._LlamaCppCore._server

        def spied(model: Any) -> Any:
            return _Spied(real(model), spy)

        llama_cpp._LlamaCppCore._server = spied  # type: ignore[method-assign]
        return spy

    def counts(self) -> dict[str, int]:
        """The counts so far."""
        with self.lock:
            return {
                "calls": self.calls,
                "in_flight": self.in_flight,
                "chunks": self.chunks,
                "stops_asked": self.stops_asked,
                "chunks_after_stop": self.chunks_after_stop,
                "finished": self.finished,
            }

    def counted(self, handle: Callable[..., Any]) -> Callable[..., Any]:
        """`handle` (an engine request handler), counted."""

        def call(request: Mapping[str, Any], on_chunk: Callable[[Any], bool] | None = None) -> Any:
            stopped = False

            def on_counted_chunk(chunk: Any) -> bool:
                nonlocal stopped
                stop = on_chunk(chunk) if on_chunk is not None else False
                with self.lock:
                    self.chunks += 1
                    self.chunks_after_stop += stopped
                    self.finished += _finishes(chunk)
                    self.stops_asked += bool(stop)
                stopped = stopped or bool(stop)
                return stop

            with self.lock:
                self.calls += 1
                self.in_flight += 1
            try:
                return handle(request) if on_chunk is None else handle(request, on_counted_chunk)
            finally:
                with self.lock:
                    self.in_flight -= 1

        return call


def _finishes(chunk: Any) -> bool:
    """Whether a stream chunk ends the reply on the engine's own account (it has a finish_reason)."""
    choices = chunk.get("choices") if isinstance(chunk, Mapping) else None
    return bool(choices) and isinstance(choices[0], Mapping) and bool(choices[0].get("finish_reason"))


class _Spied:
    """An engine seen through a spy: its request handlers are counted."""

    def __init__(self, server: Any, spy: EngineSpy) -> None:
        self.server = server
        self.spy = spy

    @property
    def handle_chat_completions(self) -> Callable[..., Any]:
        return self.spy.counted(self.server.handle_chat_completions)

    @property
    def handle_completions(self) -> Callable[..., Any]:
        return self.spy.counted(self.server.handle_completions)

    @property
    def listening_address(self) -> Any:
        return self.server.listening_address


def engine_report(stderr: str) -> dict[str, int]:
    """The counts a spied ``plait`` wrote at its end (the last ``ENGINE`` line of its stderr)."""
    lines = [line for line in stderr.splitlines() if line.startswith(ENGINE_LINE)]
    assert lines, f"no {ENGINE_LINE.strip()} line: the process did not end normally\n{stderr[-3000:]}"
    report: dict[str, int] = json.loads(lines[-1][len(ENGINE_LINE) :])
    return report


def _main(argv: list[str]) -> int:
    at_return: dict[str, int] = {}
    spies: list[EngineSpy] = []

    def report() -> None:
        counts = spies[0].counts() if spies else {}
        sys.stderr.write(ENGINE_LINE + json.dumps({**counts, "in_flight_at_return": at_return.get("in_flight", -1)}))
        sys.stderr.write("\n")
        sys.stderr.flush()

    atexit.register(report)  # registered before plait's exit handlers are: runs after them
    spies.append(EngineSpy.attach_to_every_model())
    from plait.cli import main

    status = main(argv)
    at_return.update(spies[0].counts())
    return status


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
