"""A second floor: the raw loop of `raw.py`, sending through plait's lean HTTP/1.1 client instead of aiohttp.

plait's model client uses that HTTP client for plain ``http://`` servers, so the distance between
this row and plait's shows what plait's agent layers cost on their own, with the transport's
saving taken out.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from _driver import Stack, main

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for agent_overhead

_JSON = {"Content-Type": "application/json"}


def load() -> type[Stack]:
    from plait.llms._http1 import Connections, Limits

    class RawLean(Stack):
        async def start(self, base_url: str) -> None:
            import asyncio

            import agent_overhead

            self.bodies = await asyncio.to_thread(agent_overhead.recorded_bodies)  # it runs its own loop
            self.url = base_url + "/chat/completions"
            self.connections = Connections(self.url, max_connections=0)
            self.target = "/" + self.url.split("/", 3)[3]

        async def post(self, body: dict[str, Any]) -> Any:
            data = json.dumps(body).encode()
            async with await self.connections.request("POST", self.target, data, _JSON, Limits(300.0)) as response:
                return json.loads(await response.read())

        async def run(self, session_id: int) -> Any:
            from plait.actions.calculator import evaluate

            first, second = self.bodies
            message = (await self.post(first))["choices"][0]["message"]
            call = message["tool_calls"][0]
            result = str(evaluate(json.loads(call["function"]["arguments"])["expression"]))
            messages = [*first["messages"], message, {"role": "tool", "tool_call_id": call["id"], "content": result}]
            data = await self.post({**second, "messages": messages})
            return str(data["choices"][0]["message"]["content"])

        async def close(self) -> None:
            await self.connections.close()

    return RawLean


if __name__ == "__main__":
    main(load)
