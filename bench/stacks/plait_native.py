"""plait, composition A: agent_overhead.py's `AsyncFunctionCallingAgent` + `AsyncGPTAPI` + `Calculator`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from _driver import Stack, main

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for agent_overhead


def load() -> type[Stack]:
    from plait.actions import Calculator  # noqa: F401  (the import a user of this composition pays)
    from plait.agents import AsyncFunctionCallingAgent  # noqa: F401
    from plait.llms import AsyncGPTAPI  # noqa: F401

    class Native(Stack):
        async def start(self, base_url: str) -> None:
            import agent_overhead

            self.plait_run = agent_overhead.plait_run
            self.agent = agent_overhead.make_agent(base_url)

        async def run(self, session_id: int) -> Any:
            return await self.plait_run(self.agent, session_id)

        async def close(self) -> None:
            await self.agent.llm.aclose()

    return Native


if __name__ == "__main__":
    main(load)
