"""`ToolRouter`: whether a question needs a tool, decided before the model is asked.

Small models called with ``tool_choice='auto'`` call a calculator for greetings and skip it
for sums (SmolLM2-135M: 5 of 10 sums and 3 of 10 small-talk questions right; bench/README.md,
"When the CLI's agent calls its tool"). A function-calling agent built with
``tool_choice='routed'`` asks its router on a run's first model call instead: arithmetic
gets ``'required'`` when a Calculator is offered; anything else gets ``'none'`` when the
Calculator is the only tool, and ``'auto'`` otherwise (the other tools may fit). After a
tool ran, the agent's ``reset_tool_choice`` applies as for any forcing choice. Measured:
8 of 10 sums and 10 of 10 small-talk questions.

`plait run`, `plait chat`, `plait serve` and `plait web` build their agents with
``tool_choice='routed'``; so can you::

    agent = FunctionCallingAgent(llm, [Calculator()], tool_choice='routed')
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

__all__ = ["ROUTED", "ToolRouter"]

ROUTED: Final = "routed"
"""The ``tool_choice`` that lets the agent's `ToolRouter` decide per question."""

_ARITHMETIC = re.compile(
    r"\d\s*(?:[-+*/x×÷^%]|\*\*|times|plus|minus|divided|mod\b)\s*\(?\s*\d"
    r"|\b(?:calculate|compute|multiply|divide|add|subtract|sum|product|square root)\b[^\n]*\d",
    re.IGNORECASE,
)


class ToolRouter:
    """Decides the first model call's ``tool_choice`` from the question and the offered tools."""

    def __call__(self, question: str, tool_names: Sequence[str]) -> str:
        """The tool choice for `question`, given the offered tools' names (``Toolkit.api`` names count by toolkit).

        Returns:
            ``'required'`` for arithmetic when a Calculator is offered; ``'none'`` for anything
            else when the Calculator is the only tool; else ``'auto'``.
        """
        kinds = [name.split(".")[0] for name in tool_names]
        calculator = "Calculator" in kinds
        if calculator and _ARITHMETIC.search(question):
            return "required"
        if calculator and all(kind == "Calculator" for kind in kinds):
            return "none"
        return "auto"

    def __repr__(self) -> str:
        return "ToolRouter()"
