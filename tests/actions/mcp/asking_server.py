"""An MCP server that asks its client back while a tool runs, written with the official SDK (stdio).

``book`` elicits the number of guests (form mode) and appends one line per call to the file
named by ``BOOKINGS`` (so a test counts how often the call really ran) with what the client
answered; ``summarize`` asks the client's model for a completion (``sampling/createMessage``)
and returns its text, or the error the client answered with.
"""

from __future__ import annotations

import os

import mcp_types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

server = MCPServer("asking-server")


class Guests(BaseModel):
    """What `book` asks for."""

    guests: int
    vegetarian: bool = False


@server.tool()
async def book(table: str, ctx: Context) -> str:
    """Book a table, asking the user how many guests come."""
    answer = await ctx.elicit(f"How many guests at table {table}?", Guests)
    outcome = f"{answer.action} {answer.data.model_dump_json()}" if answer.action == "accept" else answer.action
    _record(f"{table}: {outcome}")
    return outcome


def _record(line: str) -> None:
    """Append `line` to the bookings file (one line per call that really ran)."""
    with open(os.environ["BOOKINGS"], "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


@server.tool()
async def summarize(text: str, max_tokens: int, ctx: Context) -> str:
    """Ask the client's model to summarize `text`."""
    message = mcp_types.SamplingMessage(role="user", content=mcp_types.TextContent(type="text", text=text))
    try:
        result = await ctx.session.create_message(
            [message], max_tokens=max_tokens, system_prompt="Summarize.", related_request_id=ctx.request_id
        )
    except MCPError as exc:
        return f"refused {exc.error.code}: {exc.error.message}"
    content = result.content
    return f"{result.model}: {content.text}" if isinstance(content, mcp_types.TextContent) else str(content)


if __name__ == "__main__":
    server.run("stdio")
