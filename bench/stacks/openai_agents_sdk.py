"""OpenAI Agents SDK: `Agent` + `OpenAIChatCompletionsModel` (an `AsyncOpenAI` at the fake server) + `@function_tool`.

Tracing is switched off: its exporter would send spans to OpenAI's servers.
"""

from __future__ import annotations

from typing import Any

from _driver import QUESTION, Stack, calculate, main


def load() -> type[Stack]:
    from openai import AsyncOpenAI

    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)

    @function_tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression such as "37 * 91"."""
        return calculate(expression)

    class OpenAIAgents(Stack):
        async def start(self, base_url: str) -> None:
            self.client = AsyncOpenAI(base_url=base_url, api_key="EMPTY")
            model = OpenAIChatCompletionsModel(model="m", openai_client=self.client)
            self.agent = Agent(
                name="calculator", instructions="Answer with the calculator.", model=model, tools=[calculator]
            )

        async def run(self, session_id: int) -> Any:
            result = await Runner.run(self.agent, QUESTION)
            return result.final_output

        async def close(self) -> None:
            await self.client.close()

    return OpenAIAgents


if __name__ == "__main__":
    main(load)
