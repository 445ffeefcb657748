"""Code interpreter latency: plait's sandboxed interpreters against bare jupyter_client.

Measures, in one run:

1. warm call latency (``1+1``) of `IPythonInterpreter` against a bare jupyter_client
   execute (``BlockingKernelClient``: execute, then read IOPub until idle and the shell
   reply) on the *same* kernel, the two interleaved call by call;
2. the start of a new session: a kernel started by jupyter_client's own ``KernelManager``
   (the usual cold start), a plait session with no spare kernel (``pool_size=0``: the
   kernel is forked from the pre-imported fork server), and a plait session taken from a
   pre-warmed pool (``pool_size=1``);
3. for reference, warm calls of `IPythonInteractive` and a call of the stateless
   `PythonInterpreter` (a fresh process per call).

Run: ``python bench/interpreters.py [--calls 200] [--starts 8] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from plait.actions.ipython_interactive import IPythonInteractive
from plait.actions.ipython_interpreter import IPythonInterpreter
from plait.actions.python_interpreter import PythonInterpreter
from plait.sandbox import shutdown_zygote


def ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 2),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 2),
        "min_ms": round(ordered[0] * 1000, 2),
        "n": len(ordered),
    }


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bare_execute(client: Any, code: str) -> None:
    msg_id = client.execute(code)
    idle = reply = False
    while not idle:
        msg = client.get_iopub_msg(timeout=10)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status":
            idle = msg["content"]["execution_state"] == "idle"
    while not reply:
        msg = client.get_shell_msg(timeout=10)
        reply = msg["parent_header"].get("msg_id") == msg_id


def warm_latency(calls: int) -> dict[str, Any]:
    from jupyter_client import BlockingKernelClient

    tool = IPythonInterpreter(timeout=30)
    assert tool({"command": "1+1"}, session_id="bench").result == [{"type": "text", "content": "2"}]
    kernel = tool.sessions.pool.get("bench")
    client = BlockingKernelClient()
    client.load_connection_info(kernel.connection)
    client.start_channels()
    client.wait_for_ready(timeout=30)
    plait_times, bare_times = [], []
    for _ in range(20):  # warm both paths
        tool({"command": "1+1"}, session_id="bench")
        bare_execute(client, "1+1")
    for _ in range(calls):
        plait_times.append(timed(lambda: tool({"command": "1+1"}, session_id="bench")))
        bare_times.append(timed(lambda: bare_execute(client, "1+1")))
    client.stop_channels()
    tool.shutdown()
    plait, bare = ms(plait_times), ms(bare_times)
    ratio = round(plait["median_ms"] / bare["median_ms"], 3)
    return {"plait": plait, "bare_jupyter_client": bare, "ratio_median": ratio}


def cold_starts(starts: int) -> dict[str, Any]:
    from jupyter_client import KernelManager

    manager_times = []
    for _ in range(starts):
        start = time.perf_counter()
        km = KernelManager()
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        bare_execute(kc, "1+1")
        manager_times.append(time.perf_counter() - start)
        kc.stop_channels()
        km.shutdown_kernel(now=True)

    cold = IPythonInterpreter(timeout=30, pool_size=0)
    cold({"command": "1+1"}, session_id="first")  # the fork server imports ipykernel once
    cold_times = []
    for i in range(starts):
        cold_times.append(timed(lambda i=i: cold({"command": "1+1"}, session_id=f"cold{i}")))
        cold.close_session(f"cold{i}")
    cold.shutdown()

    warm = IPythonInterpreter(timeout=30, pool_size=1)
    warm.prewarm(wait=True)
    pooled_times = []
    for i in range(starts):
        warm.prewarm(wait=True)  # the spare is ready, as between requests of a server
        pooled_times.append(timed(lambda i=i: warm({"command": "1+1"}, session_id=f"pooled{i}")))
        warm.close_session(f"pooled{i}")
    warm.shutdown()
    return {
        "jupyter_client_KernelManager": ms(manager_times),
        "plait_no_spare": ms(cold_times),
        "plait_prewarmed_pool": ms(pooled_times),
    }


def lightweight(calls: int) -> dict[str, Any]:
    interactive = IPythonInteractive(timeout=30)
    interactive({"command": "x = 1"})
    inter = [timed(lambda: interactive({"command": "x + 1"})) for _ in range(calls)]
    interactive.shutdown()
    script = PythonInterpreter(timeout=30)
    script({"command": "def solution():\n    return 1"})
    once = []
    for _ in range(min(calls, 50)):
        script.sessions.prewarm(wait=True)
        once.append(timed(lambda: script({"command": "def solution():\n    return 1 + 1"})))
    script.shutdown()
    return {"IPythonInteractive_warm": ms(inter), "PythonInterpreter_call": ms(once)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--starts", type=int, default=8)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    results = {
        "warm_call": warm_latency(args.calls),
        "session_start": cold_starts(args.starts),
        "lightweight": lightweight(args.calls),
    }
    shutdown_zygote()
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
