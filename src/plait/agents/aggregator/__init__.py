"""Aggregators: turn a session's memory into the messages a model receives."""

from .default_aggregator import DefaultAggregator
from .function_call_aggregator import FunctionCallAggregator
from .tool_aggregator import InternLMToolAggregator

__all__ = ["DefaultAggregator", "FunctionCallAggregator", "InternLMToolAggregator"]
