"""Seed 000's AsyncBlogger: a writer and a critic refine blog posts, five topics concurrently.

Usage: ``python examples/async_blogger.py``
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from common import make_llm

from plait.agents import AsyncAgent
from plait.hooks import Hook
from plait.schema import AgentMessage


class PrefixedMessageHook(Hook):
    def __init__(self, prefix: str, senders: list[str] | None = None) -> None:
        self.prefix = prefix
        self.senders = senders or []

    def before_agent(self, agent: Any, messages: list[AgentMessage], session_id: Any) -> None:
        for message in messages:
            if message.sender in self.senders:
                message.content = self.prefix + message.content


class AsyncBlogger(AsyncAgent):
    def __init__(self, llm: Any, writer_prompt: str, critic_prompt: str, critic_prefix: str = "", max_turn: int = 2):
        super().__init__()
        self.writer = AsyncAgent(llm, writer_prompt, name="writer")
        self.critic = AsyncAgent(
            llm, critic_prompt, name="critic", hooks=[PrefixedMessageHook(critic_prefix, ["writer"])]
        )
        self.max_turn = max_turn

    async def forward(self, message: AgentMessage, session_id: Any = 0) -> AgentMessage:
        for _ in range(self.max_turn):
            message = await self.writer(message, session_id=session_id)
            message = await self.critic(message, session_id=session_id)
        return await self.writer(message, session_id=session_id)


async def run(llm: Any = None, topics: tuple[str, ...] = ("AI", "Biotechnology", "New Energy")) -> list[AgentMessage]:
    blogger = AsyncBlogger(
        llm or make_llm(asynchronous=True, max_new_tokens=256),
        writer_prompt="You write short, engaging blog posts. If you get critique, revise your last draft.",
        critic_prompt="Give brief, concrete critique of the writing: length, depth, style.",
        critic_prefix="Reflect and provide critique on the following writing.\n\n",
    )
    prompt = "Write a short blog post on recent updates in {topic}."
    replies = await asyncio.gather(
        *(
            blogger(AgentMessage(sender="user", content=prompt.format(topic=t)), session_id=i)
            for i, t in enumerate(topics)
        )
    )
    return list(replies)


if __name__ == "__main__":
    for reply in asyncio.run(run()):
        sys.stdout.write(f"{reply.content}\n{'-' * 80}\n")
