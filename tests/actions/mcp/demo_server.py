"""An MCP server for the tests, written with the official SDK (the `mcp` package).

``python demo_server.py`` serves stdio; ``python demo_server.py http PORT [json|resumable]``
serves Streamable HTTP on 127.0.0.1:PORT/mcp (``json``: plain JSON answers instead of SSE;
``resumable``: events kept in memory and a 200 ms ``retry`` hint, so `polled` can end its
stream mid-call and the client resumes it with ``Last-Event-ID``).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import os
import sys

import mcp_types
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId

PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

server = MCPServer("demo-server", instructions="Arithmetic, echo and failure tools for plait's tests.")
calls = {"count": 0}


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Repeat a text.

    Args:
        text: What to repeat.
        times: How many times.
    """
    return " ".join([text] * times)


@server.tool()
def count() -> int:
    """How many times this tool was called on this server process."""
    calls["count"] += 1
    return calls["count"]


@server.tool()
def fail(message: str) -> str:
    """Always fails with `message`."""
    raise ValueError(message)


@server.tool()
def pixel() -> Image:
    """A 1x1 PNG image."""
    return Image(data=PIXEL, format="png")


@server.tool()
def environment(name: str) -> str:
    """The value of an environment variable in the server ('<unset>' when absent)."""
    return os.environ.get(name, "<unset>")


@server.tool()
async def slow(seconds: float) -> str:
    """Wait, then answer."""
    await asyncio.sleep(seconds)
    return "done"


meeting = {"arrived": 0}


@server.tool()
async def meet(parties: int) -> str:
    """Answer 'met' once `parties` calls of this tool are running at once ('alone' after 60 s without)."""
    meeting["arrived"] += 1
    for _ in range(6000):
        if meeting["arrived"] >= parties:
            return "met"
        await asyncio.sleep(0.01)
    return "alone"


@server.tool()
def crash() -> str:
    """End the server process at once."""
    os._exit(3)


def triple(x: int) -> int:
    """Three times x (added by `grow`)."""
    return 3 * x


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `triple` and announce the change (in this request's answer, so HTTP clients see it too)."""
    server.add_tool(triple)
    changed = mcp_types.ToolListChangedNotification()
    await ctx.session.send_notification(changed, related_request_id=ctx.request_id)
    return "grown"


@server.tool()
async def polled(ctx: Context) -> str:
    """End this request's SSE stream at once (the client must resume it), then answer."""
    await ctx.close_sse_stream()
    await asyncio.sleep(0.3)
    return "answered after the stream was closed"


class MemoryEventStore(EventStore):
    """Every event of every stream, in memory: enough to replay a stream after its last seen event."""

    def __init__(self) -> None:
        self.events: list[tuple[EventId, StreamId, mcp_types.JSONRPCMessage | None]] = []
        self.ids = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: mcp_types.JSONRPCMessage | None) -> EventId:
        event_id = str(next(self.ids))
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        found = [i for i, event in enumerate(self.events) if event[0] == last_event_id]
        if not found:
            return None
        stream_id = self.events[found[0]][1]
        for event_id, stream, message in self.events[found[0] + 1 :]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


@server.resource("demo://greeting", name="greeting", description="A friendly text.", mime_type="text/plain")
def greeting() -> str:
    """A friendly text."""
    return "Hello from the demo server"


@server.resource("demo://pixel.png", name="pixel", mime_type="image/png")
def pixel_resource() -> bytes:
    """The 1x1 PNG as a binary resource."""
    return PIXEL


@server.prompt()
def review(code: str, language: str = "python") -> str:
    """Ask for a code review."""
    return f"Please review this {language} code:\n{code}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        port = int(sys.argv[2])
        json_response = sys.argv[3:4] == ["json"]
        store = MemoryEventStore() if sys.argv[3:4] == ["resumable"] else None
        asyncio.run(
            server.run_streamable_http_async(
                port=port, json_response=json_response, event_store=store, retry_interval=200 if store else None
            )
        )
    else:
        asyncio.run(server.run_stdio_async())
