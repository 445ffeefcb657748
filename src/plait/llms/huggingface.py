"""Hugging Face transformers models run in-process, on transformers' public ``generate`` API.

* `HFTransformer` / `HFTransformerCasualLM` (also spelled `HFTransformerCausalLM`): a causal
  LM prompted with a conversation rendered by a meta template (`LMTemplateParser`).
* `HFTransformerChat`: the same model prompted through the tokenizer's own chat template.

Sampling goes through a `GenerationConfig`; stop words become ``stop_strings`` (and
eos ids when a stop word is one token); streaming reads new tokens through a streamer
while ``generate`` runs on a worker thread. The model is placed on CUDA when available,
else on Apple's MPS, else on the CPU, unless ``model_kwargs`` has a ``device_map``.
Each class has an async twin running the same core in worker threads.

Every class also tells its context size (``context_window``) and counts a conversation's
prompt tokens exactly (``count_tokens``), as `plait.context.ContextPolicy` reads them.

Example:
    ```python
    llm = HFTransformerCasualLM('Qwen/Qwen2.5-0.5B-Instruct', meta_template=INTERNLM2_META, max_new_tokens=256)
    llm.chat([{'role': 'user', 'content': 'hi'}])
    ```
"""

from __future__ import annotations

import copy
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeGuard, cast

from ..exceptions import MissingDependencyError, UserError
from ..types import SessionIds
from ._decoded import number
from ._threaded import AsyncThreadStreamed, Producer, iterate_thread, to_thread_cancellable
from .base_llm import (
    AsyncBatchLLM,
    BatchLLM,
    GenParams,
    LLMCore,
    Message,
    Prompt,
    StreamItem,
    accumulate,
    pop_base_gen_params,
    stop_words_of,
)
from .templates import APITemplateParser, MetaTemplate

if TYPE_CHECKING:
    import torch
    from transformers import BatchEncoding

__all__ = [
    "AsyncHFTransformer",
    "AsyncHFTransformerCasualLM",
    "AsyncHFTransformerChat",
    "HFTransformer",
    "HFTransformerCasualLM",
    "HFTransformerCausalLM",
    "HFTransformerChat",
    "generation_kwargs",
    "pick_device",
]

logger = logging.getLogger(__name__)

_NOT_PASSED = frozenset({"stop_words", "session_ids"})

_WINDOW_FIELDS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
"""The fields in which model configs state their context size (GPT-2's ``n_positions``, ChatGLM's ``seq_length``...)."""

_SANE_MAX_LENGTH = 10**7
"""A tokenizer's ``model_max_length`` at or above this is transformers' "no limit" placeholder, not a size."""

_DEFAULT_CONTEXT_WINDOW = 4096
"""The context size assumed when neither the model config nor the tokenizer states one."""


def _import_hf() -> tuple[ModuleType, ModuleType]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise MissingDependencyError(exc.name or "transformers", extra="hf", feature="HFTransformer") from None
    return torch, transformers


def pick_device(torch: ModuleType) -> str:
    """The best device torch can use here: ``cuda``, else ``mps``, else ``cpu``."""
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def generation_kwargs(params: Mapping[str, object]) -> dict[str, object]:
    """`GenerationConfig` fields for plait generation parameters.

    ``temperature <= 0`` means greedy decoding, and then the sampling fields get their
    neutral values (None would let a checkpoint's sampling defaults back in, and transformers
    warns about those); an explicit ``do_sample`` wins. A
    ``repetition_penalty`` of 1.0 is left out. Stop words are not included (see
    `_HFCore._stop_config`); any other key is passed through.
    """
    params = dict(params)
    temperature = params.pop("temperature", None)
    top_p, top_k = params.pop("top_p", None), params.pop("top_k", None)
    penalty = params.pop("repetition_penalty", None)
    do_sample = params.pop("do_sample", None)
    if do_sample is None:
        do_sample = temperature is not None and number(temperature) > 0
    out: dict[str, object] = {"do_sample": bool(do_sample)}
    if do_sample:
        out.update(temperature=temperature, top_p=top_p, top_k=top_k)
    else:
        out.update(temperature=1.0, top_p=1.0, top_k=50)
    if penalty is not None and number(penalty) != 1.0:
        out["repetition_penalty"] = penalty
    out.update({k: v for k, v in params.items() if k not in _NOT_PASSED and v is not None})
    return out


class _Deltas:
    """Incremental detokenization: text grows only when the new tokens decode to whole characters.

    Decodes a short window (the previous few tokens plus the new ones), never the whole
    output, so streaming a long reply stays linear.
    """

    def __init__(self, decode: Callable[[list[int]], str]) -> None:
        self.decode = decode
        self.ids: list[int] = []
        self.prefix = self.read = 0

    def feed(self, new_ids: Sequence[int]) -> str:
        """The text the new token ids add ("" while a character is still incomplete)."""
        self.ids.extend(new_ids)
        before = self.decode(self.ids[self.prefix : self.read])
        after = self.decode(self.ids[self.prefix :])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self.prefix, self.read = self.read, len(self.ids)
            return after[len(before) :]
        return ""

    def flush(self) -> str:
        """Whatever text is left undecoded at the end."""
        before = self.decode(self.ids[self.prefix : self.read])
        after = self.decode(self.ids[self.prefix :])
        self.prefix = self.read = len(self.ids)
        return after[len(before) :] if len(after) > len(before) else ""


def _streamer(decode: Callable[[list[int]], str], emit: Callable[[str], None]) -> object:
    """A ``transformers`` streamer passing text deltas to `emit` (the prompt ids it gets first are skipped)."""
    from transformers.generation.streamers import BaseStreamer

    class _DeltaStreamer(BaseStreamer):
        def __init__(self) -> None:
            self.deltas = _Deltas(decode)
            self.prompt_seen = False

        def put(self, value: torch.Tensor) -> None:
            if not self.prompt_seen:
                self.prompt_seen = True
                return
            delta = self.deltas.feed([int(i) for i in value.reshape(-1).tolist()])
            if delta:
                emit(delta)

        def end(self) -> None:
            delta = self.deltas.flush()
            if delta:
                emit(delta)

    return _DeltaStreamer()


def _cancel_criteria(cancel: threading.Event) -> object:
    """A stopping criterion that ends generation once `cancel` is set."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class _Cancelled(StoppingCriteria):
        def __call__(
            self, input_ids: torch.LongTensor, scores: tuple[torch.Tensor] | None, **kwargs: object
        ) -> torch.BoolTensor:
            done = torch.full((input_ids.shape[0],), cancel.is_set(), dtype=torch.bool, device=input_ids.device)
            return cast("torch.BoolTensor", done)

    return StoppingCriteriaList([_Cancelled()])


def _positive_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _config_context_window(config: object) -> int | None:
    """The context size a model config states, or None when it states none.

    The smallest of the `_WINDOW_FIELDS` the config (or its text part, for a multimodal
    model) sets to a positive int: some configs state both a position table and a shorter
    trained length (Qwen's ``max_position_embeddings`` and ``seq_length``).
    """
    parts = [config]
    text_config = getattr(config, "get_text_config", None)
    if callable(text_config):
        try:
            parts.append(text_config(decoder=True))
        except ValueError:  # several text parts: ambiguous, keep to the top-level fields
            pass
    values = [getattr(part, name, None) for part in parts for name in _WINDOW_FIELDS]
    return min((value for value in values if _positive_int(value)), default=None)


class _GenerationConfig(Protocol):
    """The ``GenerationConfig`` fields read or set by name here (the others go through ``setattr``)."""

    eos_token_id: int | list[int] | None
    pad_token_id: int | None


class _CausalLM(Protocol):
    """The parts of a ``transformers`` causal LM (``AutoModelForCausalLM``) used here."""

    @property
    def config(self) -> object:
        """The checkpoint's model configuration (a ``PretrainedConfig``)."""

    @property
    def generation_config(self) -> _GenerationConfig:
        """The checkpoint's generation defaults."""

    @property
    def device(self) -> torch.device:
        """Where the model's weights are."""

    def generate(self, **kwargs: object) -> torch.Tensor:
        """The prompt and reply token ids, one row per prompt."""


class _ChatTokenizer(Protocol):
    """The part of a ``transformers`` tokenizer `_ChatTemplate` uses."""

    def apply_chat_template(
        self, conversation: list[dict[str, object]], *, add_generation_prompt: bool, tokenize: bool
    ) -> object:
        """The conversation rendered by the tokenizer's chat template (a str when not tokenized)."""


class _ChatTemplate:
    """Renders messages with the tokenizer's chat template (roles mapped by an optional meta template)."""

    def __init__(self, meta_template: MetaTemplate | None, tokenizer: _ChatTokenizer) -> None:
        self.roles = APITemplateParser(meta_template)
        self.tokenizer = tokenizer
        if not getattr(tokenizer, "chat_template", None):
            raise UserError(
                "this tokenizer has no chat template; use HFTransformerCasualLM with a meta_template instead"
            )

    def __call__(self, dialog: str | Sequence[Message]) -> str:
        if isinstance(dialog, str):
            return dialog
        messages = self.roles(dialog)
        return str(self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))


class _HFCore(LLMCore):
    """Loading, request building and blocking generation; shared by the sync and async classes (see `HFTransformer`)."""

    chat_template: ClassVar[bool] = False
    _stream_thread: ClassVar[str] = "plait-hf"

    def __init__(
        self,
        path: str,
        tokenizer_path: str | None = None,
        tokenizer_kwargs: Mapping[str, object] | None = None,
        tokenizer_only: bool = False,
        model_kwargs: Mapping[str, object] | None = None,
        meta_template: MetaTemplate | None = None,
        stop_words_id: int | Sequence[int] | None = None,
        *,
        device: str | None = None,
        trust_remote_code: bool = False,
        context_window: int | None = None,
        **gen_params: object,
    ) -> None:
        if context_window is not None and not _positive_int(context_window):
            raise UserError(f"context_window must be a positive number of tokens or None, not {context_window!r}")
        self._torch, self._transformers = _import_hf()
        base = pop_base_gen_params(gen_params, self, set(self._transformers.GenerationConfig().to_dict()))
        super().__init__(path, tokenizer_only, meta_template=meta_template, **base)
        self._context_window = context_window
        self._trust_remote_code = trust_remote_code
        self.gen_params.update(gen_params)
        self.stop_words_id = [stop_words_id] if isinstance(stop_words_id, int) else list(stop_words_id or [])
        tok_kwargs = {"trust_remote_code": trust_remote_code, **(tokenizer_kwargs or {})}
        self.tokenizer = self._transformers.AutoTokenizer.from_pretrained(tokenizer_path or path, **tok_kwargs)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if self.chat_template:
            self.template_parser = _ChatTemplate(meta_template, self.tokenizer)
        self.model: _CausalLM | None = None
        self.device: str | None = None
        if not tokenizer_only:
            self._load_model(path, dict(model_kwargs or {}), device, trust_remote_code)

    def _load_model(self, path: str, kwargs: dict[str, object], device: str | None, trust_remote_code: bool) -> None:
        kwargs.setdefault("trust_remote_code", trust_remote_code)
        if "torch_dtype" not in kwargs:
            kwargs.setdefault("dtype", "auto")
        model = self._transformers.AutoModelForCausalLM.from_pretrained(path, **kwargs)
        if "device_map" not in kwargs:
            model = model.to(device or pick_device(self._torch))
        self.model = model.eval()
        self.device = str(model.device)

    # context

    @property
    def context_window(self) -> int:
        """The tokens one request may take (prompt and reply).

        The ``context_window`` argument when given, else the size the model config states
        (``max_position_embeddings`` or the like; read with ``AutoConfig`` for a
        ``tokenizer_only`` object), else the tokenizer's ``model_max_length`` when it is a
        real limit, else 4096. Found once, then kept.
        """
        if self._context_window is None:
            window = _config_context_window(self._model_config())
            if window is None:
                limit = getattr(self.tokenizer, "model_max_length", None)
                window = limit if _positive_int(limit) and limit < _SANE_MAX_LENGTH else _DEFAULT_CONTEXT_WINDOW
            self._context_window = window
        return self._context_window

    def _model_config(self) -> object:
        """The loaded model's config, else the checkpoint's read by ``AutoConfig`` (None when it has none)."""
        if self.model is not None:
            return self.model.config
        try:
            return self._transformers.AutoConfig.from_pretrained(self.path, trust_remote_code=self._trust_remote_code)
        except Exception as exc:  # no config.json (a tokenizer-only directory), offline, remote code refused...
            logger.debug("%s: no model config to read the context window from: %s", self.path, exc)
            return None

    def count_tokens(self, messages: Sequence[Mapping[str, object]]) -> int:
        """The exact number of prompt tokens generation would feed the model for `messages`.

        The messages are rendered by `template_parser` (the tokenizer's chat template for
        `HFTransformerChat`, the meta template otherwise) and tokenized exactly as
        generation tokenizes its prompts. Needs only the tokenizer (works with
        ``tokenizer_only``), and is synchronous on the async classes too: it runs no model,
        only the tokenizer, on the CPU.
        """
        prompt, _ = self._prepare(messages, {})
        return int(self._tokenize([prompt])["input_ids"].shape[1])

    # requests

    def _tokenize(self, prompts: Sequence[Prompt]) -> BatchEncoding[torch.Tensor]:
        """`prompts` as the token ids ``generate`` is fed: one left-padded batch of tensors (on the CPU)."""
        self.tokenizer.padding_side = "left"
        # a chat template writes its own BOS; a meta template does not
        encoded: BatchEncoding[torch.Tensor] = self.tokenizer(
            prompts, return_tensors="pt", padding=True, add_special_tokens=not self.chat_template
        )
        return encoded

    def _loaded(self) -> _CausalLM:
        """The model (`UserError` for a tokenizer-only object)."""
        if self.model is None:
            raise UserError(f"{type(self).__name__} was created with tokenizer_only=True and cannot generate")
        return self.model

    def _stop_config(self, stop_words: Iterable[str]) -> dict[str, object]:
        """Stop words as eos ids (one-token words and `stop_words_id`) and ``stop_strings`` (the rest)."""
        eos = self._loaded().generation_config.eos_token_id
        eos_ids: list[int] = [eos] if isinstance(eos, int) else list(eos or [])
        eos_ids += [i for i in self.stop_words_id if i not in eos_ids]
        strings = []
        for word in stop_words:
            ids = self.tokenizer.encode(word, add_special_tokens=False)
            if len(ids) == 1 and self.tokenizer.decode(ids) == word:
                eos_ids += [ids[0]] if ids[0] not in eos_ids else []
            else:
                strings.append(word)
        out: dict[str, object] = {"eos_token_id": eos_ids or None}
        if strings:
            out["stop_strings"] = strings
        return out

    def _generate_args(
        self, prompts: Sequence[Prompt], params: Mapping[str, object], cancel: threading.Event | None
    ) -> tuple[Mapping[str, torch.Tensor], dict[str, object]]:
        """``(inputs, kwargs)`` for one ``model.generate`` call."""
        model = self._loaded()
        inputs = self._tokenize(prompts).to(model.device)
        config = copy.deepcopy(model.generation_config)
        # keys GenerationConfig does not know go to generate(), which rejects the ones the model cannot use
        unknown: dict[str, object] = {}
        for key, value in {**generation_kwargs(params), **self._stop_config(stop_words_of(params) or [])}.items():
            if hasattr(config, key):
                setattr(config, key, value)
            else:
                unknown[key] = value
        config.pad_token_id = self.tokenizer.pad_token_id
        kwargs: dict[str, object] = {**unknown, "generation_config": config, "tokenizer": self.tokenizer}
        if cancel is not None:
            kwargs["stopping_criteria"] = _cancel_criteria(cancel)
        return inputs, kwargs

    def _decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def _generate_texts(
        self, prompts: Sequence[Prompt], params: Mapping[str, object], cancel: threading.Event | None = None
    ) -> list[str]:
        """Blocking generation: the replies to `prompts`, in one padded batch."""
        encoded, kwargs = self._generate_args(prompts, params, cancel)
        output = self._loaded().generate(**encoded, **kwargs)
        width = encoded["input_ids"].shape[1]
        return [self._finish(self._decode(row[width:].tolist()), params) for row in output]

    def _producer(self, prompt: Prompt, params: Mapping[str, object]) -> Producer[str]:
        """Streaming generation for `iterate_thread`: emits text deltas."""

        def produce(emit: Callable[[str], None], cancel: threading.Event) -> None:
            encoded, kwargs = self._generate_args([prompt], params, cancel)
            kwargs["streamer"] = _streamer(self._decode, emit)
            self._loaded().generate(**encoded, **kwargs)

        return produce

    def __repr__(self) -> str:
        return f"{type(self).__name__}(path={self.path!r}, device={self.device!r})"


class HFTransformer(_HFCore, BatchLLM):
    """A transformers causal LM, prompted through a meta template.

    Lagent's version loaded ``AutoModel``, which has no language-model head for most
    architectures; plait loads ``AutoModelForCausalLM`` for every class here.

    Args:
        path: Model directory or hub id.
        tokenizer_path: Tokenizer directory or hub id (default: `path`).
        tokenizer_kwargs: Extra ``AutoTokenizer.from_pretrained`` arguments.
        tokenizer_only: Load only the tokenizer (no generation).
        model_kwargs: Extra ``from_pretrained`` arguments (``dtype`` defaults to ``'auto'``;
            a ``device_map`` such as ``'auto'`` places the model itself and needs accelerate).
        meta_template: Role layout used to render conversations (e.g. `INTERNLM2_META`).
        stop_words_id: Token ids that end generation, besides the model's eos.
        device: Where to put the model without a ``device_map`` (default: `pick_device`).
        trust_remote_code: Allow the checkpoint's own Python code (needed by e.g. InternLM2).
        context_window: The model's context size in tokens, when it should not be read from
            the model config (see `context_window`).
        **gen_params: ``max_new_tokens``, ``temperature`` (``<= 0``: greedy), ``top_p``,
            ``top_k``, ``repetition_penalty``, ``stop_words``, and any other
            `GenerationConfig` field (``num_beams``, ``do_sample``...).

    Attributes:
        device: Where the model's weights are, as torch names that device (``'cpu'``,
            ``'cuda:0'``, ``'mps:0'``); None with ``tokenizer_only``. The ``device`` argument
            and `pick_device` name a device type (``'cuda'``), torch then picks its index.
    """

    def _generate_batch(self, prompts: list[Prompt], params: GenParams) -> list[str]:
        return self._generate_texts(prompts, params)

    def stream_generate(self, inputs: Prompt, **gen_params: object) -> Iterator[StreamItem]:
        """Stream the completion of one prompt as cumulative ``(status, text, None)``."""
        params = self.update_gen_params(**gen_params)
        yield from accumulate(iterate_thread(self._producer(inputs, params), name=self._stream_thread), params)


class AsyncHFTransformer(_HFCore, AsyncThreadStreamed, AsyncBatchLLM):
    """The asynchronous twin of `HFTransformer`: generation runs in worker threads."""

    async def _generate_batch(self, prompts: list[Prompt], params: GenParams, session_ids: SessionIds) -> list[str]:
        return await to_thread_cancellable(functools.partial(self._generate_texts, prompts, params))


class HFTransformerCasualLM(HFTransformer):
    """`HFTransformer` under Lagent's spelling (a causal LM prompted through a meta template)."""


HFTransformerCausalLM = HFTransformerCasualLM


class AsyncHFTransformerCasualLM(AsyncHFTransformer):
    """The asynchronous twin of `HFTransformerCasualLM`."""


class HFTransformerChat(HFTransformerCasualLM):
    """A transformers chat model prompted through its tokenizer's chat template.

    Takes the arguments of `HFTransformer`; `meta_template`, when given, only maps roles
    (``api_role``) before the chat template renders the messages. Raises `UserError` at
    construction when the tokenizer has no chat template.
    """

    chat_template = True


class AsyncHFTransformerChat(AsyncHFTransformerCasualLM):
    """The asynchronous twin of `HFTransformerChat`."""

    chat_template = True
