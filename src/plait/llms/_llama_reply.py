"""Decoding what the llama.cpp engine answers (private): OpenAI-shaped JSON results to text, usage, errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias

from ..exceptions import LLMError, LLMResponseError
from ..schema import Reasoning
from ._decoded import json_object
from ._llama_engine import prompt_token_ids
from ._reasoning_wire import ReasoningStream
from .profiles import ThinkTags
from .response import ModelResponse, TurnTokenIds, Usage

__all__ = [
    "OnText",
    "Result",
    "Stopped",
    "StreamState",
    "answer_reporter",
    "checked",
    "choice_text",
    "finish_reason_of",
    "first_choice",
    "plain_response",
    "reasoning_of",
    "sampled_tokens",
    "turn_tokens",
    "usage_of",
]

Result: TypeAlias = Mapping[str, object]
"""An engine result: a decoded OpenAI-shaped JSON object."""


def usage_of(data: object) -> Usage | None:
    if not isinstance(data, Mapping):
        return None
    return Usage(
        prompt_tokens=int(data.get("prompt_tokens") or 0),
        completion_tokens=int(data.get("completion_tokens") or 0),
        total_tokens=int(data.get("total_tokens") or 0),
    )


def first_choice(result: object) -> Mapping[str, object]:
    """The first choice of an engine result; raises `LLMError` for an error body."""
    if isinstance(result, Mapping):
        choices = result.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            return choices[0]
        error = result.get("error", result if "message" in result else None)
        if error is not None:
            message = error.get("message", error) if isinstance(error, Mapping) else error
            raise LLMError(f"llama.cpp failed: {message}")
    raise LLMResponseError(f"llama.cpp returned a result without choices: {result!r:.300}")


def checked(result: object) -> Result:
    """`result` once `first_choice` found its first choice (it raises for an error body)."""
    first_choice(result)
    return json_object(result)


def choice_text(choice: Mapping[str, object]) -> str:
    if "message" in choice:
        return str(json_object(choice["message"] or {}).get("content") or "")
    if "delta" in choice:
        return str(json_object(choice["delta"] or {}).get("content") or "")
    return str(choice.get("text") or "")


def finish_reason_of(choice: Mapping[str, object]) -> str | None:
    reason = choice.get("finish_reason")
    return None if reason is None else str(reason)


OnText = Callable[[str], None]


def answer_reporter(on_text: OnText, answer_so_far: Callable[[str], str | None]) -> OnText:
    """Turns constrained reply texts into the answer texts they hold so far (each new one reported once)."""
    last = [""]

    def report(reply: str) -> None:
        answer = answer_so_far(reply)
        if answer and answer != last[0]:
            last[0] = answer
            on_text(answer)

    return report


class Stopped(Exception):
    """An engine call stopped because its caller left (its ``cancel`` was set); nobody sees it."""


def reasoning_of(choice: Mapping[str, object]) -> Reasoning | None:
    """The reasoning `StreamState.result` put in a choice's message (None: the reply had none)."""
    message = choice.get("message")
    text = message.get("reasoning_content") if isinstance(message, Mapping) else None
    return Reasoning(text) if isinstance(text, str) and text else None


def plain_response(result: Result, finish: Callable[[str], str]) -> ModelResponse:
    """A plain (tool-free) reply's `ModelResponse` from an engine result; `finish` applies the stop words to its text.

    Its ``finish_reason`` is the engine's (``'stop'``, ``'length'``), or ``'repetition'`` when
    the repetition guard stopped the generation (`plait.llms._repetition.REPETITION`).
    """
    choice = first_choice(result)
    usage = usage_of(result.get("usage"))
    return ModelResponse(finish(choice_text(choice)), [], finish_reason_of(choice), usage, result, reasoning_of(choice))


class StreamState:
    """Folds the engine's stream chunks into cumulative `StreamItem`s (or one whole result).

    A thinking model's reasoning is split from the text as `GPTAPI` splits a server's reply
    (`plait.llms._reasoning_wire.ReasoningStream`): inline ``<think>`` blocks (or a
    ``reasoning_content`` the engine parsed itself) never show in `text`.

    Args:
        think: How inline think tags are read (the model's `plait.llms.profiles.ModelProfile.think_tags`).

    Attributes:
        text: The visible reply so far (think blocks held back and removed).
        raw: The reply's content as the engine made it.
    """

    def __init__(self, think: ThinkTags = "closed") -> None:
        self._split = ReasoningStream(think)
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.meta: dict[str, object] = {}  # the last chunk's other fields (id, model, usage, timings...)
        self.token_ids: list[int] = []  # the sampled tokens, when the request asked for logprobs
        self.logprobs: list[float] = []

    @property
    def text(self) -> str:
        return self._split.content

    @property
    def raw(self) -> str:
        return self._split.raw

    @property
    def reasoning(self) -> Reasoning | None:
        """The reasoning so far (None: none yet), a stream item's extra."""
        text = self._split.reasoning
        return Reasoning(text) if text else None

    def finish(self) -> str:
        """End of the reply: the text held back (a partial tag) is shown; returns the whole `text`."""
        self._split.finish()
        return self.text

    def feed(self, chunk: object) -> bool:
        """Take one chunk; True when it added text or reasoning."""
        if isinstance(chunk, Mapping):
            self.meta.update((key, value) for key, value in chunk.items() if key not in ("choices", "object"))
            if chunk.get("usage"):
                self.usage = usage_of(chunk["usage"])
            if chunk.get("choices") == []:
                return False
        choice = first_choice(chunk)
        self.finish_reason = finish_reason_of(choice) or self.finish_reason
        self._take_logprobs(choice.get("logprobs"))
        part = choice.get("delta", choice.get("message"))
        return self._split.feed(part if isinstance(part, Mapping) else {}, choice_text(choice))

    def _take_logprobs(self, logprobs: object) -> None:
        """Keep each sampled token's id and log-probability (the OpenAI ``logprobs.content`` llama.cpp sends)."""
        content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
        for item in content if isinstance(content, list) else []:
            if isinstance(item, Mapping) and isinstance(item.get("id"), int):
                self.token_ids.append(item["id"])
                logprob = item.get("logprob")
                self.logprobs.append(float(logprob) if isinstance(logprob, (int, float)) else 0.0)

    def result(self) -> Result:
        """The whole reply, shaped as the engine's non-streamed chat result (with ``logprobs`` when it sent them).

        Its content is the visible reply; the reasoning, when there was some, is the
        message's ``reasoning_content`` (`reasoning_of`).
        """
        self.finish()
        reasoning, content = self._split.result()
        message = {"role": "assistant", "content": content}
        if reasoning is not None and reasoning.text:
            message["reasoning_content"] = reasoning.text
        choice: dict[str, object] = {"index": 0, "message": message, "finish_reason": self.finish_reason}
        if self.token_ids:
            pairs = zip(self.token_ids, self.logprobs, strict=True)
            choice["logprobs"] = {"content": [{"id": i, "logprob": p} for i, p in pairs]}
        return {**self.meta, "choices": [choice], "usage": self.meta.get("usage")}


def turn_tokens(
    base_url: str, prompt: str | Sequence[Mapping[str, object]], choice: Mapping[str, object], usage: Usage | None
) -> TurnTokenIds | None:
    """A turn's exact tokens: the prompt's ids (the engine's own rendering) and the sampled ids with their logprobs.

    None when the engine sent no sampled tokens (the request did not ask for ``logprobs``). The
    prompt's ids are left out (None) when the engine cannot give them or their count is not
    the prompt tokens it reported (tools rendered into the prompt by a tool protocol).
    """
    sampled = sampled_tokens(choice)
    if sampled is None:
        return None
    try:
        prompt_ids: list[int] | None = prompt_token_ids(base_url, prompt)
    except LLMError:
        prompt_ids = None
    if prompt_ids is not None and usage is not None and usage.prompt_tokens != len(prompt_ids):
        prompt_ids = None
    return TurnTokenIds(prompt_ids, *sampled)


def sampled_tokens(choice: Mapping[str, object]) -> tuple[list[int], list[float]] | None:
    """The sampled token ids and log-probabilities of a result's choice (None: the engine sent none)."""
    state = StreamState()
    state._take_logprobs(choice.get("logprobs"))
    return (state.token_ids, state.logprobs) if state.token_ids else None
