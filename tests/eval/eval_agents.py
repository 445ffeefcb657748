"""Agent factories for the `plait eval` tests: each talks to the fake server at ``$EVAL_API_BASE``.

Imported by ``plait eval --agent eval_agents:<factory>`` in a subprocess (and by Ray workers),
so every factory is a module-level, zero-argument function.
"""

from __future__ import annotations

import os

from plait.actions import Calculator
from plait.agents import Agent, AgentForInternLM, AsyncAgent, AsyncFunctionCallingAgent, FunctionCallingAgent, ReAct
from plait.llms import GPTAPI, AsyncGPTAPI

SYSTEM = "Answer with the name only."


def _base() -> str:
    return os.environ["EVAL_API_BASE"]


def make_agent() -> Agent:
    """A plain chat agent."""
    return Agent(GPTAPI("fake", api_base=_base(), key=None, max_new_tokens=64), SYSTEM)


def make_async_agent() -> AsyncAgent:
    """The async twin."""
    return AsyncAgent(AsyncGPTAPI("fake", api_base=_base(), key=None, max_new_tokens=64), SYSTEM)


def make_tool_agent() -> FunctionCallingAgent:
    """Native tool calls (Calculator)."""
    return FunctionCallingAgent(GPTAPI("fake", api_base=_base(), key=None), [Calculator()], "Use the calculator.")


def make_async_tool_agent() -> AsyncFunctionCallingAgent:
    """Native tool calls, async."""
    return AsyncFunctionCallingAgent(AsyncGPTAPI("fake", api_base=_base(), key=None), [Calculator()], "Calculate.")


def make_react_agent() -> ReAct:
    """The ReAct text protocol."""
    return ReAct(GPTAPI("fake", api_base=_base(), key=None), [Calculator()])


def make_internlm_agent() -> AgentForInternLM:
    """The InternLM2 plugin protocol."""
    return AgentForInternLM(GPTAPI("fake", api_base=_base(), key=None), plugins=[Calculator()])


def first_word_scorer(output: str, expected: object) -> float:
    """A user scorer: 1.0 when the answer's first word is the expected text, 0.25 otherwise."""
    words = output.split()
    return 1.0 if words and words[0] == expected else 0.25
