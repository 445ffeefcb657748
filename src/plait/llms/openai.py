"""Clients for any OpenAI-compatible chat-completions server (OpenAI, vLLM, LMDeploy, Ollama, llama.cpp).

`AsyncGPTAPI` runs on the caller's event loop over one connection pool per loop (plait's
HTTP/1.1 client for plain ``http://`` servers, aiohttp for ``https://`` and proxies; see
`plait.llms._http`).
`GPTAPI` is the same code run on a private event-loop thread the client owns, so both
share one IO path (`ChatTransport`) and every wire decision (`_openai_protocol`).

Example:
    ```python
    llm = GPTAPI('qwen2.5-7b-instruct', api_base='http://127.0.0.1:8000/v1', key=None)
    llm.chat([{'role': 'user', 'content': 'hi'}])            # -> str
    reply = llm.complete(messages, tools=[weather_schema])   # -> ModelResponse with .tool_calls
    for status, text, extra in llm.stream_chat(messages): ...  # extra: reasoning so far, END: ModelResponse
    llm.fetch_context_window()                               # -> 32768 on a vLLM server, else None
    ```
"""

from __future__ import annotations

import asyncio
import logging
import os
import weakref
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from typing import Any, ClassVar, SupportsFloat, TypeAlias, overload
from urllib.parse import urlsplit, urlunsplit

from ..exceptions import LLMError, UserError
from ..schema import ModelStatusCode, Reasoning
from ..types import SessionIds
from ..utils._aio import LoopThread
from ..utils.redact import redact_url
from ._openai_core import ChatTransport, KeyRing
from ._openai_protocol import (
    OPENAI_CHAT_PARAMS,
    Payload,
    StreamAccumulator,
    ToolChoice,
    ToolSpec,
    build_payload,
    chat_completions_url,
)
from ._retry import RetryPolicy
from ._tool_llm import AsyncToolLLM, ToolLLM, ToolRequest
from .base_llm import (
    LAGENT_DROPPED,
    ChatBatch,
    ChatInput,
    GenParams,
    LLMCore,
    StreamItem,
    is_chat_batch,
    pop_base_gen_params,
)
from .profiles import ModelProfile, ReasoningReplay, check_replay, profile_for
from .response import ModelResponse, Usage
from .templates import APITemplateParser, MetaTemplate, RoleSpec, api_meta

__all__ = ["GPTAPI", "OPENAI_META", "AsyncGPTAPI"]

logger = logging.getLogger(__name__)

OPENAI_META: list[RoleSpec] = api_meta("system")

_CONTEXT_KEYS = ("max_model_len", "context_length", "context_window", "n_ctx")
"""Where a ``/models`` entry may state the model's context size (vLLM: ``max_model_len``), first found wins."""

_API_GEN_PARAMS = OPENAI_CHAT_PARAMS | {"max_tokens", "extra_body"} | LAGENT_DROPPED
"""The generation parameters an OpenAI-compatible client takes beyond plait's own: the API's request fields,
``extra_body`` for any other, and those Lagent's client accepts and drops."""

_HOSTED_NEEDING_KEY = frozenset({"api.openai.com"})
"""Hosts that answer every request without a key with 401: a client for one needs a key when it is built."""

_MAX_CONTEXT_WINDOW = 10**8
"""The largest context size taken from a server; a larger one is not believed."""

_Request: TypeAlias = tuple[Payload, GenParams, float | None]
"""One prepared request: the body, this call's parameters, and its timeout override."""


def _as_list(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [v for v in value if v]


def _resolve_keys(key: str | Sequence[str] | None) -> list[str]:
    if key == "ENV":
        env = os.environ.get("OPENAI_API_KEY", "")
        return [k.strip() for k in env.split(",") if k.strip()]
    return _as_list(key)


def _seconds(value: object) -> float | None:
    """A per-call ``timeout=`` override: seconds, or None for the client's own."""
    if value is None or isinstance(value, (int, float)):
        return value
    if isinstance(value, SupportsFloat):  # numpy scalars and the like
        return float(value)
    raise TypeError(f"timeout must be a number of seconds or None, not {type(value).__name__}")


def _models_url(chat_url: str) -> str:
    """The ``/models`` listing beside a chat-completions URL (its query string kept)."""
    parts = urlsplit(chat_url)
    return urlunsplit(parts._replace(path=parts.path.removesuffix("/chat/completions") + "/models"))


def _window_value(value: object) -> int | None:
    """`value` as a context size: an int (not a bool) in 1..`_MAX_CONTEXT_WINDOW`, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= _MAX_CONTEXT_WINDOW:
        return value
    return None


def _reported_context_window(listing: object, model: str) -> int | None:
    """The context size a ``/models`` listing reports for `model` (None: it reports none, or nothing believable).

    The entry whose ``id`` is `model`, else the first, states it in one of `_CONTEXT_KEYS`
    (the first present decides) or, as llama.cpp's server does, in ``meta``: ``n_ctx``, the
    context the server was started with and enforces (a longer request gets HTTP 400), else
    ``n_ctx_train`` (servers that report only the model's trained size).
    """
    entries = listing.get("data") if isinstance(listing, Mapping) else None
    if not isinstance(entries, list) or not entries:
        return None
    entry = next((e for e in entries if isinstance(e, Mapping) and e.get("id") == model), entries[0])
    if not isinstance(entry, Mapping):
        return None
    for key in _CONTEXT_KEYS:
        if entry.get(key) is not None:
            return _window_value(entry[key])
    meta = entry.get("meta")
    if not isinstance(meta, Mapping):
        return None
    return _window_value(meta["n_ctx"] if meta.get("n_ctx") is not None else meta.get("n_ctx_train"))


def _proxy_url(proxies: str | Mapping[str, str] | None, url: str) -> str | None:
    if proxies is None or proxies == "env":
        return None
    if isinstance(proxies, str):
        return proxies
    scheme = url.split(":", 1)[0]
    return proxies.get(scheme) or proxies.get("https") or proxies.get("http")


class _GPTAPICore(LLMCore):
    """Configuration, request building and reply handling shared by `GPTAPI` and `AsyncGPTAPI`.

    Args:
        model_type: Model name, sent as is (any name the server knows).
        retry: Maximum attempts per request (the first included).
        json_mode: Ask for a JSON object reply (``response_format``).
        key: An API key, a list of keys (used round-robin; keys out of quota are skipped),
            ``'ENV'`` for ``$OPENAI_API_KEY`` (comma-separated for several), or None. With no
            key, requests carry no ``Authorization`` header (fine for local servers).
        org: Organization id(s) for the ``OpenAI-Organization`` header.
        meta_template: Role mapping for `APITemplateParser` (default: system/user/assistant,
            environment sent as system).
        api_base: Base URL (``http://127.0.0.1:8000/v1``) or the full chat-completions URL.
            When not given: ``$OPENAI_BASE_URL`` (or ``$OPENAI_API_BASE``) if set, else OpenAI's.
        proxies: Proxy URL, a ``{'http': ..., 'https': ...}`` dict, ``'env'`` to read the
            environment's proxy settings, or None for direct connections.
        timeout: Per-attempt timeout in seconds; for streams, the longest wait for the
            connection or between chunks. Override per call with ``timeout=``.
        stream_timeout: The longest one streaming attempt may take in all, in seconds;
            keep-alive comments do not extend it, and an attempt that runs past it fails with
            `LLMTimeoutError` and is retried like any timeout. None (the default): four times
            the attempt's ``timeout`` (no limit when that is None); ``math.inf``: no limit.
        backoff_base: First retry backoff in seconds (doubles per attempt, with jitter).
        backoff_max: Longest retry backoff in seconds.
        max_retry_after: Longest server ``Retry-After`` honoured, in seconds.
        max_connections: Connection-pool size (per event loop).
        context_window: The model's context size in tokens, when known; None (the default)
            leaves it unknown until `fetch_context_window` asks the server.
        profile: What plait assumes about the model's family (`plait.llms.profiles`): how
            its reasoning is read and sent back. None (the default): matched from
            `model_type` and `api_base` by `profile_for` (OpenRouter's URL: its profile).
        reasoning_replay: Overrides the profile's reasoning replay: ``'field'`` (assistant
            turns that called tools send their reasoning back in the profile's
            ``reasoning_field``), ``'tags'`` (inline ``<think>``) or ``'drop'``.
        **gen_params: Generation defaults: ``max_new_tokens`` (sent as ``max_tokens``, no
            cap), ``temperature``, ``top_p``, ``stop_words`` (sent as ``stop``), any OpenAI
            request field (``seed``, ``presence_penalty``, ``max_completion_tokens``...), and
            ``extra_body`` for server-specific fields (``{'top_k': 20}`` on vLLM). ``top_k``
            and ``repetition_penalty`` are kept for the record but not sent (the OpenAI
            API has no such fields). None values are not sent.
    """

    is_api = True
    native_response_format = True  # response_format is a request field
    stream_tools = True  # stream_chat accepts tools=; the END item carries the final ModelResponse
    _extra_fields: tuple[str, ...] = ()
    """Generation parameters the server takes beyond OpenAI's fields, sent as body fields when set."""

    chat_is_complete_text: ClassVar[bool] = True
    """``chat(inputs)`` is ``complete(inputs).content``: a `UsageMeter` may ask ``complete`` to see the usage."""

    def __init__(
        self,
        model_type: str = "gpt-4o-mini",
        retry: int = 2,
        json_mode: bool = False,
        key: str | Sequence[str] | None = "ENV",
        org: str | Sequence[str] | None = None,
        meta_template: MetaTemplate | None = None,
        api_base: str | None = None,
        proxies: str | Mapping[str, str] | None = None,
        timeout: float | None = 300.0,
        *,
        stream_timeout: float | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        max_retry_after: float = 60.0,
        max_connections: int = 1024,
        context_window: int | None = None,
        profile: ModelProfile | None = None,
        reasoning_replay: ReasoningReplay | None = None,
        **gen_params: object,
    ) -> None:
        if profile is not None and not isinstance(profile, ModelProfile):
            raise UserError(f"profile must be a ModelProfile or None, not {type(profile).__name__}")
        profile = profile_for(model_type, server=api_base or _default_api_base()) if profile is None else profile
        if reasoning_replay is not None:
            profile = profile.replace(reasoning_replay=check_replay(reasoning_replay))
        self.profile = profile
        if context_window is not None and (
            not isinstance(context_window, int) or isinstance(context_window, bool) or context_window <= 0
        ):
            raise UserError(f"context_window must be a positive number of tokens or None, not {context_window!r}")
        base = pop_base_gen_params(gen_params, self, _API_GEN_PARAMS.union(self._extra_fields))
        super().__init__(
            path=model_type,
            template_parser=APITemplateParser,
            meta_template=OPENAI_META if meta_template is None else meta_template,
            **base,
        )
        self.gen_params.update(gen_params)
        self.model_type = model_type
        self.json_mode = json_mode
        self.context_window: int | None = context_window
        self._context_asked = False
        self.retry = max(1, int(retry))
        url = chat_completions_url(api_base or _default_api_base())
        self.api_base = url
        keys = _resolve_keys(key)
        if not keys and urlsplit(url).hostname in _HOSTED_NEEDING_KEY:
            raise UserError(
                f"{type(self).__name__} needs an API key for {redact_url(url)}: pass key= or set $OPENAI_API_KEY "
                "(for a local or other server, pass api_base= or set $OPENAI_BASE_URL)"
            )
        if keys and "@" in urlsplit(url).netloc:
            raise UserError(
                "api_base carries credentials (user:password@) and a key is set too: a request holds one "
                "Authorization header; pass key=None to use the URL's, or drop them from the URL"
            )
        self._transport = ChatTransport(
            url,
            KeyRing(keys, _as_list(org)),
            RetryPolicy(
                max_attempts=self.retry,
                backoff_base=backoff_base,
                backoff_max=backoff_max,
                max_retry_after=max_retry_after,
            ),
            timeout=timeout,
            stream_timeout=stream_timeout,
            proxy=_proxy_url(proxies, url),
            trust_env=proxies == "env",
            max_connections=max_connections,
        )
        self._setup()

    def _setup(self) -> None:
        """Per-class setup after the shared configuration (the sync client starts its IO here)."""

    @property
    def usage(self) -> Usage:
        """Token counts summed over every successful request of this client."""
        return self._transport.usage

    @property
    def keys(self) -> KeyRing:
        """The API keys in rotation (and those retired for insufficient quota)."""
        return self._transport.keys

    async def _fetch_context_window(self) -> int | None:
        """`context_window`, asked of the server (``GET /models``) the first time it is unknown.

        The answer is kept, also when there is none: the server is asked at most once.
        Failures are logged (debug level) and give None.
        """
        if self.context_window is not None or self._context_asked:
            return self.context_window
        url = _models_url(self.api_base)
        try:
            listing = await self._transport.get_json(url)
        except LLMError as exc:  # its message is free of keys and URL secrets
            logger.debug("could not ask %s for the context window: %s", redact_url(url), exc)
            listing = None
        self._context_asked = True
        window = _reported_context_window(listing, self.model_type)
        if window is None and listing is not None:
            logger.debug("%s reports no usable context window for %r", redact_url(url), self.model_type)
        self.context_window = window
        return window

    def _request(
        self,
        inputs: ChatInput,
        overrides: Mapping[str, object],
        *,
        stream: bool,
        tools: Sequence[ToolSpec] | None = None,
        tool_choice: ToolChoice = None,
        rendered: bool = False,
    ) -> _Request:
        """``(payload, params, timeout)`` for one call: render, merge overrides, build the body."""
        overrides = dict(overrides)
        timeout = _seconds(overrides.pop("timeout", None))
        if rendered:
            messages, params = inputs, self.update_gen_params(**overrides)
        else:
            messages, params = self._prepare(inputs, overrides)
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        payload = build_payload(
            self.model_type,
            messages,
            params,
            stream=stream,
            json_mode=self.json_mode,
            tools=tools,
            tool_choice=tool_choice,
            reasoning_replay=self.profile.reasoning_replay,
            reasoning_field=self.profile.reasoning_field,
        )
        for name in self._extra_fields:
            if params.get(name) is not None:
                payload.setdefault(name, params[name])
        return payload, params, timeout

    def _tool_request(self, call: ToolRequest, *, stream: bool) -> _Request:
        """The prepared request of a `complete` or `stream_chat` call."""
        return self._request(call.inputs, call.overrides, stream=stream, tools=call.tools, tool_choice=call.tool_choice)

    async def _complete(self, request: _Request) -> ModelResponse:
        """Send one prepared request; the reply with client-side stop words applied."""
        payload, params, timeout = request
        response = await self._transport.complete(payload, timeout, self.profile.think_tags)
        return self._finish_response(response, params)

    def _batch_requests(self, inputs: ChatBatch, gen_params: Mapping[str, object]) -> list[_Request]:
        """One request per conversation of a batch."""
        return [self._request(conversation, gen_params, stream=False) for conversation in inputs]

    async def _complete_texts(self, requests: list[_Request]) -> list[str]:
        """The reply texts of `requests`, sent concurrently."""
        return [response.content for response in await asyncio.gather(*map(self._complete, requests))]

    def _stream_item(self, acc: StreamAccumulator, final: bool, params: Mapping[str, object]) -> StreamItem:
        if final:  # the whole reply, split as a non-streamed one is (its text may settle differently)
            response = self._finish_response(acc.response(), params)
            return ModelStatusCode.END, response.content, response
        reasoning = acc.reasoning  # the reasoning so far rides on each item, so it streams before the answer
        return ModelStatusCode.STREAM_ING, self._finish(acc.text, params), Reasoning(reasoning) if reasoning else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_type={self.model_type!r}, api_base={redact_url(self.api_base)!r})"


class GPTAPI(_GPTAPICore, ToolLLM):
    """Synchronous client for OpenAI-compatible servers (see `_GPTAPICore` for the arguments).

    Thread-safe: calls from many threads share one private IO loop and its connection
    pool. `close()` (or ``with GPTAPI(...) as llm``) releases them; so does garbage
    collection.
    """

    def _setup(self) -> None:
        self._io = LoopThread(name=f"plait-{self.model_type}")
        self._finalizer = weakref.finalize(self, self._io.close, self._transport.http.aclose)

    def _respond(self, call: ToolRequest) -> ModelResponse:
        return self._io.run(self._complete(self._tool_request(call, stream=False)))

    def fetch_context_window(self) -> int | None:
        """The model's context size: `context_window`, asked of the server once when it is unknown.

        When no ``context_window`` was configured, the first call lists the server's models
        (``GET {api_base}/models``, with this client's keys, proxy and timeout) and reads
        the size where servers report it: vLLM's ``max_model_len``, a ``context_length``,
        ``context_window`` or ``n_ctx`` field, or llama.cpp's ``meta.n_ctx`` (its server's
        context; ``meta.n_ctx_train`` where only that is reported), on the
        entry of this client's model (else the first). The answer, None included, is
        kept: later calls do not ask again. Never raises: a failure, or a value that is not
        an int in 1..10**8, gives None (logged at debug level).
        """
        return self._io.run(self._fetch_context_window())

    @overload
    def chat(self, inputs: ChatInput, **gen_params: object) -> str: ...

    @overload
    def chat(self, inputs: ChatBatch, **gen_params: object) -> list[str]: ...

    def chat(self, inputs: ChatInput | ChatBatch, **gen_params: Any) -> str | list[str]:
        """The reply text (a list of texts for a batch: a list of conversations)."""
        if is_chat_batch(inputs):
            return self._io.run(self._complete_texts(self._batch_requests(inputs, gen_params)))
        return self.complete(inputs, **gen_params).content

    def generate(self, inputs: ChatInput, **gen_params: object) -> str:
        """Reply to already-rendered API messages (``chat`` renders them for you)."""
        request = self._request(inputs, gen_params, stream=False, rendered=True)
        return self._io.run(self._complete(request)).content

    def _respond_stream(self, call: ToolRequest) -> Iterator[StreamItem]:
        payload, params, timeout = self._tool_request(call, stream=True)
        for acc, final in self._io.iterate(self._transport.stream(payload, timeout, self.profile.think_tags)):
            yield self._stream_item(acc, final, params)

    def close(self) -> None:
        """Close the connection pool and stop the IO thread (a later call starts them again)."""
        self._io.close(self._transport.http.aclose)

    def __enter__(self) -> GPTAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncGPTAPI(_GPTAPICore, AsyncToolLLM):
    """Asynchronous client for OpenAI-compatible servers (see `_GPTAPICore` for the arguments).

    Task-safe: concurrent calls on one event loop share one pooled session; each loop the
    client is used from gets its own, closed when that loop shuts down. ``await aclose()``
    (or ``async with``) closes the current loop's session now.
    """

    async def _respond(self, call: ToolRequest) -> ModelResponse:
        return await self._complete(self._tool_request(call, stream=False))

    async def fetch_context_window(self) -> int | None:
        """The model's context size: `context_window`, asked of the server once when it is unknown.

        The asynchronous twin of `GPTAPI.fetch_context_window`.
        """
        return await self._fetch_context_window()

    @overload
    async def chat(self, inputs: ChatInput, session_ids: SessionIds = None, **gen_params: object) -> str: ...

    @overload
    async def chat(self, inputs: ChatBatch, session_ids: SessionIds = None, **gen_params: object) -> list[str]: ...

    async def chat(
        self, inputs: ChatInput | ChatBatch, session_ids: SessionIds = None, **gen_params: Any
    ) -> str | list[str]:
        """The reply text (a list of texts for a batch: a list of conversations)."""
        if is_chat_batch(inputs):
            return await self._complete_texts(self._batch_requests(inputs, gen_params))
        return (await self.complete(inputs, **gen_params)).content

    async def generate(self, inputs: ChatInput, session_ids: SessionIds = None, **gen_params: object) -> str:
        """Reply to already-rendered API messages (``chat`` renders them for you)."""
        return (await self._complete(self._request(inputs, gen_params, stream=False, rendered=True))).content

    async def _respond_stream(self, call: ToolRequest, session_ids: SessionIds) -> AsyncGenerator[StreamItem, None]:
        payload, params, timeout = self._tool_request(call, stream=True)
        async for acc, final in self._transport.stream(payload, timeout, self.profile.think_tags):
            yield self._stream_item(acc, final, params)

    async def aclose(self) -> None:
        """Close this client's connection pool on the running loop."""
        await self._transport.http.aclose()

    async def __aenter__(self) -> AsyncGPTAPI:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _default_api_base() -> str:
    """The server to use when none is given: the environment's choice, else OpenAI."""
    return os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or _OPENAI_URL


_OPENAI_URL = "https://api.openai.com/v1/chat/completions"
