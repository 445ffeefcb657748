"""The floor: agent_overhead.py's hand-written aiohttp loop (one pooled session, plait's request bodies)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from _driver import Stack, main

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for agent_overhead


def load() -> type[Stack]:
    import aiohttp

    class Raw(Stack):
        async def start(self, base_url: str) -> None:
            import asyncio

            import agent_overhead

            self.raw_run = agent_overhead.raw_run
            self.bodies = await asyncio.to_thread(agent_overhead.recorded_bodies)  # it runs its own loop
            self.url = base_url + "/chat/completions"
            self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

        async def run(self, session_id: int) -> Any:
            return await self.raw_run(self.session, self.url, self.bodies)

        async def close(self) -> None:
            await self.session.close()

    return Raw


if __name__ == "__main__":
    main(load)
