"""A plait MCPServer with typed, slow and file-returning tools: ``python spec_server.py`` serves it over stdio.

Tools: ``hang`` (writes `marker`, then waits until cancelled, and counts that), ``cancelled``
(how many ``hang`` calls were cancelled), ``reverse``; typed results ``weather`` (a pydantic
model), ``Geo__locate`` (a dataclass), ``stats`` (a ``TypedDict``), ``liar`` (declares a model,
returns something else); ``report`` (returns a file).
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from typing_extensions import TypedDict

from plait.actions import BaseAction, tool_api
from plait.actions.mcp import MCPServer

CANCELLED = [0]


async def hang(marker: str) -> str:
    """Wait until cancelled.

    Args:
        marker: A file written once the call runs.
    """
    await asyncio.to_thread(Path(marker).write_text, "started")
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        CANCELLED[0] += 1
        raise
    return "not cancelled"


def cancelled() -> int:
    """How many calls of hang were cancelled."""
    return CANCELLED[0]


def reverse(text: str) -> str:
    """Reverse a text.

    Args:
        text: The text.
    """
    return text[::-1]


class Weather(BaseModel):
    """The weather in a city."""

    city: str
    degrees: float
    sunny: bool


def weather(city: str) -> Weather:
    """The weather of a city.

    Args:
        city: The city.
    """
    return Weather(city=city, degrees=24.5, sunny=True)


@dataclasses.dataclass
class Place:
    """Where a city is."""

    name: str
    lat: float
    lon: float
    tags: list[str] = dataclasses.field(default_factory=list)


class Stats(TypedDict):
    """Counts of a text."""

    words: int
    chars: int


class Geo(BaseAction):
    """Places."""

    @tool_api
    def locate(self, city: str) -> Place:
        """Locate a city.

        Args:
            city: The city.
        """
        return Place(city, 41.9, 12.5, ["capital"])


def stats(text: str) -> Stats:
    """Count the words and characters of a text.

    Args:
        text: The text.
    """
    return {"words": len(text.split()), "chars": len(text)}


def liar() -> Weather:
    """Claims to return the weather."""
    result: Any = {"city": "Rome"}  # no degrees, no sunny: not a Weather
    return result


def report(title: str) -> dict[str, str]:
    """Write a report file.

    Args:
        title: Its title.
    """
    path = Path(tempfile.mkdtemp()) / "report.csv"
    path.write_text(f"title\n{title}\n")
    return {"text": "the report", "file": str(path)}


server = MCPServer([hang, cancelled, reverse, weather, Geo(), stats, liar, report], name="spec")

if __name__ == "__main__":
    server.run()
