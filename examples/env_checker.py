"""Seed 001's EnvChecker: a tool that reports the deep-learning environment, used by an agent.

Usage: ``python examples/env_checker.py``
"""

from __future__ import annotations

import platform
import sys
from typing import Any

from common import make_llm

from plait.actions.base_action import BaseAction, tool_api
from plait.agents import FunctionCallingAgent


class EnvChecker(BaseAction):
    """Checks the deep-learning environment (PyTorch, CUDA, system)."""

    @tool_api
    def check_torch_env(self) -> dict[str, str]:
        """Report PyTorch, CUDA and system information."""
        lines = [f"python: {sys.version.split()[0]}", f"os: {platform.platform()}"]
        try:
            import torch

            lines += [f"torch: {torch.__version__}", f"cuda available: {torch.cuda.is_available()}"]
        except ImportError:
            lines.append("torch: not installed")
        return {"text": "\n".join(lines)}


def main(llm: Any = None) -> str:
    agent = FunctionCallingAgent(llm or make_llm(temperature=0.0), [EnvChecker()], "You diagnose environments.")
    reply = agent("Is PyTorch installed here, and is CUDA available?")
    sys.stdout.write(f"{reply.content}\n")
    return str(reply.content)


if __name__ == "__main__":
    main()
