"""The model contract every backend implements, sync and async.

A model takes OpenAI-style messages (``[{'role': ..., 'content': ...}]``) and returns text:

* ``chat(messages, **overrides) -> str``
* ``stream_chat(messages, **overrides)`` yields ``(ModelStatusCode, text_so_far, extra)``;
  the last item has `ModelStatusCode.END`.

Generation parameters live in ``gen_params`` (``max_new_tokens``, ``temperature``,
``top_p``, ``top_k``, ``repetition_penalty``, ``stop_words``); keyword overrides apply to
one call only. ``stop_words`` is always a list, so ``llm.gen_params['stop_words'].append(...)``
works. Raw-completion backends implement ``generate(prompt)`` and get a prompt rendered by
their meta template; chat backends override ``chat`` directly.

`AsyncBaseLLM` has the same surface with coroutines (and an extra ``session_ids`` argument
agents pass along for engines that route by session). Request preparation and response
post-processing (`_prepare`, `_finish`) are shared by both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any, Union

from ..exceptions import UserError
from ..schema import ModelStatusCode

__all__ = ["AsyncBaseLLM", "BaseLLM", "ChatInput", "StreamItem", "filter_suffix"]

Message = Mapping[str, Any]
ChatInput = Union[str, Sequence[Message]]
StreamItem = tuple[ModelStatusCode, str, Any]


def filter_suffix(response: str, suffixes: Iterable[str] | None = None) -> str:
    """Cut `response` at the first occurrence of any stop word (client-side stop)."""
    cut = len(response)
    for suffix in suffixes or ():
        if suffix:
            at = response.find(suffix)
            if at != -1 and at < cut:
                cut = at
    return response[:cut]


BASE_GEN_PARAMS = ("max_new_tokens", "top_p", "top_k", "temperature", "repetition_penalty", "stop_words")
"""The generation parameters `BaseLLM` takes as keywords (the rest are backend-specific)."""


def pop_base_gen_params(gen_params: dict[str, Any]) -> dict[str, Any]:
    """Move the `BASE_GEN_PARAMS` found in `gen_params` out of it, into the returned dict."""
    return {key: gen_params.pop(key) for key in BASE_GEN_PARAMS if key in gen_params}


def _stop_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


class BaseLLM:
    """Base class of synchronous models.

    Args:
        path: Model path or name (backend specific).
        tokenizer_only: Load only the tokenizer (backends that have one).
        template_parser: Class that renders messages for this backend (a prompt string
            for raw-completion models).
        meta_template: Role layout for the template parser (e.g. `INTERNLM2_META`).
        max_new_tokens: Longest reply, in tokens.
        top_p: Nucleus sampling mass.
        top_k: Top-k sampling.
        temperature: Sampling temperature (0 = greedy where the backend supports it).
        repetition_penalty: Penalty for repeated tokens.
        stop_words: Strings that end the reply (not included in it).
    """

    is_api: bool = False

    def __init__(
        self,
        path: str | None = None,
        tokenizer_only: bool = False,
        template_parser: Any = None,
        meta_template: list[dict[str, Any]] | None = None,
        *,
        max_new_tokens: int = 512,
        top_p: float = 0.8,
        top_k: int = 40,
        temperature: float = 0.8,
        repetition_penalty: float = 1.0,
        stop_words: str | Sequence[str] | None = None,
    ) -> None:
        self.path = path
        self.tokenizer_only = tokenizer_only
        self.meta_template = meta_template
        if template_parser is None:
            from .templates import LMTemplateParser

            template_parser = LMTemplateParser
        self.template_parser = template_parser(meta_template) if isinstance(template_parser, type) else template_parser
        self.gen_params: dict[str, Any] = {
            "max_new_tokens": max_new_tokens,
            "top_p": top_p,
            "top_k": top_k,
            "temperature": temperature,
            "repetition_penalty": repetition_penalty,
            "stop_words": _stop_list(stop_words),
        }

    # -- shared request preparation / post-processing (sync and async use these) --

    def update_gen_params(self, **kwargs: Any) -> dict[str, Any]:
        """This call's generation parameters: `gen_params` with `kwargs` applied (a new dict)."""
        params = dict(self.gen_params)
        params["stop_words"] = list(params.get("stop_words") or [])
        for key, value in kwargs.items():
            params[key] = _stop_list(value) if key == "stop_words" else value
        return params

    def _prepare(self, inputs: ChatInput, overrides: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Render `inputs` with the template parser and merge `overrides` into the parameters."""
        if isinstance(inputs, str):
            prompt: Any = inputs
        else:
            if not isinstance(inputs, Sequence):
                raise UserError(f"chat() takes a list of message dicts or a str, not {type(inputs).__name__}")
            prompt = self.template_parser(inputs)
        return prompt, self.update_gen_params(**overrides)

    @staticmethod
    def _finish(text: str, params: Mapping[str, Any]) -> str:
        """Apply client-side stop words to a complete reply."""
        return filter_suffix(text, params.get("stop_words"))

    # -- sync surface --

    def generate(self, inputs: Any, **gen_params: Any) -> str:
        """Complete a rendered prompt. Raw-completion backends implement this."""
        raise TypeError(f"{type(self).__name__} implements neither generate() nor chat()")

    def stream_generate(self, inputs: Any, **gen_params: Any) -> Iterator[StreamItem]:
        """Stream a completion; by default one `END` item holding `generate`'s full reply."""
        yield ModelStatusCode.END, self.generate(inputs, **gen_params), None

    def chat(self, inputs: ChatInput, **gen_params: Any) -> str:
        """Reply to a conversation (or a raw prompt string)."""
        prompt, params = self._prepare(inputs, gen_params)
        return self._finish(self.generate(prompt, **params), params)

    def stream_chat(self, inputs: ChatInput, **gen_params: Any) -> Iterator[StreamItem]:
        """Stream a reply as ``(status, text_so_far, extra)``; the last item is `END`."""
        prompt, params = self._prepare(inputs, gen_params)
        for status, text, extra in self.stream_generate(prompt, **params):
            yield status, self._finish(text, params), extra

    def __repr__(self) -> str:
        return f"{type(self).__name__}(path={self.path!r})"


class AsyncBaseLLM(BaseLLM):
    """Base class of asynchronous models: `chat`, `generate` and `stream_chat` are coroutines."""

    async def generate(self, inputs: Any, session_ids: Any = None, **gen_params: Any) -> str:  # type: ignore[override]
        """Complete a rendered prompt. Raw-completion backends implement this."""
        raise TypeError(f"{type(self).__name__} implements neither generate() nor chat()")

    async def stream_generate(  # type: ignore[override]
        self, inputs: Any, session_ids: Any = None, **gen_params: Any
    ) -> AsyncIterator[StreamItem]:
        """Stream a completion; by default one `END` item holding `generate`'s full reply."""
        yield ModelStatusCode.END, await self.generate(inputs, session_ids, **gen_params), None

    async def chat(self, inputs: ChatInput, session_ids: Any = None, **gen_params: Any) -> str:  # type: ignore[override]
        """Reply to a conversation (or a raw prompt string)."""
        prompt, params = self._prepare(inputs, gen_params)
        return self._finish(await self.generate(prompt, session_ids, **params), params)

    async def stream_chat(  # type: ignore[override]
        self, inputs: ChatInput, session_ids: Any = None, **gen_params: Any
    ) -> AsyncIterator[StreamItem]:
        """Stream a reply as ``(status, text_so_far, extra)``; the last item is `END`."""
        prompt, params = self._prepare(inputs, gen_params)
        async for status, text, extra in self.stream_generate(prompt, session_ids, **params):
            yield status, self._finish(text, params), extra
