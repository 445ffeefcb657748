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
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

from ..exceptions import MissingDependencyError
from ..schema import ModelStatusCode
from ._lmdeploy_server import (
    AsyncLMDeployClient,
    AsyncLMDeployServer,
    LMDeployClient,
    LMDeployServer,
    serve_command,
)
from ._threaded import Producer, aiterate_thread
from .base_llm import AsyncBaseLLM, BaseLLM, StreamItem, pop_base_gen_params
from .templates import APITemplateParser, LMTemplateParser

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
_NOT_SENT = frozenset({"session_ids"})


def _import_lmdeploy() -> Any:
    try:
        import lmdeploy  # type: ignore[import-not-found]
    except ImportError:
        raise MissingDependencyError("lmdeploy", extra="lmdeploy", feature="LMDeployPipeline") from None
    return lmdeploy


def gen_config_kwargs(params: Mapping[str, Any]) -> dict[str, Any]:
    """``lmdeploy.GenerationConfig`` fields for plait generation parameters.

    LMDeploy (>= 0.6) decodes greedily unless ``do_sample`` is set, so ``do_sample``
    follows ``temperature > 0`` unless given. ``seed`` becomes ``random_seed``; other keys
    (``skip_special_tokens``, ``min_p``, ``ignore_eos``...) pass through; None values are
    left out.
    """
    out: dict[str, Any] = {"n": 1}
    for key, value in params.items():
        if value is None or key in _NOT_SENT:
            continue
        out[_RENAMED.get(key, key)] = list(value) if key == "stop_words" else value
    if "do_sample" not in out:
        out["do_sample"] = float(out.get("temperature") or 0) > 0
    return out


class _PipelineCore:
    """Engine construction and request building shared by the sync and async pipelines."""

    gen_params: dict[str, Any]
    update_gen_params: Callable[..., dict[str, Any]]
    template_parser: Callable[[Any], Any]

    def __init__(
        self,
        path: str,
        model_name: str | None = None,
        tp: int = 1,
        pipeline_cfg: Mapping[str, Any] | None = None,
        meta_template: list[dict[str, Any]] | None = None,
        **gen_params: Any,
    ) -> None:
        base = pop_base_gen_params(gen_params)
        parser = LMTemplateParser if meta_template else APITemplateParser
        super().__init__(path, template_parser=parser, meta_template=meta_template, **base)  # type: ignore[call-arg]
        self.gen_params.update(gen_params)
        self.model_name = model_name
        self.tp = tp
        self._lmdeploy = _import_lmdeploy()
        cfg = dict(pipeline_cfg or {})
        if "backend_config" not in cfg:
            cfg["backend_config"] = self._lmdeploy.TurbomindEngineConfig(tp=tp)
        if model_name is not None and "chat_template_config" not in cfg:
            cfg["chat_template_config"] = self._lmdeploy.ChatTemplateConfig(model_name=model_name)
        self.model = self._lmdeploy.pipeline(path, **cfg)

    def _call_args(self, prompt: Any, params: Mapping[str, Any]) -> dict[str, Any]:
        """Keyword arguments of a pipeline call: the gen config, and whether LMDeploy applies its template."""
        return {
            "gen_config": self._lmdeploy.GenerationConfig(**gen_config_kwargs(params)),
            "do_preprocess": not isinstance(prompt, str),
        }

    def _generate_sync(self, inputs: Any, params: Mapping[str, Any]) -> Any:
        batch = isinstance(inputs, list) and bool(inputs) and not isinstance(inputs[0], Mapping)
        prompts = list(inputs) if batch else [inputs]
        responses = self.model(prompts, **self._call_args(prompts[0], params))
        texts = [BaseLLM._finish(str(r.text), params) for r in responses]
        return texts if batch else texts[0]

    def _deltas(self, prompt: Any, params: Mapping[str, Any], cancel: threading.Event | None = None) -> Iterator[str]:
        """The text pieces of one streamed reply (the stream is closed when left or cancelled)."""
        with contextlib.closing(self.model.stream_infer([prompt], **self._call_args(prompt, params))) as outputs:
            for output in outputs:
                if cancel is not None and cancel.is_set():
                    return
                if output.text:
                    yield str(output.text)

    def _producer(self, prompt: Any, params: Mapping[str, Any]) -> Producer:
        def produce(emit: Callable[[Any], None], cancel: threading.Event) -> None:
            for delta in self._deltas(prompt, params, cancel):
                emit(delta)

        return produce

    def _is_batch(self, inputs: Any) -> bool:
        return isinstance(inputs, list) and bool(inputs) and isinstance(inputs[0], list)

    def _render_batch(self, inputs: Sequence[Any], overrides: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        return [self.template_parser(conv) for conv in inputs], self.update_gen_params(**overrides)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(path={getattr(self, 'path', None)!r}, tp={self.tp})"


class LMDeployPipeline(_PipelineCore, BaseLLM):
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
    """

    def generate(self, inputs: Any, **gen_params: Any) -> Any:
        """Complete a prompt (or messages), or each item of a list in one batch."""
        return self._generate_sync(inputs, self.update_gen_params(**gen_params))

    def stream_generate(self, inputs: Any, **gen_params: Any) -> Iterator[StreamItem]:
        """Stream one reply as cumulative ``(status, text, None)``."""
        params = self.update_gen_params(**gen_params)
        text = ""
        for delta in self._deltas(inputs, params):
            text += delta
            yield ModelStatusCode.STREAM_ING, self._finish(text, params), None
        yield ModelStatusCode.END, self._finish(text, params), None

    def chat(self, inputs: Any, **gen_params: Any) -> Any:
        """Reply to a conversation, or to each conversation of a list in one batch."""
        if self._is_batch(inputs):
            prompts, params = self._render_batch(inputs, gen_params)
            return self._generate_sync(prompts, params)
        return super().chat(inputs, **gen_params)


class AsyncLMDeployPipeline(_PipelineCore, AsyncBaseLLM):
    """The asynchronous twin of `LMDeployPipeline` (same arguments).

    Each request streams from the pipeline on a worker thread, so the event loop never
    blocks and concurrent requests are batched by the engine; a cancelled request stops
    its stream.
    """

    async def _one(self, prompt: Any, params: Mapping[str, Any]) -> str:
        pieces = [delta async for delta in aiterate_thread(self._producer(prompt, params), name="plait-lmdeploy")]
        return self._finish("".join(pieces), params)

    async def generate(self, inputs: Any, session_ids: Any = None, **gen_params: Any) -> Any:  # type: ignore[override]
        """Complete a prompt (or messages), or each item of a list concurrently."""
        params = self.update_gen_params(**gen_params)
        batch = isinstance(inputs, list) and bool(inputs) and not isinstance(inputs[0], Mapping)
        texts = await asyncio.gather(*(self._one(p, params) for p in (inputs if batch else [inputs])))
        return list(texts) if batch else texts[0]

    async def stream_generate(  # type: ignore[override]
        self, inputs: Any, session_ids: Any = None, **gen_params: Any
    ) -> AsyncIterator[StreamItem]:
        """Stream one reply as cumulative ``(status, text, None)``."""
        params = self.update_gen_params(**gen_params)
        text = ""
        async for delta in aiterate_thread(self._producer(inputs, params), name="plait-lmdeploy"):
            text += delta
            yield ModelStatusCode.STREAM_ING, self._finish(text, params), None
        yield ModelStatusCode.END, self._finish(text, params), None

    async def chat(self, inputs: Any, session_ids: Any = None, **gen_params: Any) -> Any:  # type: ignore[override]
        """Reply to a conversation, or to each conversation of a list concurrently."""
        if self._is_batch(inputs):
            prompts, params = self._render_batch(inputs, gen_params)
            return await self.generate(prompts, session_ids, **params)
        return await super().chat(inputs, session_ids, **gen_params)
