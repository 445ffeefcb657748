"""Composition B, as a Lagent v1.0 user writes it, on plait or on Lagent 0.5 (the same code, ``package`` option).

An outer `AsyncAgent` loops an inner `AsyncAgent` (`AsyncGPTAPI`, a `ToolParser` for
InternLM2's plugin tokens, `InternLMToolAggregator`) and an `AsyncActionExecutor` with
`InternLMActionProcessor` (the README's DataVisualizer pattern, async). The model calls the
tool in text, so the request carries no ``tools``.
"""

from __future__ import annotations

import json
from typing import Any

from _driver import EXPRESSION, QUESTION, Stack, calculate, main

# No newline after the end token: Lagent's GPTAPI strips the reply, and its ToolParser splits on `end` as given.
BEGIN, END = "<|action_start|><|plugin|>\n", "<|action_end|>"
TEMPLATE = (
    "You are a helpful assistant. You can call these tools:\n{tools}\n"
    'To call one, write {begin}{{"name": <tool name>, "parameters": <arguments>}}{end}'
)


def plugin_call_text() -> str:
    """The model's first reply: a Calculator call in the plugin format (what the fake server answers)."""
    return (
        "I will use the calculator."
        + BEGIN
        + json.dumps({"name": "Calculator", "parameters": {"expression": EXPRESSION}})
        + END
    )


def load(package: str = "plait") -> Any:
    import importlib

    agents = importlib.import_module(f"{package}.agents")
    llms = importlib.import_module(f"{package}.llms")
    actions = importlib.import_module(f"{package}.actions")
    aggregator = importlib.import_module(f"{package}.agents.aggregator")
    parsers = importlib.import_module(f"{package}.prompts.parsers")
    hooks = importlib.import_module(f"{package}.hooks")
    schema = importlib.import_module(f"{package}.schema")
    get_plugin_prompt = importlib.import_module(f"{package}.agents.stream").get_plugin_prompt

    class Calculator(actions.AsyncActionMixin, actions.BaseAction):
        """Evaluate arithmetic."""

        @actions.tool_api
        async def run(self, expression: str) -> str:
            """Evaluate an arithmetic expression.

            Args:
                expression (str): The expression, such as ``37 * 91``.
            """
            return calculate(expression)

    class CalculatorAgent(agents.AsyncAgent):
        def __init__(self, llm: Any, max_turn: int = 3) -> None:
            super().__init__()
            calculator = Calculator()
            self.agent = agents.AsyncAgent(
                llm,
                TEMPLATE.format(tools=get_plugin_prompt([calculator]), begin=BEGIN, end=END),
                output_format=parsers.ToolParser("plugin", begin=BEGIN, end=END, validate=json.loads),
                aggregator=aggregator.InternLMToolAggregator(),
            )
            self.executor = actions.AsyncActionExecutor([calculator], hooks=[hooks.InternLMActionProcessor()])
            self.max_turn = max_turn

        async def forward(self, message: Any, session_id: int = 0) -> Any:
            for _ in range(self.max_turn):
                message = await self.agent(message, session_id=session_id)
                if message.formatted["tool_type"] is None:
                    return message
                message = await self.executor(message, session_id=session_id)
            return message

    class InternLMText(Stack):
        async def start(self, base_url: str) -> None:
            llm = llms.AsyncGPTAPI("gpt-4o", key="EMPTY", retry=1, api_base=base_url + "/chat/completions")
            self.agent = CalculatorAgent(llm)

        async def run(self, session_id: int) -> Any:
            reply = await self.agent(schema.AgentMessage(sender="user", content=QUESTION), session_id=session_id)
            self.agent.reset(session_id, recursive=True)
            return reply.content

        async def close(self) -> None:
            aclose = getattr(self.agent.agent.llm, "aclose", None)  # Lagent's client has no session to close
            if aclose is not None:
                await aclose()

    return InternLMText


if __name__ == "__main__":
    main(load)
