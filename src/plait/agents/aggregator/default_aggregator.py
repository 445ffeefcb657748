"""`DefaultAggregator`: memory -> OpenAI-style chat messages."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...exceptions import UserError
from ...memory import Memory
from ...schema import ActionReturn, ActionStatusCode, AgentMessage

__all__ = ["DefaultAggregator", "content_to_text", "with_reasoning"]


def content_to_text(content: Any) -> str:
    """Render message content as text for a model: tool results by their text, data as JSON."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, ActionReturn):
        if content.state == ActionStatusCode.SUCCESS:
            return content.format_result()
        return content.errmsg or f"tool {content.type} failed with state {content.state}"
    if dataclasses.is_dataclass(content) and not isinstance(content, type):
        content = dataclasses.asdict(content)
    if isinstance(content, (Mapping, list, tuple)):
        return json.dumps(content, ensure_ascii=False, default=str)
    return str(content)


def with_reasoning(message: AgentMessage, turn: dict[str, object]) -> dict[str, object]:
    """`turn` (the chat message of `message`) with its reasoning under ``'reasoning'``, when it has some.

    The model's client decides whether the reasoning goes back and how (its profile's
    ``reasoning_replay``); it never joins the content here.
    """
    if message.reasoning is not None:
        turn["reasoning"] = message.reasoning.to_wire()
    return turn


class DefaultAggregator:
    """Builds the model's messages: system instruction, then the session's messages.

    Messages the agent itself sent become ``assistant`` turns; everything else is ``user``,
    and consecutive user turns are joined with a newline. A parser's non-empty
    `format_instruction()` is added as a system message after the instruction.
    """

    def aggregate(
        self,
        messages: Memory,
        name: str,
        parser: object = None,
        system_instruction: object = None,
    ) -> list[dict[str, object]]:
        """Turn a session's memory into chat messages for the agent called `name`: `preamble`, then `turns`."""
        return self.preamble(parser, system_instruction) + self.turns(messages.get_memory(), name, parser)

    def turns(self, messages: Sequence[AgentMessage], name: str, parser: object = None) -> list[dict[str, object]]:
        """The conversation's messages as chat messages (subclasses render tool turns their way)."""
        result: list[dict[str, object]] = []
        for message in messages:
            text = content_to_text(message.content)
            if message.sender == name:
                result.append(with_reasoning(message, {"role": "assistant", "content": text}))
            elif result and result[-1]["role"] == "user":
                result[-1] = {"role": "user", "content": f"{result[-1]['content']}\n{text}"}
            else:
                result.append({"role": "user", "content": text})
        return result

    def preamble(self, parser: object, system_instruction: object) -> list[dict[str, object]]:
        """The system messages that open every prompt: the instruction, then the parser's instructions."""
        result = self.aggregate_system_instruction(system_instruction) if system_instruction else []
        return result + self.parser_instruction(parser)

    def parser_instruction(self, parser: object) -> list[dict[str, object]]:
        """The parser's `format_instruction()` as system messages (none when it is empty)."""
        format_instruction = getattr(parser, "format_instruction", None)
        if parser is None or not callable(format_instruction):
            return []
        instruction = format_instruction()
        return self.aggregate_system_instruction(instruction) if instruction else []

    @staticmethod
    def aggregate_system_instruction(system_instruction: Any) -> list[dict[str, object]]:
        """Normalise a system instruction (str, dict, list of dicts, or `PromptTemplate`) to messages."""
        if isinstance(system_instruction, str):
            return [{"role": "system", "content": system_instruction}]
        if isinstance(system_instruction, Mapping):
            if "role" not in system_instruction or "content" not in system_instruction:
                raise UserError(f"a system instruction dict needs 'role' and 'content', got {dict(system_instruction)}")
            return [dict(system_instruction)]
        if isinstance(system_instruction, Sequence):
            result: list[dict[str, object]] = []
            for item in system_instruction:
                result.extend(DefaultAggregator.aggregate_system_instruction(item))
            return result
        if hasattr(system_instruction, "format"):
            return [{"role": "system", "content": system_instruction.format()}]
        raise UserError(f"unsupported system instruction type {type(system_instruction).__name__}")

    # The seed's spelling, kept for code written against it.
    aggregate_system_intruction = aggregate_system_instruction
