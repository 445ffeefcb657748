"""LangChain 1.x: `create_agent` (a LangGraph graph) + `ChatOpenAI` + a `@tool` calculator."""

from __future__ import annotations

from typing import Any

from _driver import QUESTION, Stack, calculate, main


def load() -> type[Stack]:
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression such as "37 * 91"."""
        return calculate(expression)

    class LangChain(Stack):
        async def start(self, base_url: str) -> None:
            model = ChatOpenAI(model="m", base_url=base_url, api_key="EMPTY")
            self.agent = create_agent(model, tools=[calculator])

        async def run(self, session_id: int) -> Any:
            state = await self.agent.ainvoke({"messages": [{"role": "user", "content": QUESTION}]})
            return state["messages"][-1].content

    return LangChain


if __name__ == "__main__":
    main(load)
