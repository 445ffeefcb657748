"""A plait MCPServer for the tests: ``python plait_server.py`` (or ``plait mcp-serve plait_server.py:server``).

Tools: ``Calculator``; the toolkit ``Notes`` (``add`` keeps per-session notes, ``count``,
``fail``, ``pixel`` returns a PNG file, ``delete_all`` requires approval); the agent
``echo_agent`` (a scripted model that repeats the message and how long its history is).
"""

from __future__ import annotations

import base64
import os
import tempfile
from collections.abc import Hashable
from typing import Annotated, Any

from plait.actions import BaseAction, Calculator, tool_api
from plait.actions.mcp import MCPServer
from plait.agents import Agent
from plait.testing import ScriptedLLM

PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


class Notes(BaseAction):
    """Notes kept per session."""

    @tool_api
    def add(self, text: Annotated[str, "the note"], session_id: Hashable = 0) -> str:
        """Keep a note; returns every note of this session."""
        notes: list[str] = self.session_state(session_id).setdefault("notes", [])
        notes.append(text)
        print("a tool that prints must not break the stdio protocol")
        return " | ".join(notes)

    @tool_api
    def count(self, times: Annotated[int, "how many"], step: Annotated[float, "increment"] = 1.0) -> str:
        """Count up."""
        return str(times * step)

    @tool_api
    def fail(self, message: str) -> str:
        """Always fails.

        Args:
            message: The error message.
        """
        raise ValueError(message)

    @tool_api
    def pixel(self) -> dict[str, str]:
        """A 1x1 PNG image."""
        fd, path = tempfile.mkstemp(suffix=".png")
        with os.fdopen(fd, "wb") as handle:
            handle.write(PIXEL)
        return {"text": "a pixel", "image": path}

    @tool_api(requires_approval=True)
    def delete_all(self) -> str:
        """Delete every note (needs approval)."""
        return "deleted"


def echo(messages: Any, params: Any) -> str:
    """The agent's reply: the last message and how many messages the model saw."""
    return f"echo: {messages[-1]['content']} ({len(messages)} messages)"


def make_agent(llm: Any = None, cls: Any = Agent) -> Any:
    """An agent that echoes (its history is per session)."""
    return cls(llm or ScriptedLLM([echo] * 100), name="echo_agent", description="Repeats what you say.")


server = MCPServer([Calculator(), Notes(), make_agent()], name="plait-test", instructions="Tools for tests.")

if __name__ == "__main__":
    server.run()
