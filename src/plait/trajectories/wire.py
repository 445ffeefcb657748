"""What a chat-completions reply says, for a trajectory: the assistant message and its exact tokens.

`ReplyReader` reads a whole reply (`ReplyReader.whole`) or a stream's chunks
(`ReplyReader.chunk`, one decoded SSE event each) and gives the assistant message of the
first choice and, when the server sent them, its tokens as `TurnTokens`:

* **vLLM** (``return_token_ids: true`` in the request): ``prompt_token_ids`` at the top of
  the reply (a stream's first chunk) and ``token_ids`` in each choice (a stream's chunks hold
  each delta's ids).
* **llama.cpp's server** (``logprobs: true``): each ``logprobs.content`` item carries the
  sampled token's ``id`` beside its ``logprob``.
* **vLLM's** ``return_tokens_as_token_ids``: a ``logprobs.content`` item's ``token`` reads
  ``"token_id:ID"``.

Log-probabilities come from ``logprobs.content[].logprob`` when there is one per sampled
token. Anything malformed (a float for an id, lengths that disagree) gives no tokens, never
an error: the trajectory is text only.

`ask_for_tokens` adds the request fields that ask for them (``plait record-proxy --tokens``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .record import TurnTokens

__all__ = ["ReplyReader", "ask_for_tokens"]

_TOKEN_ID = "token_id:"


def ask_for_tokens(body: dict[str, Any]) -> dict[str, Any]:
    """`body` asking the server for the reply's tokens: ``logprobs`` (llama.cpp, vLLM) and ``return_token_ids`` (vLLM).

    Fields the client set itself are kept as it set them.
    """
    asked = dict(body)
    asked.setdefault("logprobs", True)
    asked.setdefault("return_token_ids", True)
    return asked


def _ids(value: object) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(item, int) and not isinstance(item, bool) for item in value):
        return [int(item) for item in value]
    return None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


class ReplyReader:
    """Reads one reply's first choice: the assistant message, and its tokens when the server sent them."""

    def __init__(self) -> None:
        self.prompt_ids: list[int] | None = None
        self.token_ids: list[int] | None = None
        self.logprob_items: list[object] = []
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.message: dict[str, Any] | None = None
        self.finished = False
        self.broken = False  # token fields that could not be read: the turn is text only

    # -- reading ------------------------------------------------------------------------------
    def whole(self, reply: object) -> None:
        """Read a whole (non-streaming) reply body, decoded."""
        reply = _mapping(reply)
        choice = self._first_choice(reply)
        message = _mapping(choice.get("message"))
        if message:
            self.message = self._clean(message)
            self.finished = True
        self._tokens(reply, choice)

    def chunk(self, event: object) -> None:
        """Read one decoded stream chunk."""
        event = _mapping(event)
        choice = self._first_choice(event)
        delta = _mapping(choice.get("delta"))
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        thought = delta.get("reasoning_content", delta.get("reasoning"))
        if isinstance(thought, str):
            self.reasoning.append(thought)
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            self._call_delta(_mapping(call))
        if choice.get("finish_reason"):
            self.finished = True
        self._tokens(event, choice)

    def _call_delta(self, call: Mapping[str, Any]) -> None:
        index = call.get("index", len(self.calls))
        if not isinstance(index, int):
            return
        entry = self.calls.setdefault(
            index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if isinstance(call.get("id"), str):
            entry["id"] = call["id"]
        function = _mapping(call.get("function"))
        if isinstance(function.get("name"), str):
            entry["function"]["name"] += function["name"]
        if isinstance(function.get("arguments"), str):
            entry["function"]["arguments"] += function["arguments"]

    @staticmethod
    def _first_choice(reply: Mapping[str, Any]) -> Mapping[str, Any]:
        choices = reply.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                if isinstance(choice, Mapping) and choice.get("index", 0) == 0:
                    return choice
        return {}

    def _tokens(self, reply: Mapping[str, Any], choice: Mapping[str, Any]) -> None:
        if "prompt_token_ids" in reply and reply["prompt_token_ids"] is not None:
            self.prompt_ids = _ids(reply["prompt_token_ids"])
            self.broken |= self.prompt_ids is None
        if "token_ids" in choice and choice["token_ids"] is not None:
            ids = _ids(choice["token_ids"])
            if ids is None:
                self.broken = True
            else:
                self.token_ids = (self.token_ids or []) + ids
        content = _mapping(choice.get("logprobs")).get("content")
        if isinstance(content, list):
            self.logprob_items.extend(content)

    @staticmethod
    def _clean(message: Mapping[str, Any]) -> dict[str, Any]:
        """The assistant message as a trainer reads it (the fields of the OpenAI format only)."""
        clean: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        thought = message.get("reasoning_content", message.get("reasoning"))
        if isinstance(thought, str) and thought:
            clean["reasoning_content"] = thought
        if message.get("tool_calls"):
            clean["tool_calls"] = message["tool_calls"]
        return clean

    # -- results --------------------------------------------------------------------------------
    def assistant(self) -> dict[str, Any] | None:
        """The assistant message of the first choice (None: the reply held none)."""
        if self.message is not None:
            return self.message
        if not (self.content or self.reasoning or self.calls):
            return None
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [self.calls[index] for index in sorted(self.calls)]
        return message

    def tokens(self) -> TurnTokens | None:
        """The reply's exact tokens, or None (the server sent none, or sent them malformed)."""
        if self.broken:
            return None
        logprobs: list[float] = []
        from_items: list[int] = []
        every_logprob = every_id = True
        for item in map(_mapping, self.logprob_items):
            value = item.get("logprob")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                logprobs.append(float(value))
            else:
                every_logprob = False
            found = self._item_id(item)
            if found is None:
                every_id = False
            else:
                from_items.append(found)
        completion = self.token_ids if self.token_ids is not None else (from_items if every_id else None)
        if not completion:
            return None
        kept = logprobs if every_logprob and len(logprobs) == len(completion) else None
        return TurnTokens(message=0, prompt_ids=self.prompt_ids, completion_ids=completion, logprobs=kept)

    @staticmethod
    def _item_id(item: Mapping[str, Any]) -> int | None:
        """The id a ``logprobs.content`` item names (llama.cpp's ``id``, vLLM's ``token_id:N``), or None."""
        found = _ids([item.get("id")])
        if found is not None:
            return found[0]
        token = item.get("token")
        if isinstance(token, str) and token.startswith(_TOKEN_ID) and token[len(_TOKEN_ID) :].isdigit():
            return int(token[len(_TOKEN_ID) :])
        return None
