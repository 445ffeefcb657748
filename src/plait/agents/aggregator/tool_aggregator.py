"""`InternLMToolAggregator`: memory with tool calls and tool results -> chat messages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...prompts.parsers import ToolStatusCode
from ...schema import AgentMessage
from .default_aggregator import DefaultAggregator, content_to_text

__all__ = ["InternLMToolAggregator"]


class InternLMToolAggregator(DefaultAggregator):
    """Aggregator for agents whose replies are parsed by a tool parser (`ToolParser` and friends).

    The agent's own turns are re-rendered with ``parser.format_response(formatted)`` so the
    model sees its tool calls in canonical form (a reply whose parse failed is shown as it
    was written, so the model can see its mistake); messages from `user_names` are user
    turns; anything else (tool results) goes in as `environment_role`, wrapped in
    `environment_begin` / `environment_end` and named after the last tool type.

    Args:
        environment_role: Role of tool-result turns (``'environment'``; ``'system'`` or
            ``'user'`` for APIs that know only the standard roles).
        environment_begin: Text before each tool result.
        environment_end: Text after each tool result.
        user_names: Senders treated as the user (default ``['user']``).
        few_shot: Example dialogues (lists of role dicts) placed before the memory. Roles
            ``thought`` / ``language`` followed by ``tool`` are rendered through the parser.
    """

    def __init__(
        self,
        environment_role: str = "environment",
        environment_begin: str = "",
        environment_end: str = "",
        user_names: Sequence[str] | None = None,
        few_shot: Sequence[Sequence[dict[str, object]]] | None = None,
    ) -> None:
        self.environment_role = environment_role
        self.environment_begin = environment_begin
        self.environment_end = environment_end
        self.user_names = list(user_names or ["user"])
        self.few_shot = [list(dialogue) for dialogue in few_shot or []]

    def turns(self, messages: Sequence[AgentMessage], name: str, parser: object = None) -> list[dict[str, object]]:
        """The few-shot dialogues, then the conversation (with tool turns) as chat messages for the agent `name`."""
        result: list[dict[str, object]] = []
        for dialogue in self.few_shot:
            result.extend(self._few_shot_turns(dialogue, parser))
        tool_type: str | None = None
        for message in messages:
            if message.sender == name:
                formatted = message.formatted
                if isinstance(formatted, dict) and "tool_type" in formatted:
                    tool_type = formatted.get("tool_type") or tool_type
                result.append({"role": "assistant", "content": self._own_text(message.content, formatted, parser)})
            elif message.sender in self.user_names:
                result.append({"role": "user", "content": content_to_text(message.content)})
            else:
                result.append(self._environment(content_to_text(message.content), tool_type))
        return result

    def parser_instruction(self, parser: Any) -> list[dict[str, object]]:
        """The parser's instructions as system messages, named after its tool type."""
        messages = super().parser_instruction(parser)
        tool_type = getattr(parser, "tool_type", None)
        if tool_type and len(messages) == 1 and isinstance(parser.format_instruction(), str):
            return [{**messages[0], "name": tool_type}]
        return messages

    def _environment(self, text: str, tool_type: str | None) -> dict[str, object]:
        message: dict[str, object] = {
            "role": self.environment_role,
            "content": f"{self.environment_begin}{text}{self.environment_end}",
        }
        return {**message, "name": tool_type} if tool_type else message

    @staticmethod
    def _own_text(content: Any, formatted: Any, parser: Any) -> str:
        if (
            parser is None
            or not isinstance(formatted, dict)
            or formatted.get("status") == ToolStatusCode.PARSING_ERROR
            or not hasattr(parser, "format_response")
        ):
            return content_to_text(content)
        return str(parser.format_response(formatted))

    def _few_shot_turns(self, dialogue: list[dict[str, object]], parser: Any) -> list[dict[str, object]]:
        turns: list[dict[str, object]] = []
        pending_thought: str | None = None
        for item in dialogue:
            role = item["role"]
            if role in ("thought", "language"):
                if pending_thought is not None:
                    turns.append({"role": "assistant", "content": pending_thought})
                pending_thought = None if item["content"] is None else content_to_text(item["content"])
            elif role == "tool":
                call = {
                    "tool_type": item.get("name"),
                    "thought": pending_thought or "",
                    "action": item["content"],
                    "status": ToolStatusCode.VALID_TOOL,
                }
                text = parser.format_response(call) if parser is not None else content_to_text(item["content"])
                turns.append({"role": "assistant", "content": text})
                pending_thought = None
            else:
                if pending_thought is not None:
                    turns.append({"role": "assistant", "content": pending_thought})
                    pending_thought = None
                if role == "environment":
                    name = item.get("name")
                    turns.append(self._environment(content_to_text(item["content"]), str(name) if name else None))
                else:
                    turns.append(dict(item))
        if pending_thought is not None:
            turns.append({"role": "assistant", "content": pending_thought})
        return turns
