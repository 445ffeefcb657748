"""vLLM engines run in-process (needs a GPU and ``pip install 'plait[vllm]'``).

`VllmModel` drives the offline ``vllm.LLM`` engine; `AsyncVllmModel` drives
``vllm.AsyncLLMEngine`` and streams from its async generator. Conversations are rendered
into one prompt by the meta template; plait generation parameters become a
``vllm.SamplingParams`` (`sampling_kwargs`).

Example:
    ```python
    llm = VllmModel(path='Qwen/Qwen2-7B-Instruct', meta_template=INTERNLM2_META, tp=1, top_k=1,
                    temperature=1.0, stop_words=['<|im_end|>'], max_new_tokens=1024)
    ```
"""

from __future__ import annotations

import abc
import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from types import ModuleType
from typing import Generic, Protocol, TypeVar

from ..exceptions import LLMError
from ..outputs import response_schema
from ..schema import ModelStatusCode
from ..types import SessionId, SessionIds
from ._optional import import_optional
from ._reasoning_wire import EngineReply, answer_of
from .base_llm import (
    AsyncBatchLLM,
    BatchLLM,
    GenParams,
    LLMCore,
    Prompt,
    StreamItem,
    engine_fields,
    engine_params,
    pop_base_gen_params,
)
from .profiles import ThinkTags, profile_for
from .templates import MetaTemplate

__all__ = ["AsyncVllmModel", "VllmModel", "request_id", "sampling_kwargs", "structured_output"]

_RENAMED = {"max_new_tokens": "max_tokens", "stop_words": "stop"}


def _import_vllm() -> ModuleType:
    return import_optional("vllm", "vllm", "VllmModel")


def sampling_kwargs(params: Mapping[str, object]) -> dict[str, object]:
    """``SamplingParams`` fields for plait generation parameters.

    ``max_new_tokens`` becomes ``max_tokens`` and ``stop_words`` becomes ``stop``; vLLM
    takes ``temperature=0`` as greedy. Other keys (``seed``, ``min_p``, ``ignore_eos``...)
    pass through; None values are left out.
    """
    return {"n": 1, **engine_fields(params, _RENAMED)}


def structured_output(vllm: ModuleType, schema: Mapping[str, object]) -> dict[str, object]:
    """The ``SamplingParams`` field that constrains decoding to a JSON Schema, in this vLLM's spelling.

    ``structured_outputs=StructuredOutputsParams(json=...)`` (vLLM 0.10.2 and later), else
    ``guided_decoding=GuidedDecodingParams(json=...)`` (0.6.5 to 0.11).

    Raises:
        LLMError: This vLLM has neither (too old for structured outputs).
    """
    module = getattr(vllm, "sampling_params", None)
    current = getattr(module, "StructuredOutputsParams", None)
    if current is not None:
        return {"structured_outputs": current(json=dict(schema))}
    older = getattr(module, "GuidedDecodingParams", None)
    if older is not None:
        return {"guided_decoding": older(json=dict(schema))}
    raise LLMError("this vLLM has no structured outputs (GuidedDecodingParams, vLLM >= 0.6.5): upgrade it")


def request_id(session_id: SessionId | None = None) -> str:
    """A request id unique to one call; the agent's session id leads it, for tracing."""
    prefix = "plait" if session_id is None else f"session-{session_id}"
    return f"{prefix}-{uuid.uuid4().hex}"


def _text(output: object) -> str:
    """The text of a vLLM ``RequestOutput`` (cumulative for streamed outputs)."""
    completions = getattr(output, "outputs", None)
    if not completions:
        raise LLMError(f"vLLM returned an output without completions: {output!r:.200}")
    return str(completions[0].text)


def _session(session_ids: SessionIds, index: int) -> SessionId | None:
    if isinstance(session_ids, (list, tuple)):
        return session_ids[index] if index < len(session_ids) else None
    return session_ids


def _prompt_text(prompt: Prompt) -> str:
    """A prompt as the text vLLM completes (rendered by the meta template already)."""
    return prompt if isinstance(prompt, str) else str(prompt)


# The parts of vLLM's engines used here (vLLM ships no type information).


class _Output(Protocol):
    """A ``RequestOutput`` (its ``outputs`` are read by `_text`)."""

    @property
    def request_id(self) -> str:
        """The request it answers."""

    @property
    def finished(self) -> bool:
        """Whether the request is complete."""


class _EngineLoop(Protocol):
    """``vllm.LLM().llm_engine``: requests stepped by hand."""

    def add_request(self, request_id: str, prompt: Prompt, params: object, /) -> None:
        """Queue a request."""

    def has_unfinished_requests(self) -> bool:
        """Whether any request is still running."""

    def step(self) -> Iterable[_Output]:
        """Run one decoding step; the outputs of the requests it advanced."""

    def abort_request(self, request_ids: list[str], /) -> None:
        """Drop requests."""


class _OfflineEngine(Protocol):
    """A ``vllm.LLM``."""

    @property
    def llm_engine(self) -> _EngineLoop:
        """The engine underneath."""

    def generate(self, prompts: list[str], params: object, /, *, use_tqdm: bool) -> Iterable[object]:
        """One finished ``RequestOutput`` per prompt."""


class _AsyncEngine(Protocol):
    """A ``vllm.AsyncLLMEngine``."""

    def generate(self, prompt: Prompt, params: object, request_id: str, /) -> AsyncIterator[_Output]:
        """The request's cumulative outputs."""

    async def abort(self, request_id: str, /) -> None:
        """Stop a request."""


EngineT = TypeVar("EngineT")


class _VllmCore(LLMCore, Generic[EngineT]):
    """Configuration and request building shared by `VllmModel` and `AsyncVllmModel` (see `VllmModel`)."""

    native_response_format = True  # a response_format's schema becomes vLLM's structured-output constraint

    def __init__(
        self,
        path: str,
        tp: int = 1,
        vllm_cfg: Mapping[str, object] | None = None,
        meta_template: MetaTemplate | None = None,
        **gen_params: object,
    ) -> None:
        self._vllm = _import_vllm()
        base = pop_base_gen_params(gen_params, self, engine_params(self._vllm.SamplingParams, _RENAMED))
        super().__init__(path, meta_template=meta_template, **base)
        self.gen_params.update(gen_params)
        self.tp = tp
        self.vllm_cfg = dict(vllm_cfg or {})
        self.think_tags: ThinkTags = profile_for(path).think_tags  # <think> split off the reply
        self.model: EngineT = self._build_engine(path)

    @abc.abstractmethod
    def _build_engine(self, path: str) -> EngineT:
        """The engine this class drives (each builds its own kind), loaded from `path`."""

    def _sampling(self, params: Mapping[str, object]) -> object:
        kwargs = sampling_kwargs(params)
        schema = response_schema(kwargs.pop("response_format", None))
        if schema is not None:
            kwargs.update(structured_output(self._vllm, schema))
        return self._vllm.SamplingParams(**kwargs)

    def _answer(self, text: str, params: Mapping[str, object]) -> str:
        """A complete reply's answer: its think blocks split off, client-side stop words applied."""
        return self._finish(answer_of(text, self.think_tags), params)

    def _item(self, reply: EngineReply, params: Mapping[str, object]) -> StreamItem:
        """The stream item for a reply so far: its answer, and the reasoning so far (None: none yet)."""
        return ModelStatusCode.STREAM_ING, self._finish(reply.content, params), reply.reasoning

    def _end(self, reply: EngineReply, params: Mapping[str, object]) -> StreamItem:
        """The last stream item: the whole answer, and the reply's reasoning (None: none)."""
        content, reasoning = reply.end()
        return ModelStatusCode.END, self._finish(content, params), reasoning

    def __repr__(self) -> str:
        return f"{type(self).__name__}(path={self.path!r}, tp={self.tp})"


class VllmModel(_VllmCore[_OfflineEngine], BatchLLM):
    """The offline vLLM engine (``vllm.LLM``) prompted through a meta template.

    Args:
        path: Model directory or hub id.
        tp: Tensor-parallel size (GPUs).
        vllm_cfg: Extra ``vllm.LLM`` arguments (``gpu_memory_utilization``, ``max_model_len``...).
        meta_template: Role layout used to render conversations (e.g. `INTERNLM2_META`).
        **gen_params: ``max_new_tokens``, ``temperature`` (0: greedy), ``top_p``, ``top_k``,
            ``repetition_penalty``, ``stop_words``, and any other ``SamplingParams`` field.

    Calls are serialized on one engine by a lock (the offline engine is not thread-safe);
    use `AsyncVllmModel` for concurrent requests.

    Attributes:
        think_tags: How a thinking model's inline ``<think>`` blocks are split off the reply
            (vLLM's offline engine runs no reasoning parser): `chat` returns the answer alone,
            and each `stream_chat` item's extra is the reasoning so far (`plait.schema.Reasoning`,
            None before any), as `GPTAPI` does. Matched from `path`
            (`plait.llms.profiles.profile_for`); assignable.
    """

    def _build_engine(self, path: str) -> _OfflineEngine:
        self._lock = threading.Lock()
        engine: _OfflineEngine = self._vllm.LLM(model=path, tensor_parallel_size=self.tp, **self.vllm_cfg)
        return engine

    def _generate_batch(self, prompts: list[Prompt], params: GenParams) -> list[str]:
        with self._lock:
            outputs = self.model.generate([_prompt_text(p) for p in prompts], self._sampling(params), use_tqdm=False)
        return [self._answer(_text(out), params) for out in outputs]

    def stream_generate(self, inputs: Prompt, **gen_params: object) -> Iterator[StreamItem]:
        """Stream one completion by stepping the engine (holds the engine's lock until done)."""
        params = self.update_gen_params(**gen_params)
        engine = self.model.llm_engine
        rid = request_id()
        reply, finished = EngineReply(self.think_tags), False
        with self._lock:
            engine.add_request(rid, inputs, self._sampling(params))
            try:
                while not finished and engine.has_unfinished_requests():
                    for output in engine.step():
                        if output.request_id == rid:
                            finished = bool(output.finished)
                            if reply.grow(_text(output)):
                                yield self._item(reply, params)
            finally:
                if not finished:
                    engine.abort_request([rid])
        yield self._end(reply, params)


class AsyncVllmModel(_VllmCore[_AsyncEngine], AsyncBatchLLM):
    """vLLM's ``AsyncLLMEngine``: concurrent requests batched by the engine, streamed as produced.

    Takes the arguments of `VllmModel` (``vllm_cfg`` goes to ``AsyncEngineArgs``). Each
    call gets its own request id (led by the session id the agent passes), and a request
    whose caller stops listening or is cancelled is aborted in the engine.
    """

    def _build_engine(self, path: str) -> _AsyncEngine:
        args = self._vllm.AsyncEngineArgs(model=path, tensor_parallel_size=self.tp, **self.vllm_cfg)
        engine: _AsyncEngine = self._vllm.AsyncLLMEngine.from_engine_args(args)
        return engine

    async def _texts(
        self, prompt: Prompt, params: Mapping[str, object], session_id: SessionId | None
    ) -> AsyncIterator[str]:
        """Cumulative texts of one request; aborts the request when left early."""
        rid = request_id(session_id)
        finished = False
        try:
            async for output in self.model.generate(prompt, self._sampling(params), rid):
                finished = bool(output.finished)
                yield _text(output)
        finally:
            if not finished:
                await self.model.abort(rid)

    async def _one(self, prompt: Prompt, params: Mapping[str, object], session_id: SessionId | None) -> str:
        last = ""
        async for text in self._texts(prompt, params, session_id):
            last = text
        return self._answer(last, params)

    async def _generate_batch(self, prompts: list[Prompt], params: GenParams, session_ids: SessionIds) -> list[str]:
        texts = await asyncio.gather(
            *(self._one(_prompt_text(p), params, _session(session_ids, i)) for i, p in enumerate(prompts))
        )
        return list(texts)

    async def stream_generate(
        self, inputs: Prompt, session_ids: SessionIds = None, **gen_params: object
    ) -> AsyncIterator[StreamItem]:
        """Stream one completion from the engine's async generator."""
        params = self.update_gen_params(**gen_params)
        reply = EngineReply(self.think_tags)
        async for text in self._texts(inputs, params, _session(session_ids, 0)):
            if reply.grow(text):
                yield self._item(reply, params)
        yield self._end(reply, params)
