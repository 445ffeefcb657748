from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from plait.driver import run_async, run_stream, run_sync
from plait.effects import Call, Flow, Gather
from plait.exceptions import UserError


def _flow(log: list[str]) -> Flow[Any]:
    try:
        first = yield Call(lambda: "a")
        both = yield Gather((Call(lambda x: x * 2, (2,)), Call(lambda: "b")))
        log.append(f"{first}{both}")
        yield Call(lambda: (_ for _ in ()).throw(ValueError("boom")))
    except ValueError as exc:
        log.append(f"caught {exc}")
    return "done"


def test_sync_and_async_drivers_perform_the_same_flow() -> None:
    sync_log: list[str] = []
    async_log: list[str] = []
    assert run_sync(_flow(sync_log)) == "done"
    assert asyncio.run(run_async(_flow(async_log))) == "done"
    assert sync_log == async_log == ["a[4, 'b']", "caught boom"]


def test_gather_runs_concurrently_in_async_mode() -> None:
    arrived = 0

    async def meet(x: int) -> int:
        """Return once all five calls are running at once (never, one after another)."""
        nonlocal arrived
        arrived += 1
        for _ in range(6000):
            if arrived == 5:
                return x
            await asyncio.sleep(0.01)
        raise AssertionError("the gathered calls ran one after another")

    def flow() -> Flow[list[int]]:
        result = yield Gather(tuple(Call(meet, (i,)) for i in range(5)))
        return result  # type: ignore[no-any-return]

    assert asyncio.run(run_async(flow())) == [0, 1, 2, 3, 4]


def test_sync_driver_refuses_coroutines_with_a_clear_error() -> None:
    async def coro() -> None:
        return None

    def flow() -> Flow[None]:
        yield Call(coro)

    with pytest.raises(UserError, match="Async"):
        run_sync(flow())


def test_offloaded_sync_calls_leave_the_event_loop_free() -> None:
    ticks: list[float] = []
    ticked = threading.Event()

    async def ticker() -> None:
        for _ in range(5):
            ticks.append(time.perf_counter())
            await asyncio.sleep(0.02)
        ticked.set()

    def flow() -> Flow[str]:
        # a blocking call that returns True only once the loop has ticked five times meanwhile
        # (on the loop's own thread it would block the ticker and give up after 60 s with False)
        value = yield Call(ticked.wait, (60,), offload=True)
        return str(value)

    async def main() -> list[Any]:
        return list(await asyncio.gather(run_async(flow()), ticker()))

    assert asyncio.run(main())[0] == "True" and len(ticks) == 5


def test_stream_driver_yields_non_final_chunks_then_result() -> None:
    from plait.schema import AgentMessage, AgentStatusCode

    def chunks() -> Any:
        yield AgentMessage(content="a", stream_state=AgentStatusCode.STREAM_ING)
        yield AgentMessage(content="ab", stream_state=AgentStatusCode.END)

    def flow() -> Flow[str]:
        final = yield Call(chunks, stream=True)
        return f"final={final.content}"

    assert [getattr(x, "content", x) for x in run_stream(flow())] == ["a", "final=ab"]
