"""Aggregators: turn a session's memory into the messages a model receives."""

from .default_aggregator import DefaultAggregator
from .tool_aggregator import InternLMToolAggregator

__all__ = ["DefaultAggregator", "InternLMToolAggregator"]
