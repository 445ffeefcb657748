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

The classes are built from one mode-free core and two sibling surfaces:

* `LLMCore` holds everything that does not depend on the mode: configuration, generation
  parameters, template rendering (`_prepare`) and client-side stop words (`_finish`).
* `BaseLLM` adds the synchronous methods; `AsyncBaseLLM` adds the same methods as
  coroutines (with an extra ``session_ids`` argument agents pass along for engines that
  route by session). Neither overrides the other: `AsyncBaseLLM` is registered as a
  virtual subclass of `BaseLLM`, so ``isinstance(llm, BaseLLM)`` holds for every model.

Each backend follows the same pattern: a private core (a subclass of `LLMCore`) builds
requests and parses replies once, and its sync and async classes are siblings that only
perform the IO.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterable, AsyncIterator, Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeAlias, Union, overload

from typing_extensions import TypedDict, TypeIs

from ..exceptions import UserError
from ..schema import ModelStatusCode
from ..types import ChatInput, SessionIds
from ..utils._aio import closing_stream
from ..utils.names import check_keywords, init_parameters, keyword_names
from ._reasoning_wire import EngineReply
from .profiles import ThinkTags
from .response import ModelResponse
from .templates import LMTemplateParser, MetaTemplate, TemplateParserClass

__all__ = [
    "AsyncBaseLLM",
    "BaseLLM",
    "ChatBatch",
    "ChatInput",
    "CoreOptions",
    "GenParams",
    "LLMCore",
    "Message",
    "Prompt",
    "PromptBatch",
    "StreamItem",
    "TemplateParser",
    "aaccumulate",
    "accumulate",
    "engine_fields",
    "filter_suffix",
    "is_chat_batch",
    "is_prompt_batch",
    "stop_words_of",
]

Message: TypeAlias = Mapping[str, object]
"""One chat message as a model receives it (``role``, ``content`` and optional keys)."""

Prompt: TypeAlias = Union[str, Sequence[Message]]
"""One rendered prompt: text a raw-completion engine continues, or messages for a chat engine."""

ChatBatch: TypeAlias = Sequence[Sequence[Message]]
"""Several conversations answered in one ``chat`` call (backends that batch)."""

PromptBatch: TypeAlias = Union[list[str], Sequence[Sequence[Message]]]
"""Several rendered prompts completed in one ``generate`` call (backends that batch)."""

GenParams: TypeAlias = dict[str, Any]
"""Generation parameters of one call: plait's own names and any backend field, values as the backend takes them."""

StreamItem: TypeAlias = tuple[ModelStatusCode, str, object]
"""``(status, text_so_far, extra)``: `extra` is backend-specific: the final `ModelResponse` on the END
item (an in-process engine that returns only text: the reply's `plait.schema.Reasoning` or None);
before it, a reasoning model's reasoning so far (`plait.schema.Reasoning`) or None."""

TemplateParser: TypeAlias = Callable[[Sequence[Message]], Prompt]
"""Renders a conversation for a backend: a prompt string, or the API's messages."""


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


LAGENT_DROPPED = frozenset({"skip_special_tokens", "session_id"})
"""Generation parameters Lagent's API clients accept and never send (kept valid for Lagent scripts)."""


def pop_base_gen_params(gen_params: GenParams, owner: object, accepted: Collection[str] | None) -> GenParams:
    """Move the `BASE_GEN_PARAMS` found in `gen_params` out of it, into the returned dict.

    Called by each backend's constructor on its ``**gen_params``, so a misspelt setting
    fails there instead of being kept and never sent.

    Args:
        gen_params: The constructor's ``**gen_params`` (the base parameters are removed).
        owner: The model being built (its class's constructors supply names to suggest).
        accepted: The backend's own parameter names beyond `BASE_GEN_PARAMS`; None: any
            name (an engine whose parameters cannot be listed).

    Raises:
        UserError: A name that is neither a base parameter nor `accepted`, naming the closest valid one.
    """
    if accepted is not None:
        cls = type(owner)
        valid = {*BASE_GEN_PARAMS, "response_format", *accepted}
        check_keywords(cls.__name__, gen_params, valid, init_parameters(cls))
    return {key: gen_params.pop(key) for key in BASE_GEN_PARAMS if key in gen_params}


def _iterable(value: object) -> Iterable[object]:
    """`value` itself when it can be iterated; the `TypeError` iterating it would raise otherwise."""
    if not isinstance(value, Iterable):
        raise TypeError(f"'{type(value).__name__}' object is not iterable")
    return value


def engine_params(target: object, renamed: Mapping[str, str]) -> frozenset[str] | None:
    """The generation parameters an engine's parameter class takes, under plait's names where `renamed` maps them.

    Args:
        target: The class (or function) the parameters are passed to (vLLM's ``SamplingParams``).
        renamed: plait's name -> the engine's, as `engine_fields` applies it.

    Returns:
        Its keyword names and the plait names renamed to them; None when it takes any name.
    """
    names = keyword_names(target)
    if names is None:
        return None
    return names | {ours for ours, theirs in renamed.items() if theirs in names}


def stop_words_of(params: Mapping[str, object]) -> Iterable[str] | None:
    """The ``stop_words`` of a call's parameters, as `filter_suffix` takes them (None when there are none)."""
    stops = params.get("stop_words")
    if not stops:
        return None
    if isinstance(stops, Iterable):
        return stops
    raise TypeError(f"'{type(stops).__name__}' object is not iterable")


def engine_fields(params: Mapping[str, object], renamed: Mapping[str, str]) -> dict[str, object]:
    """Generation parameters under an engine's own field names (`renamed` maps plait's names).

    None values and ``session_ids`` are left out; ``stop_words`` becomes a list.
    """
    out: dict[str, object] = {}
    for key, value in params.items():
        if value is None or key == "session_ids":
            continue
        out[renamed.get(key, key)] = list(_iterable(value)) if key == "stop_words" else value
    return out


def accumulate(deltas: Iterable[str], params: Mapping[str, object], think: ThinkTags = "off") -> Iterator[StreamItem]:
    """Stream items for a reply arriving in pieces: the text so far (stop words applied), then `END`.

    With `think` other than ``'off'``, inline ``<think>`` blocks are split off as `GPTAPI`
    splits them: each item's extra is the reasoning so far (None: none yet).
    """
    reply, stops = EngineReply(think), stop_words_of(params)
    for delta in deltas:
        if reply.add(delta):
            yield ModelStatusCode.STREAM_ING, filter_suffix(reply.content, stops), reply.reasoning
    yield _ended(reply, stops)


async def aaccumulate(
    deltas: AsyncIterable[str], params: Mapping[str, object], think: ThinkTags = "off"
) -> AsyncIterator[StreamItem]:
    """The asynchronous twin of `accumulate`."""
    reply, stops = EngineReply(think), stop_words_of(params)
    async for delta in deltas:
        if reply.add(delta):
            yield ModelStatusCode.STREAM_ING, filter_suffix(reply.content, stops), reply.reasoning
    yield _ended(reply, stops)


def _ended(reply: EngineReply, stops: Iterable[str] | None) -> StreamItem:
    content, reasoning = reply.end()
    return ModelStatusCode.END, filter_suffix(content, stops), reasoning


def is_chat_batch(inputs: ChatInput | ChatBatch) -> TypeIs[ChatBatch]:
    """Whether `inputs` is a batch of conversations (a list of message lists)."""
    return isinstance(inputs, list) and bool(inputs) and isinstance(inputs[0], list)


def is_prompt_batch(inputs: Prompt | PromptBatch) -> TypeIs[PromptBatch]:
    """Whether `inputs` is a batch of prompts (a sequence of prompt strings or of message lists)."""
    if isinstance(inputs, str):
        return False
    return not inputs or not isinstance(inputs[0], Mapping)


def _stop_list(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in _iterable(value)]


def _template_parser(
    template_parser: TemplateParserClass | TemplateParser | None, meta_template: MetaTemplate | None
) -> TemplateParser:
    """The parser instance: `template_parser` built with `meta_template` when it is a class."""
    if template_parser is None:
        return LMTemplateParser(meta_template)
    if isinstance(template_parser, type):
        parser: TemplateParser = template_parser(meta_template)
        return parser
    return template_parser


class CoreOptions(TypedDict, total=False):
    """The keyword arguments of `LLMCore` a subclass may take as its own ``**gen_params`` and pass on."""

    tokenizer_only: bool
    meta_template: MetaTemplate | None
    max_new_tokens: int
    top_p: float
    top_k: int
    temperature: float
    repetition_penalty: float
    stop_words: str | Sequence[str] | None


class LLMCore(metaclass=abc.ABCMeta):  # noqa: B024 (ABCMeta for BaseLLM.register; subclasses add abstract hooks)
    """What every model has, whatever its mode: configuration, parameters, rendering.

    Args:
        path: Model path or name (backend specific).
        tokenizer_only: Load only the tokenizer (backends that have one).
        template_parser: Class that renders messages for this backend (a prompt string
            for raw-completion models), or a ready parser (any callable taking messages).
        meta_template: Role layout for the template parser (e.g. `INTERNLM2_META`).
        max_new_tokens: Longest reply, in tokens.
        top_p: Nucleus sampling mass.
        top_k: Top-k sampling.
        temperature: Sampling temperature (0 = greedy where the backend supports it).
        repetition_penalty: Penalty for repeated tokens.
        stop_words: Strings that end the reply (not included in it).
    """

    is_api: bool = False
    native_response_format: bool = False
    """Whether the backend honours a ``response_format`` parameter itself (a JSON Schema it
    decodes under, sends, or turns into a forced tool). When False, `_prepare` turns the
    parameter into instructions at the end of the conversation (`plait.outputs`)."""

    def __init__(
        self,
        path: str | None = None,
        tokenizer_only: bool = False,
        template_parser: TemplateParserClass | TemplateParser | None = None,
        meta_template: MetaTemplate | None = None,
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
        self.template_parser = _template_parser(template_parser, meta_template)
        self.gen_params: GenParams = {
            "max_new_tokens": max_new_tokens,
            "top_p": top_p,
            "top_k": top_k,
            "temperature": temperature,
            "repetition_penalty": repetition_penalty,
            "stop_words": _stop_list(stop_words),
        }

    def update_gen_params(self, **kwargs: object) -> GenParams:
        """This call's generation parameters: `gen_params` with `kwargs` applied (a new dict)."""
        params = dict(self.gen_params)
        params["stop_words"] = list(params.get("stop_words") or [])
        for key, value in kwargs.items():
            params[key] = _stop_list(value) if key == "stop_words" else value
        return params

    def _prepare(self, inputs: ChatInput, overrides: Mapping[str, object]) -> tuple[Prompt, GenParams]:
        """Render `inputs` with the template parser and merge `overrides` into the parameters."""
        if not isinstance(inputs, (list, Sequence)):
            raise UserError(f"chat() takes a list of message dicts or a str, not {type(inputs).__name__}")
        params = self.update_gen_params(**overrides)
        instructions = self._schema_instructions(params)
        if instructions is not None:
            inputs = with_instructions(inputs, instructions)
        if isinstance(inputs, str):
            return inputs, params
        return self.template_parser(inputs), params

    def _render_batch(self, inputs: ChatBatch, overrides: Mapping[str, object]) -> tuple[list[Prompt], GenParams]:
        """Render each conversation of a batch; merge `overrides` into the parameters."""
        params = self.update_gen_params(**overrides)
        instructions = self._schema_instructions(params)
        if instructions is not None:
            inputs = [with_messages(conversation, instructions) for conversation in inputs]
        return [self.template_parser(conversation) for conversation in inputs], params

    def _schema_instructions(self, params: GenParams) -> str | None:
        """For a backend without `native_response_format`: take ``response_format`` out of `params`, in words."""
        if self.native_response_format or params.get("response_format") is None:
            return None
        from ..outputs import schema_instructions  # pydantic-free until a schema is asked for

        return schema_instructions(params.pop("response_format"))

    @staticmethod
    def _finish(text: str, params: Mapping[str, object]) -> str:
        """Apply client-side stop words to a complete reply."""
        return filter_suffix(text, stop_words_of(params))

    def _finish_response(self, response: ModelResponse, params: Mapping[str, object]) -> ModelResponse:
        """Apply client-side stop words to a structured reply's text (in place; returns it)."""
        response.content = self._finish(response.content, params)
        return response

    def __repr__(self) -> str:
        return f"{type(self).__name__}(path={self.path!r})"


def with_instructions(inputs: ChatInput, instructions: str) -> ChatInput:
    """`inputs` with `instructions` at the end of the last user message (or as a new user message)."""
    if isinstance(inputs, str):
        return f"{inputs}\n\n{instructions}"
    return with_messages(inputs, instructions)


def with_messages(inputs: Sequence[Mapping[str, object]], instructions: str) -> list[dict[str, object]]:
    """A conversation with `instructions` at the end of its last user message (or as a new user message)."""
    messages = [dict(message) for message in inputs]
    if messages and messages[-1].get("role") == "user" and isinstance(messages[-1].get("content"), str):
        messages[-1]["content"] = f"{messages[-1]['content']}\n\n{instructions}"
    else:
        messages.append({"role": "user", "content": instructions})
    return messages


class BaseLLM(LLMCore):
    """Base class of synchronous models (see `LLMCore` for the arguments).

    ``isinstance(llm, BaseLLM)`` is true for every plait model, async ones included
    (`AsyncBaseLLM` is registered as a virtual subclass).
    """

    def generate(self, inputs: Prompt, **gen_params: object) -> str:
        """Complete a rendered prompt. Raw-completion backends implement this."""
        raise TypeError(f"{type(self).__name__} implements neither generate() nor chat()")

    def stream_generate(self, inputs: Prompt, **gen_params: object) -> Iterator[StreamItem]:
        """Stream a completion; by default one `END` item holding `generate`'s full reply."""
        yield ModelStatusCode.END, self.generate(inputs, **gen_params), None

    def chat(self, inputs: ChatInput, **gen_params: object) -> str:
        """Reply to a conversation (or a raw prompt string)."""
        prompt, params = self._prepare(inputs, gen_params)
        return self._finish(self.generate(prompt, **params), params)

    def stream_chat(self, inputs: ChatInput, **gen_params: Any) -> Iterator[StreamItem]:
        """Stream a reply as ``(status, text_so_far, extra)``; the last item is `END`."""
        prompt, params = self._prepare(inputs, gen_params)
        for status, text, extra in self.stream_generate(prompt, **params):
            yield status, self._finish(text, params), extra


class AsyncBaseLLM(LLMCore):
    """Base class of asynchronous models: `chat`, `generate` and `stream_chat` are coroutines.

    The sibling of `BaseLLM` (same core, same arguments); registered as a virtual subclass
    of it, so ``isinstance(llm, BaseLLM)`` is true for async models too.
    """

    async def generate(self, inputs: Prompt, session_ids: SessionIds = None, **gen_params: object) -> str:
        """Complete a rendered prompt. Raw-completion backends implement this."""
        raise TypeError(f"{type(self).__name__} implements neither generate() nor chat()")

    async def stream_generate(
        self, inputs: Prompt, session_ids: SessionIds = None, **gen_params: object
    ) -> AsyncIterator[StreamItem]:
        """Stream a completion; by default one `END` item holding `generate`'s full reply."""
        yield ModelStatusCode.END, await self.generate(inputs, session_ids, **gen_params), None

    async def chat(self, inputs: ChatInput, session_ids: SessionIds = None, **gen_params: object) -> str:
        """Reply to a conversation (or a raw prompt string)."""
        prompt, params = self._prepare(inputs, gen_params)
        return self._finish(await self.generate(prompt, session_ids, **params), params)

    async def stream_chat(
        self, inputs: ChatInput, session_ids: SessionIds = None, **gen_params: Any
    ) -> AsyncIterator[StreamItem]:
        """Stream a reply as ``(status, text_so_far, extra)``; the last item is `END`."""
        prompt, params = self._prepare(inputs, gen_params)
        async with closing_stream(self.stream_generate(prompt, session_ids, **params)) as items:
            async for status, text, extra in items:  # left early: the engine's stream is closed now
                yield status, self._finish(text, params), extra


BaseLLM.register(AsyncBaseLLM)


class BatchLLM(BaseLLM):
    """A synchronous model whose engine completes several prompts in one call.

    `generate` takes one prompt or a list of them, and `chat` one conversation or a list
    of them (a list of replies comes back); both end in `_generate_batch`.
    """

    @abc.abstractmethod
    def _generate_batch(self, prompts: list[Prompt], params: GenParams) -> list[str]:
        """The replies to `prompts`, client-side stop words applied."""

    @overload
    def generate(self, inputs: Prompt, **gen_params: object) -> str: ...

    @overload
    def generate(self, inputs: PromptBatch, **gen_params: object) -> list[str]: ...

    def generate(self, inputs: Prompt | PromptBatch, **gen_params: object) -> str | list[str]:
        """Complete a prompt, or each prompt of a list in one batch (a list of str)."""
        params = self.update_gen_params(**gen_params)
        if is_prompt_batch(inputs):
            return self._generate_batch(list(inputs), params)
        return self._generate_batch([inputs], params)[0]

    @overload
    def chat(self, inputs: ChatInput, **gen_params: object) -> str: ...

    @overload
    def chat(self, inputs: ChatBatch, **gen_params: object) -> list[str]: ...

    def chat(self, inputs: ChatInput | ChatBatch, **gen_params: object) -> str | list[str]:
        """Reply to a conversation, or to each conversation of a list in one batch."""
        if is_chat_batch(inputs):
            return self._generate_batch(*self._render_batch(inputs, gen_params))
        return super().chat(inputs, **gen_params)


class AsyncBatchLLM(AsyncBaseLLM):
    """The asynchronous sibling of `BatchLLM`: batches are answered concurrently."""

    @abc.abstractmethod
    async def _generate_batch(self, prompts: list[Prompt], params: GenParams, session_ids: SessionIds) -> list[str]:
        """The replies to `prompts`, client-side stop words applied."""

    @overload
    async def generate(self, inputs: Prompt, session_ids: SessionIds = None, **gen_params: object) -> str: ...

    @overload
    async def generate(
        self, inputs: PromptBatch, session_ids: SessionIds = None, **gen_params: object
    ) -> list[str]: ...

    async def generate(
        self, inputs: Prompt | PromptBatch, session_ids: SessionIds = None, **gen_params: object
    ) -> str | list[str]:
        """Complete a prompt, or each prompt of a list concurrently (a list of str)."""
        params = self.update_gen_params(**gen_params)
        if is_prompt_batch(inputs):
            return await self._generate_batch(list(inputs), params, session_ids)
        return (await self._generate_batch([inputs], params, session_ids))[0]

    @overload
    async def chat(self, inputs: ChatInput, session_ids: SessionIds = None, **gen_params: object) -> str: ...

    @overload
    async def chat(self, inputs: ChatBatch, session_ids: SessionIds = None, **gen_params: object) -> list[str]: ...

    async def chat(
        self, inputs: ChatInput | ChatBatch, session_ids: SessionIds = None, **gen_params: object
    ) -> str | list[str]:
        """Reply to a conversation, or to each conversation of a list concurrently."""
        if is_chat_batch(inputs):
            prompts, params = self._render_batch(inputs, gen_params)
            return await self._generate_batch(prompts, params, session_ids)
        return await super().chat(inputs, session_ids, **gen_params)
