"""One call per session at a time (issue 15, item 6): an overlapping call is refused, never interleaved.

Before, two overlapping calls on one session both wrote its memory, and when one failed its
rollback (truncating to the length it saw at its start) erased the other's finished turn.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from plait.agents import Agent, AsyncAgent
from plait.exceptions import SessionBusyError
from plait.llms.base_llm import BaseLLM


class SlowLLM(BaseLLM):
    """Answers after `delay` seconds; fails when the prompt says 'fail'."""

    def __init__(self, delay: float = 0.3) -> None:
        super().__init__(path="slow")
        self.delay = delay

    def generate(self, inputs: Any, **gen_params: object) -> str:
        time.sleep(self.delay)
        if "fail" in str(inputs):
            raise RuntimeError("model down")
        return "answer"


def _contents(agent: Any, session_id: int) -> list[str]:
    return [message.content for message in agent.memory.get_memory(session_id)]


def test_a_second_call_on_a_busy_session_is_refused_sync() -> None:
    agent = Agent(SlowLLM(), name="a")
    errors: list[BaseException] = []

    def first() -> None:
        try:
            agent("fail please", session_id=1)
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=first)
    thread.start()
    time.sleep(0.1)
    with pytest.raises(SessionBusyError) as busy:
        agent("second", session_id=1)
    assert busy.value.session_id == 1
    assert agent("other session", session_id=2).content == "answer"  # other sessions are not held up
    thread.join()
    assert [type(e) for e in errors] == [RuntimeError]
    assert _contents(agent, 1) == []  # the failed call rolled back; nothing of the refused one was written
    assert agent("again", session_id=1).content == "answer"  # the session is free once the call ended
    assert _contents(agent, 1) == ["again", "answer"]


def test_a_second_call_on_a_busy_session_is_refused_async() -> None:
    agent = AsyncAgent(SlowLLM(), name="a")

    async def main() -> None:
        first = asyncio.create_task(agent("first", session_id=1))
        await asyncio.sleep(0.1)
        with pytest.raises(SessionBusyError):
            await agent("second", session_id=1)
        other = await agent("other session", session_id=2)
        assert other.content == "answer"
        assert (await first).content == "answer"

    asyncio.run(main())
    assert _contents(agent, 1) == ["first", "answer"]


def test_a_cancelled_call_frees_its_session() -> None:
    agent = AsyncAgent(SlowLLM(), name="a")

    async def main() -> None:
        task = asyncio.create_task(agent("first", session_id=1))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await agent("next", session_id=1)).content == "answer"

    asyncio.run(main())
    assert _contents(agent, 1) == ["next", "answer"]
