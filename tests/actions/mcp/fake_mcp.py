"""A small Streamable HTTP MCP server written from the spec (2025-11-25), for what the SDK's cannot be made to do.

`FakeMCPServer` answers ``initialize`` with the capabilities it is given, lists the tools
it is given, and answers ``tools/call`` on an SSE stream that it ends right after a
priming event (``id`` and ``retry``, empty data), before the answer: the client has to
come back with ``GET`` and ``Last-Event-ID`` (SEP-1699), and gets the answer there. Every
request's method, and every resumption's ``Last-Event-ID`` and time, is recorded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from plait.testing._server import BackgroundServer

SESSION = "fake-session-1"


class FakeMCPServer(BackgroundServer):
    """The fake server (``with FakeMCPServer(...) as server: server.url``).

    Args:
        capabilities: The server capabilities ``initialize`` announces.
        tools: The tool definitions ``tools/list`` returns.
        retry: The ``retry`` hint (ms) of the priming event.
        event_ids: Whether the priming event has an ``id`` (without one the stream cannot be resumed).
    """

    thread_name = "fake-mcp-server"

    def __init__(
        self,
        capabilities: Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        retry: int = 300,
        event_ids: bool = True,
    ) -> None:
        super().__init__()
        self.capabilities = dict(capabilities if capabilities is not None else {"tools": {}})
        self.tools = [dict(tool) for tool in tools]
        self.retry = retry
        self.event_ids = event_ids
        self.methods: list[str] = []
        self.closed_at: list[float] = []
        self.resumed: list[tuple[str | None, float]] = []
        self._answers: dict[str, dict[str, Any]] = {}  # priming event id -> the answer kept for a resumption

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def _make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/mcp", self._post)
        app.router.add_get("/mcp", self._get)
        app.router.add_delete("/mcp", self._delete)
        return app

    async def _delete(self, request: web.Request) -> web.Response:
        return web.Response(status=204)

    async def _post(self, request: web.Request) -> web.StreamResponse:
        message = await request.json()
        method = str(message.get("method"))
        self.methods.append(method)
        if "id" not in message:
            return web.Response(status=202)
        headers = {"Mcp-Session-Id": SESSION}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": "2025-11-25",
                "capabilities": self.capabilities,
                "serverInfo": {"name": "fake", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": self.tools}
        elif method == "tools/call":
            return await self._call(request, message, headers)
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "error": error}, headers=headers)
        return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": result}, headers=headers)

    async def _call(
        self, request: web.Request, message: Mapping[str, Any], headers: dict[str, str]
    ) -> web.StreamResponse:
        """Send the priming event and end the stream; the answer waits for the client's GET."""
        response = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream"})
        await response.prepare(request)
        event_id = f"call-{message['id']}-0"
        arguments = message.get("params", {}).get("arguments", {})
        text = f"resumed answer to {message['params']['name']}({json.dumps(arguments)})"
        result = {"content": [{"type": "text", "text": text}]}
        self._answers[event_id] = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        priming = (f"id: {event_id}\n" if self.event_ids else "") + f"retry: {self.retry}\ndata: \n\n"
        await response.write(priming.encode())
        await response.write_eof()
        self.closed_at.append(time.monotonic())
        return response

    async def _get(self, request: web.Request) -> web.StreamResponse:
        last = request.headers.get("Last-Event-ID")
        self.resumed.append((last, time.monotonic()))
        answer = self._answers.pop(last, None) if last else None
        if answer is None:
            return web.Response(status=405)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(f"id: {last[:-1]}1\ndata: {json.dumps(answer)}\n\n".encode())
        await response.write_eof()
        return response
