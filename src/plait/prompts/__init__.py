"""Prompt templates and output formats (parsers)."""

from . import parsers
from .parsers import *  # noqa: F403 - the output formats, listed once in `plait.prompts.parsers`
from .prompt_template import PromptTemplate

__all__ = ["PromptTemplate"]
__all__ += parsers.__all__
__all__.sort()
