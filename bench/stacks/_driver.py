"""The common part of every stack driver: the JSON protocol, the timing and the Calculator.

A driver is a script ``bench/stacks/<stack>.py`` whose ``load()`` imports its framework (this
import is what ``import_s`` times) and returns a `Stack` factory; it ends with
``main(load)``. `bench/compare.py` runs it in a fresh interpreter (the stack's own venv) with
one argument, a JSON command, and reads JSON lines from its stdout:

* ``{"import_only": true}`` -> ``{"kind": "import", "seconds": s}``
* ``{"sequential": {"url": u, "runs": n}, "concurrent": {"url": u, "levels": [16, ...],
  "per_session": k}}`` -> ``{"kind": "sequential", "runs": n, "wall_s": w, "cpu_s": c}``, then
  ``{"kind": "concurrent", "concurrency": c, "runs": n, "wall_s": w}`` per level.

A run that does not end in the right answer (37 * 91 = 3367) stops the driver with
``{"kind": "error", "message": ...}`` and exit status 1: no number comes from a broken run.

Only the standard library is imported here (peers run from venvs without plait), and nothing
before ``load()``'s import is timed that a stack might import itself (asyncio comes later).
"""

from __future__ import annotations

import abc
import ast
import json
import operator
import sys
import time
from collections.abc import Callable
from typing import Any

QUESTION = "What is 37 * 91?"
EXPRESSION = "37 * 91"
ANSWER = "3367"
_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def calculate(expression: str) -> str:
    """Evaluate ``+ - * /`` over numbers (the peers' calculator tool; plait's stacks use plait's)."""

    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        raise ValueError(f"not arithmetic: {expression!r}")

    return str(value(ast.parse(expression, mode="eval").body))


class Stack(abc.ABC):
    """What a driver's factory returns: one agent run per session on one framework.

    `run` is a coroutine function for async frameworks or a plain function for sync ones
    (those get one thread per concurrent session, as a server would run them).
    """

    async def start(self, base_url: str) -> None:  # noqa: B027 - optional: a stack may need no set-up
        """Build the agent (and its client) against `base_url`, the fake server's ``.../v1``."""

    @abc.abstractmethod
    def run(self, session_id: int) -> Any:
        """One run in session `session_id`: returns (or, async, resolves to) the final answer text."""

    async def close(self) -> None:  # noqa: B027 - optional: a stack may hold nothing to release
        """Release the client."""


def _emit(**record: Any) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _check(answer: Any) -> None:
    if ANSWER not in str(answer):
        raise RuntimeError(f"wrong final answer: {str(answer)[:200]!r}")


async def _one(stack: Stack, session_id: int) -> None:
    import asyncio

    answer = await stack.run(session_id) if asyncio.iscoroutinefunction(stack.run) else stack.run(session_id)
    _check(answer)


async def _sequential(stack: Stack, runs: int) -> None:
    for i in range(20):  # warm-up: connections, first-use caches
        await _one(stack, 1_000_000 + i)
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(runs):
        await _one(stack, i)
    _emit(kind="sequential", runs=runs, wall_s=time.perf_counter() - start, cpu_s=time.process_time() - cpu)


async def _burst(stack: Stack, concurrency: int, per_session: int, base: int) -> None:
    """`concurrency` sessions at once, each making `per_session` runs one after another."""
    import asyncio

    if asyncio.iscoroutinefunction(stack.run):

        async def session(worker: int) -> None:
            for i in range(per_session):
                _check(await stack.run(base + worker * 1000 + i))

        await asyncio.gather(*(session(w) for w in range(concurrency)))
        return
    from concurrent.futures import ThreadPoolExecutor

    def thread(worker: int) -> None:
        for i in range(per_session):
            _check(stack.run(base + worker * 1000 + i))

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for future in [pool.submit(thread, w) for w in range(concurrency)]:
            future.result()


async def _measure(factory: Callable[[], Stack], command: dict[str, Any]) -> None:
    sequential, concurrent = command.get("sequential"), command.get("concurrent")
    if sequential:
        stack = factory()
        await stack.start(sequential["url"])
        await _sequential(stack, int(sequential["runs"]))
        await stack.close()
    if concurrent:
        stack = factory()
        await stack.start(concurrent["url"])
        per_session = int(concurrent["per_session"])
        for level, concurrency in enumerate(concurrent["levels"]):
            base = 10_000_000 * (level + 1)
            await _burst(stack, concurrency, 1, base)  # warm-up: one connection per session
            start = time.perf_counter()
            await _burst(stack, concurrency, per_session, base + 5_000_000)
            wall = time.perf_counter() - start
            _emit(kind="concurrent", concurrency=concurrency, runs=concurrency * per_session, wall_s=wall)
        await stack.close()


def main(load: Callable[..., Callable[[], Stack]]) -> None:
    """Run the command in ``sys.argv[1]`` with the stack that `load` (given the command's ``options``) returns."""
    command = json.loads(sys.argv[1])
    start = time.perf_counter()
    factory = load(**command.get("options", {}))
    seconds = time.perf_counter() - start
    if command.get("import_only"):
        _emit(kind="import", seconds=seconds)
        return
    import asyncio

    try:
        asyncio.run(_measure(factory, command))
    except Exception as exc:  # a broken stack reports why instead of a number
        _emit(kind="error", message=f"{type(exc).__name__}: {exc}"[:2000])
        sys.exit(1)
