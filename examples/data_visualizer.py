"""Seed 000's DataVisualizer: a researcher searches the web (Bing), a charter plots with Python.

Needs a Bing Web Search key in ``BING_SEARCH_API_KEY``. Usage: ``python examples/data_visualizer.py``
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from common import make_llm

from plait.actions import ActionExecutor
from plait.actions.ipython_interpreter import IPythonInterpreter
from plait.actions.web_browser import WebBrowser
from plait.agents import Agent
from plait.agents.aggregator import InternLMToolAggregator
from plait.agents.stream import get_plugin_prompt
from plait.hooks import InternLMActionProcessor
from plait.prompts.parsers import ToolParser
from plait.schema import AgentMessage

TOOL_TEMPLATE = (
    "You are a helpful AI assistant, collaborating with other assistants. Use the provided tools to progress"
    " towards answering the question. If you are unable to fully answer, that's OK, another assistant with"
    " different tools will help where you left off. Execute what you can to make progress. If you or any of"
    " the other assistants have the final answer or deliverable, prefix your response with {finish_pattern}"
    " so the team knows to stop. You have access to the following tools:\n{tool_description}\nPlease provide"
    " your thought process when you need to use a tool, followed by the call statement in this format:"
    "\n{invocation_format}\\\\n**{system_prompt}**"
)


class DataVisualizer(Agent):
    """The seed's class; the model and the browser's endpoint are parameters here."""

    def __init__(self, llm: Any, browser: WebBrowser, research_prompt: str, chart_prompt: str,
                 finish_pattern: str = "Final Answer", max_turn: int = 10) -> None:  # fmt: skip
        super().__init__()
        interpreter = IPythonInterpreter()
        self.researcher = Agent(
            llm,
            TOOL_TEMPLATE.format(
                finish_pattern=finish_pattern,
                tool_description=get_plugin_prompt(browser),
                invocation_format='```json\n{"name": {{tool name}}, "parameters": {{keyword arguments}}}\n```\n',
                system_prompt=research_prompt,
            ),
            output_format=ToolParser(
                "browser", begin="```json\n", end="\n```\n", validate=lambda x: json.loads(x.rstrip("`"))
            ),
            aggregator=InternLMToolAggregator(),
            name="researcher",
        )
        self.charter = Agent(
            llm,
            TOOL_TEMPLATE.format(
                finish_pattern=finish_pattern,
                tool_description=interpreter.name,
                invocation_format="```python\n{{code}}\n```\n",
                system_prompt=chart_prompt,
            ),
            output_format=ToolParser(
                "interpreter", begin="```python\n", end="\n```\n", validate=lambda x: x.rstrip("`")
            ),
            aggregator=InternLMToolAggregator(),
            name="charter",
        )
        self.executor = ActionExecutor([interpreter, browser], hooks=[InternLMActionProcessor()])
        self.finish_pattern = finish_pattern
        self.max_turn = max_turn

    def forward(self, message: Any, session_id: Any = 0) -> Any:
        for _ in range(self.max_turn):
            message = self.researcher(message, session_id=session_id, stop_words=["```\n", "```python"])
            while message.formatted["tool_type"]:
                message = self.executor(message, session_id=session_id)
                message = self.researcher(message, session_id=session_id, stop_words=["```\n", "```python"])
            if self.finish_pattern in message.content:
                return message
            message = self.charter(message)
            while message.formatted["tool_type"]:
                message = self.executor(message, session_id=session_id)
                message = self.charter(message, session_id=session_id)
            if self.finish_pattern in message.content:
                return message
        return message


def main(llm: Any = None, browser: WebBrowser | None = None) -> AgentMessage:
    llm = llm or make_llm(max_new_tokens=1024, stop_words=["```\n"])
    browser = browser or WebBrowser("BingSearch", api_key=os.environ.get("BING_SEARCH_API_KEY"))
    visualizer = DataVisualizer(
        llm,
        browser,
        research_prompt="You should provide accurate data for the chart generator to use.",
        chart_prompt="Any charts you display will be visible by the user.",
    )
    question = "Fetch the China's GDP over the past 5 years, then draw a line graph of it. Once you code it up, finish."
    bot_msg = visualizer(AgentMessage(sender="user", content=question))
    sys.stdout.write(f"{bot_msg.content}\n")
    with open("visualizer.json", "w", encoding="utf-8") as f:
        json.dump(visualizer.state_dict(), f, ensure_ascii=False, indent=4)
    return bot_msg


if __name__ == "__main__":
    main()
