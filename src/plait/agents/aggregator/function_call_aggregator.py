"""`FunctionCallAggregator`: memory with native tool calls -> OpenAI chat messages."""

from __future__ import annotations

from collections.abc import Sequence

from ...schema import AgentMessage
from .default_aggregator import DefaultAggregator, content_to_text, with_reasoning

__all__ = ["FunctionCallAggregator"]


class FunctionCallAggregator(DefaultAggregator):
    """Renders native tool calls the way OpenAI-compatible servers expect them.

    The agent's turns that called tools (``formatted['tool_calls']``, a list of
    ``{'id', 'name', 'arguments'}``) become assistant messages with ``tool_calls``; tool
    results (messages whose ``extra_info`` holds a ``tool_call_id``) become ``tool``
    messages; everything else is aggregated as by `DefaultAggregator`. An agent's turn keeps
    its reasoning under ``reasoning`` (`with_reasoning`), for the model to send back per its profile.
    """

    def turns(self, messages: Sequence[AgentMessage], name: str, parser: object = None) -> list[dict[str, object]]:
        """The conversation's messages, tool calls and tool results included."""
        result: list[dict[str, object]] = []
        for message in messages:
            calls = message.formatted.get("tool_calls") if isinstance(message.formatted, dict) else None
            call_id = message.extra_info.get("tool_call_id") if isinstance(message.extra_info, dict) else None
            if message.sender == name and calls:
                result.append(
                    with_reasoning(
                        message,
                        {
                            "role": "assistant",
                            "content": content_to_text(message.content) or None,
                            "tool_calls": [
                                {
                                    "id": call["id"],
                                    "type": "function",
                                    "function": {"name": call["name"], "arguments": call["arguments"]},
                                }
                                for call in calls
                            ],
                        },
                    )
                )
            elif call_id is not None:
                result.append({"role": "tool", "tool_call_id": call_id, "content": content_to_text(message.content)})
            elif message.sender == name:
                result.append(
                    with_reasoning(message, {"role": "assistant", "content": content_to_text(message.content)})
                )
            else:
                result.append({"role": "user", "content": content_to_text(message.content)})
        return result
