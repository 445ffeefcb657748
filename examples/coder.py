"""Seed 000's Coder: a math agent that solves problems by writing Python (run in an isolated interpreter).

Usage: ``python examples/coder.py "What is the sum of the first 100 primes?"``
"""

from __future__ import annotations

import sys
from typing import Any

from common import make_llm

from plait.actions import ActionExecutor, IPythonInteractive
from plait.agents import Agent
from plait.agents.aggregator import InternLMToolAggregator
from plait.hooks import Hook
from plait.prompts.parsers import ToolParser
from plait.schema import ActionReturn, ActionStatusCode, AgentMessage


class CodeProcessor(Hook):
    """Turns the parsed code block into an interpreter call, and its result into text."""

    def before_action(self, executor: Any, message: AgentMessage, session_id: Any) -> AgentMessage:
        message = message.copy(deep=True)
        message.content = {"name": "IPythonInteractive", "parameters": {"command": message.formatted["action"]}}
        return message

    def after_action(self, executor: Any, message: AgentMessage, session_id: Any) -> AgentMessage:
        result = message.content
        if isinstance(result, ActionReturn):
            message.content = result.format_result() if result.state == ActionStatusCode.SUCCESS else result.errmsg
        return message


class Coder(Agent):
    def __init__(self, llm: Any, system_prompt: str, max_turn: int = 3) -> None:
        super().__init__()
        llm.gen_params["stop_words"].append("\n```\n")
        self.agent = Agent(
            llm,
            system_prompt,
            output_format=ToolParser(tool_type="code interpreter", begin="```python\n", end="\n```\n"),
            aggregator=InternLMToolAggregator(),
        )
        self.executor = ActionExecutor([IPythonInteractive()], hooks=[CodeProcessor()])
        self.max_turn = max_turn

    def forward(self, message: AgentMessage, session_id: Any = 0) -> AgentMessage:
        for _ in range(self.max_turn):
            message = self.agent(message, session_id=session_id)
            if message.formatted["tool_type"] is None:
                return message
            message = self.executor(message, session_id=session_id)
        return message


def main(question: str, llm: Any = None) -> Coder:
    coder = Coder(
        llm or make_llm(max_new_tokens=512, temperature=0.0), "Solve the problem step by step with Python code."
    )
    answer = coder(AgentMessage(sender="user", content=question))
    sys.stdout.write(f"{answer.content}\n")
    for message in coder.state_dict()["agent.memory"]:
        sys.stdout.write(f"--- {message['sender']}:\n{message['content']}\n")
    return coder


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "What is 2**100 modulo 17?")
