"""smolagents: `ToolCallingAgent` + `OpenAIModel` + a `@tool` calculator (sync: one agent per session thread).

The agent ends a run by calling its ``final_answer`` tool, which the fake server does on the second turn.
"""

from __future__ import annotations

import threading
from typing import Any

from _driver import QUESTION, Stack, calculate, main


def load() -> type[Stack]:
    from smolagents import LogLevel, OpenAIModel, ToolCallingAgent, tool

    @tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: The expression, such as "37 * 91".
        """
        return calculate(expression)

    class Smolagents(Stack):
        async def start(self, base_url: str) -> None:
            self.model = OpenAIModel(model_id="m", api_base=base_url, api_key="EMPTY")
            self.local = threading.local()

        def run(self, session_id: int) -> Any:
            agent = getattr(self.local, "agent", None)
            if agent is None:  # one agent per thread, reset by each run (its memory is the session)
                agent = self.local.agent = ToolCallingAgent(
                    tools=[calculator], model=self.model, max_steps=3, verbosity_level=LogLevel.OFF
                )
            return agent.run(QUESTION)

    return Smolagents


if __name__ == "__main__":
    main(load)
