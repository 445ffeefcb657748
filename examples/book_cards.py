"""Typed answers: index cards for books, each a validated `Book`, whatever the model.

On the embedded model the answer is decoded under the schema's grammar, so even a 135M
model returns a valid card; on a server it is a strict ``response_format``. A card that does
not validate is sent back with its errors (``output_retries``).

Usage: ``python examples/book_cards.py "The Great Gatsby" "Dune"``
"""

from __future__ import annotations

import sys
from typing import Any

from common import make_llm
from pydantic import BaseModel, Field

from plait.agents import Agent


class Book(BaseModel):
    """One index card."""

    title: str
    author: str
    year: int = Field(description="year of first publication")


def main(titles: list[str], llm: Any = None) -> list[Book]:
    """A card per title (each asked in its own session), printed as they come."""
    agent = Agent(
        llm or make_llm(temperature=0, max_new_tokens=128),
        "You write library index cards for books.",
        output_type=Book,
    )
    cards = []
    for session, title in enumerate(titles):
        card: Book = agent(f"Write the card for {title}.", session_id=session).formatted
        print(f"{card.title} | {card.author} | {card.year}")
        cards.append(card)
    return cards


if __name__ == "__main__":
    main(sys.argv[1:] or ["The Great Gatsby", "Dune"])
