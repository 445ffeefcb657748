"""pydantic-ai: `Agent` + `OpenAIChatModel` (an `OpenAIProvider` at the fake server) + a plain-function tool."""

from __future__ import annotations

from typing import Any

from _driver import QUESTION, Stack, calculate, main


def load() -> type[Stack]:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression such as "37 * 91"."""
        return calculate(expression)

    class PydanticAI(Stack):
        async def start(self, base_url: str) -> None:
            model = OpenAIChatModel("m", provider=OpenAIProvider(base_url=base_url, api_key="EMPTY"))
            self.agent = Agent(model, tools=[calculator])

        async def run(self, session_id: int) -> Any:
            result = await self.agent.run(QUESTION)
            return result.output

    return PydanticAI


if __name__ == "__main__":
    main(load)
