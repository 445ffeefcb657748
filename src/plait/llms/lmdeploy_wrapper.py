"""LMDeploy backends (need a GPU and ``pip install 'plait[lmdeploy]'``).

* `LMDeployPipeline` / `AsyncLMDeployPipeline`: the in-process ``lmdeploy.pipeline``;
  replies stream through ``pipeline.stream_infer``.
* `LMDeployServer` / `LMDeployClient` (and async twins): an ``lmdeploy serve api_server``
  reached over its OpenAI-compatible HTTP API through the `GPTAPI` IO path (see
  `plait.llms._lmdeploy_server`); the server classes launch the process themselves.

With a ``meta_template`` the pipeline gets one rendered prompt (and LMDeploy's own chat
template is skipped); without one it gets the messages and applies the model's chat
template. Generation parameters become an ``lmdeploy.GenerationConfig`` (`gen_config_kwargs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import ClassVar

from ..outputs import response_schema
from ..types import SessionIds
from ._decoded import number
from ._lmdeploy_server import (
    AsyncLMDeployClient,
    AsyncLMDeployServer,
    LMDeployClient,
    LMDeployServer,
    serve_command,
)
from ._optional import import_optional
from ._reasoning_wire import answer_of
from ._threaded import AsyncThreadStreamed, Producer, aiterate_thread
from .base_llm import (
    AsyncBatchLLM,
    BatchLLM,
    GenParams,
    LLMCore,
    Prompt,
    StreamItem,
    accumulate,
    engine_fields,
    engine_params,
    pop_base_gen_params,
)
from .profiles import ThinkTags, profile_for
from .templates import APITemplateParser, LMTemplateParser, MetaTemplate

__all__ = [
    "AsyncLMDeployClient",
    "AsyncLMDeployPipeline",
    "AsyncLMDeployServer",
    "LMDeployClient",
    "LMDeployPipeline",
    "LMDeployServer",
    "gen_config_kwargs",
    "serve_command",
]

_RENAMED = {"seed": "random_seed"}


def _import_lmdeploy() -> ModuleType:
    return import_optional("lmdeploy", "lmdeploy", "LMDeployPipeline")


def gen_config_kwargs(params: Mapping[str, object]) -> dict[str, object]:
    """``lmdeploy.GenerationConfig`` fields for plait generation parameters.

    LMDeploy (>= 0.6) decodes greedily unless ``do_sample`` is set, so ``do_sample``
    follows ``temperature > 0`` unless given. ``seed`` becomes ``random_seed``; other keys
    (``skip_special_tokens``, ``min_p``, ``ignore_eos``...) pass through; None values are
    left out.
    """
    out: dict[str, object] = {"n": 1, **engine_fields(params, _RENAMED)}
    schema = response_schema(out.pop("response_format", None))
    if schema is not None:  # guided decoding (LMDeploy's own response_format shape)
        out["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
    if "do_sample" not in out:
        out["do_sample"] = number(params.get("temperature") or 0) > 0
    return out


class _PipelineCore(LLMCore):
    """Engine construction and request building shared by the sync and async pipelines (see `LMDeployPipeline`)."""

    native_response_format = True  # a response_format reaches GenerationConfig: guided decoding

    _stream_thread: ClassVar[str] = "plait-lmdeploy"

    def __init__(
        self,
        path: str,
        model_name: str | None = None,
        tp: int = 1,
        pipeline_cfg: Mapping[str, object] | None = None,
        meta_template: MetaTemplate | None = None,
        **gen_params: object,
    ) -> None:
        self._lmdeploy = _import_lmdeploy()
        base = pop_base_gen_params(gen_params, self, engine_params(self._lmdeploy.GenerationConfig, _RENAMED))
        parser = LMTemplateParser if meta_template else APITemplateParser
        super().__init__(path, template_parser=parser, meta_template=meta_template, **base)
        self.gen_params.update(gen_params)
        self.model_name = model_name
        self.tp = tp
        cfg = dict(pipeline_cfg or {})
        if "backend_config" not in cfg:
            cfg["backend_config"] = self._lmdeploy.TurbomindEngineConfig(tp=tp)
        if model_name is not None and "chat_template_config" not in cfg:
            cfg["chat_template_config"] = self._lmdeploy.ChatTemplateConfig(model_name=model_name)
        self.model = self._lmdeploy.pipeline(path, **cfg)
        self.think_tags: ThinkTags = profile_for(model_name or path).think_tags  # <think> split off the reply

    def _call_args(self, prompt: Prompt, params: Mapping[str, object]) -> dict[str, object]:
        """Keyword arguments of a pipeline call: the gen config, and whether LMDeploy applies its template."""
        return {
            "gen_config": self._lmdeploy.GenerationConfig(**gen_config_kwargs(params)),
            "do_preprocess": not isinstance(prompt, str),
        }

    def _deltas(
        self, prompt: Prompt, params: Mapping[str, object], cancel: threading.Event | None = None
    ) -> Iterator[str]:
        """The text pieces of one streamed reply (the stream is closed when left or cancelled)."""
        with contextlib.closing(self.model.stream_infer([prompt], **self._call_args(prompt, params))) as outputs:
            for output in outputs:
                if cancel is not None and cancel.is_set():
                    return
                if output.text:
                    yield str(output.text)

    def _producer(self, prompt: Prompt, params: Mapping[str, object]) -> Producer[str]:
        def produce(emit: Callable[[str], None], cancel: threading.Event) -> None:
            for delta in self._deltas(prompt, params, cancel):
                emit(delta)

        return produce

    def __repr__(self) -> str:
        return f"{type(self).__name__}(path={self.path!r}, tp={self.tp})"


class LMDeployPipeline(_PipelineCore, BatchLLM):
    """LMDeploy's in-process inference pipeline.

    Args:
        path: Model directory or hub id.
        model_name: LMDeploy chat-template name, when it cannot tell from the model.
        tp: Tensor-parallel size (GPUs), for the default ``TurbomindEngineConfig``.
        pipeline_cfg: Extra ``lmdeploy.pipeline`` arguments (``backend_config``,
            ``chat_template_config``, ``log_level``...).
        meta_template: Render conversations into one prompt with this template; without
            one, LMDeploy applies the model's chat template to the messages.
        **gen_params: ``max_new_tokens``, ``temperature`` (0: greedy), ``top_p``, ``top_k``,
            ``repetition_penalty``, ``stop_words``, and any other ``GenerationConfig`` field.

    Attributes:
        think_tags: How a thinking model's inline ``<think>`` blocks are split off the reply:
            `chat` returns the answer alone, and each `stream_chat` item's extra is the
            reasoning so far (`plait.schema.Reasoning`, None before any), as `GPTAPI` does.
            Matched from ``model_name`` or `path` (`plait.llms.profiles.profile_for`); assignable.
    """

    def _generate_batch(self, prompts: list[Prompt], params: GenParams) -> list[str]:
        if not prompts:
            return []
        responses = self.model(prompts, **self._call_args(prompts[0], params))
        return [self._finish(answer_of(str(r.text), self.think_tags), params) for r in responses]

    def stream_generate(self, inputs: Prompt, **gen_params: object) -> Iterator[StreamItem]:
        """Stream one reply as cumulative ``(status, text, reasoning so far or None)``."""
        params = self.update_gen_params(**gen_params)
        yield from accumulate(self._deltas(inputs, params), params, self.think_tags)


class AsyncLMDeployPipeline(_PipelineCore, AsyncThreadStreamed, AsyncBatchLLM):
    """The asynchronous twin of `LMDeployPipeline` (same arguments).

    Each request streams from the pipeline on a worker thread, so the event loop never
    blocks and concurrent requests are batched by the engine; a cancelled request stops
    its stream.
    """

    async def _one(self, prompt: Prompt, params: Mapping[str, object]) -> str:
        pieces = [delta async for delta in aiterate_thread(self._producer(prompt, params), name=self._stream_thread)]
        return self._finish(answer_of("".join(pieces), self.think_tags), params)

    async def _generate_batch(self, prompts: list[Prompt], params: GenParams, session_ids: SessionIds) -> list[str]:
        return list(await asyncio.gather(*(self._one(p, params) for p in prompts)))
