"""The agent `capitals.jsonl` is evaluated with: ``plait eval capitals.jsonl --agent capitals_agent:make_agent``.

A native function-calling agent with the Calculator tool, on the model the environment names
as the ``plait`` command reads it: ``$PLAIT_API_BASE`` (an OpenAI-compatible server; model
``$PLAIT_MODEL``, key ``$OPENAI_API_KEY``), else the embedded local model.

```bash
cd examples/eval
plait eval capitals.jsonl --agent capitals_agent:make_agent --out runs/capitals --concurrency 8
plait export runs/capitals -o train.jsonl --only-passed
```
"""

from __future__ import annotations

import os

from plait import Calculator, FunctionCallingAgent
from plait.cli import build_llm

SYSTEM = "Answer briefly. Use the calculator for arithmetic; name only the city for a capital."


def make_agent() -> FunctionCallingAgent:
    """A fresh agent: `plait eval` calls this once and runs every case on it, each in its own session."""
    llm = build_llm(
        os.environ.get("PLAIT_MODEL"),
        os.environ.get("PLAIT_API_BASE"),
        os.environ.get("OPENAI_API_KEY"),
        temperature=0,
        max_new_tokens=64,
    )
    return FunctionCallingAgent(llm, [Calculator()], SYSTEM, max_turn=3)
