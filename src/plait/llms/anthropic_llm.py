"""Claude through the official ``anthropic`` SDK (``pip install 'plait[anthropic]'``).

`ClaudeAPI` uses the SDK's sync client and `AsyncClaudeAPI` its async client (no nested
event loops). Both share every decision: request building and parsing
(`plait.llms._anthropic_protocol`), key rotation, and error mapping. Retries are the SDK's
own: bounded (``retry`` attempts in all), exponential backoff with jitter, honouring
``retry-after``, on connection errors, 408/409/429 and 5xx. A key the API rejects
(401/403, or an exhausted credit balance) is retired and the next key is tried.

A stream has a deadline besides the SDK's per-read ``timeout``: once the response has
begun, it may take ``stream_timeout`` seconds in all (by default four times ``timeout``),
however many keep-alive ``ping`` events the server sends; past it the stream ends with
`LLMTimeoutError`. Like any failure after the response began, that is not retried.

Example:
    ```python
    llm = ClaudeAPI('claude-3-5-sonnet-20241022', key='sk-ant-...', max_new_tokens=1024)
    llm.chat([{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'hi'}])
    reply = llm.complete(messages, tools=[weather_schema])   # ModelResponse with .tool_calls
    ```
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import AbstractAsyncContextManager, AbstractContextManager, contextmanager, suppress
from types import ModuleType
from typing import Any, ClassVar, Literal, NoReturn, Protocol, TypeAlias, TypeVar, overload

from ..driver import run_async, run_sync
from ..effects import Call, Flow
from ..exceptions import LLMAPIError, LLMConnectionError, LLMError, LLMRateLimitError, LLMTimeoutError, UserError
from ..schema import ModelStatusCode
from ..types import SessionIds
from ..utils._aio import close_with_loop
from ..utils.names import keyword_names
from ..utils.redact import is_clean, redact, url_secrets
from ._anthropic_protocol import build_request, parse_message
from ._openai_core import KeyRing, stream_deadline
from ._optional import import_optional
from ._tool_llm import AsyncToolLLM, ToolLLM, ToolRequest
from .base_llm import LAGENT_DROPPED, ChatInput, GenParams, LLMCore, StreamItem, pop_base_gen_params
from .response import ModelResponse
from .templates import APITemplateParser, MetaTemplate, RoleSpec, api_meta

__all__ = ["CLAUDE_META", "AsyncClaudeAPI", "ClaudeAPI"]

CLAUDE_META: list[RoleSpec] = api_meta("user")


# The parts of the SDK's clients used here (they are called with request dicts built at run time).


class _MessageStream(Protocol):
    """The stream ``client.messages.stream(**request)`` opens (sync)."""

    @property
    def text_stream(self) -> Iterable[str]:
        """The reply's text, piece by piece."""

    def get_final_message(self) -> object:
        """The complete ``Message``."""

    def close(self) -> None:
        """Close the response (safe to call from another thread: a read in progress then fails)."""


class _Messages(Protocol):
    """``client.messages`` (sync)."""

    def stream(self, **request: object) -> AbstractContextManager[_MessageStream]:
        """Open a streamed request."""


class _Client(Protocol):
    """An ``anthropic.Anthropic`` client."""

    @property
    def messages(self) -> _Messages:
        """The Messages API."""

    def close(self) -> None:
        """Close the pooled connections."""


class _AsyncMessageStream(Protocol):
    """The stream ``client.messages.stream(**request)`` opens (async)."""

    @property
    def text_stream(self) -> AsyncIterable[str]:
        """The reply's text, piece by piece."""

    async def get_final_message(self) -> object:
        """The complete ``Message``."""


class _AsyncMessages(Protocol):
    """``client.messages`` (async)."""

    def stream(self, **request: object) -> AbstractAsyncContextManager[_AsyncMessageStream]:
        """Open a streamed request."""


class _AsyncClient(Protocol):
    """An ``anthropic.AsyncAnthropic`` client."""

    @property
    def messages(self) -> _AsyncMessages:
        """The Messages API."""

    async def close(self) -> object:
        """Close the pooled connections."""


_ClientGetter: TypeAlias = Callable[[str], object]
"""The client for a key, returned (sync) or as an awaitable (async); the driver takes either."""

_T = TypeVar("_T")


class _Deadline:
    """The deadline of one streaming attempt, counted from the start of the response.

    The SDK's ``timeout`` bounds each read, and keep-alive ``ping`` events never reach the
    caller, so the deadline is kept outside the SDK: in sync code a watchdog thread closes the
    stream when it passes (the read in progress then fails); in async code each wait is bounded.
    Either way the attempt ends with `LLMTimeoutError`.

    Args:
        seconds: The deadline (None: no limit).
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.passed = False
        self._end: float | None = None

    def error(self) -> LLMTimeoutError:
        """The error of a stream that ran past the deadline."""
        return LLMTimeoutError(f"the stream did not finish within its {self.seconds:g} s deadline (stream_timeout)")

    def _pass(self, close: Callable[[], object]) -> None:
        self.passed = True
        with suppress(Exception):  # the stream may be closing anyway; its reader reports the deadline
            close()

    @contextmanager
    def watch(self, close: Callable[[], object]) -> Iterator[None]:
        """Sync: call `close` when the deadline passes; the block then raises `LLMTimeoutError`."""
        if self.seconds is None:
            yield
            return
        timer = threading.Timer(self.seconds, self._pass, (close,))
        timer.daemon = True
        timer.start()
        try:
            yield
        except Exception as exc:  # whatever the closed stream raised
            if self.passed:
                raise self.error() from exc
            raise
        finally:
            timer.cancel()
        if self.passed:  # the closed stream may also just end early
            raise self.error()

    async def wait(self, awaitable: Awaitable[_T]) -> _T:
        """Async: `awaitable`'s result, or `LLMTimeoutError` once the deadline has passed."""
        if self.seconds is None:
            return await awaitable
        loop = asyncio.get_running_loop()
        if self._end is None:
            self._end = loop.time() + self.seconds
        try:
            return await asyncio.wait_for(awaitable, self._end - loop.time())
        except asyncio.TimeoutError as exc:  # not the builtin TimeoutError before Python 3.11
            self.passed = True
            raise self.error() from exc

    async def next(self, items: AsyncIterator[_T]) -> _T | None:
        """Async: the next of `items` (None at the end), or `LLMTimeoutError` once the deadline has passed."""
        try:
            return await self.wait(anext(items))
        except StopAsyncIteration:
            return None


def _import_anthropic() -> ModuleType:
    return import_optional("anthropic", "anthropic", "ClaudeAPI")


def _create_parameters(sdk: ModuleType) -> frozenset[str] | None:
    """The keyword names of this SDK's ``messages.create`` (None: not readable, so any is taken)."""
    messages = getattr(getattr(getattr(sdk, "resources", None), "messages", None), "Messages", None)
    return None if messages is None else keyword_names(messages.create)


def _resolve_keys(key: str | Sequence[str] | None) -> list[str]:
    if key == "ENV":
        env = os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("Claude_API_KEY") or ""  # noqa: SIM112 (Lagent's name)
        return [k.strip() for k in env.split(",") if k.strip()]
    if key is None:
        return []
    return [key] if isinstance(key, str) else [k for k in key if k]


def _is_key_problem(sdk: ModuleType, exc: BaseException) -> bool:
    """A rejected key (auth, permission) or one whose credit is exhausted: try the next key."""
    if isinstance(exc, (sdk.AuthenticationError, sdk.PermissionDeniedError)):
        return True
    return isinstance(exc, sdk.BadRequestError) and "credit balance" in str(exc).lower()


def _to_plait(sdk: ModuleType, exc: BaseException, attempts: int, secrets: Sequence[str] = ()) -> LLMError | None:
    """The plait error an SDK error stands for (None: not an API failure).

    Its message and body are scrubbed of `secrets` (a body may echo the key), URL passwords
    and key-like values.
    """
    detail = redact(str(exc), secrets)
    if isinstance(exc, sdk.APITimeoutError):
        return LLMTimeoutError(f"Claude request timed out: {detail}", attempts=attempts)
    if isinstance(exc, sdk.APIConnectionError):
        return LLMConnectionError(f"could not reach the Anthropic API: {detail}", attempts=attempts)
    if isinstance(exc, sdk.APIStatusError):
        body = redact(exc.response.text, secrets) if getattr(exc, "response", None) is not None else detail
        cls = LLMRateLimitError if exc.status_code == 429 else LLMAPIError
        return cls(
            f"Claude API error {exc.status_code}: {detail}", status=exc.status_code, body=body, attempts=attempts
        )
    if isinstance(exc, sdk.APIError):
        return LLMError(f"Claude API error: {detail}", attempts=attempts)
    if _is_transport_error(exc):  # a stream cut after the response began: the SDK passes its HTTP error on
        kind = LLMTimeoutError if "Timeout" in type(exc).__name__ else LLMConnectionError
        return kind(f"the connection to the Anthropic API broke: {type(exc).__name__}: {detail}", attempts=attempts)
    return None


_HTTP_LIBRARIES = frozenset({"httpx", "httpx2", "httpcore"})


def _is_transport_error(exc: BaseException) -> bool:
    """Whether `exc` comes from the HTTP library under the SDK (httpx, under whichever name it is installed)."""
    return any(cls.__module__.partition(".")[0] in _HTTP_LIBRARIES for cls in type(exc).__mro__)


def _raise_plait(error: LLMError, exc: BaseException, secrets: Sequence[str]) -> NoReturn:
    """Raise `error`, chained to the SDK's `exc` unless that one's text holds a secret (tracebacks print it)."""
    raise error from (exc if is_clean(str(exc), secrets) else None)


class _ClaudeCore(LLMCore):
    """Configuration, request building, key rotation and error mapping shared by `ClaudeAPI` and `AsyncClaudeAPI`.

    Args:
        model_type: The Claude model id (any id the API knows).
        retry: Attempts per request, the first included (the SDK retries with backoff).
        key: An API key, a list of keys (round-robin; rejected keys are retired), or
            ``'ENV'`` for ``$ANTHROPIC_API_KEY`` (Lagent's ``$Claude_API_KEY`` also works;
            comma-separated for several).
        proxies: A proxy URL, or a ``{'https': ...}`` dict.
        meta_template: Role mapping (default: ``environment`` turns are sent as user turns).
        base_url: The API address (default: the SDK's).
        timeout: Per-attempt timeout in seconds (for a stream: the connection and each read).
        stream_timeout: The longest a stream may take in all once its response has begun, in
            seconds; keep-alive ``ping`` events do not extend it. None (the default): four
            times ``timeout``; ``math.inf``: no limit.
        **gen_params: ``max_new_tokens`` (default 512), ``stop_words`` (sent as
            ``stop_sequences``), ``temperature``/``top_p``/``top_k`` (not sent unless set),
            and any other ``messages.create`` argument (``metadata``, ``thinking``...).
    """

    is_api = True
    native_response_format = True  # a response_format becomes a forced tool (plait_output)

    chat_is_complete_text: ClassVar[bool] = True
    """``chat(inputs)`` is ``complete(inputs).content``: a `UsageMeter` may ask ``complete`` to see the usage."""

    def __init__(
        self,
        model_type: str = "claude-3-5-sonnet-20241022",
        retry: int = 5,
        key: str | Sequence[str] | None = "ENV",
        proxies: str | Mapping[str, str] | None = None,
        meta_template: MetaTemplate | None = None,
        *,
        base_url: str | None = None,
        timeout: float = 600.0,
        stream_timeout: float | None = None,
        **gen_params: object,
    ) -> None:
        self.sdk = _import_anthropic()
        create = _create_parameters(self.sdk)
        accepted = None if create is None else create | LAGENT_DROPPED | {"response_format"}
        base = pop_base_gen_params(gen_params, self, accepted)
        sampling = {k: base.pop(k, None) for k in ("temperature", "top_p", "top_k")}
        super().__init__(
            path=model_type,
            template_parser=APITemplateParser,
            meta_template=CLAUDE_META if meta_template is None else meta_template,
            **base,
        )
        self.gen_params.update(sampling, **gen_params)
        self.gen_params.pop("repetition_penalty", None)
        keys = _resolve_keys(key)
        if not keys:
            raise UserError("ClaudeAPI needs an API key: pass key= or set $ANTHROPIC_API_KEY")
        self.model_type = model_type
        self.retry = max(1, int(retry))
        self.keys = KeyRing(keys)
        self.base_url = base_url
        self.timeout = timeout
        stream_deadline(timeout, stream_timeout)  # refuse a bad value now, not at the first stream
        self.stream_timeout = stream_timeout
        self.proxy = (
            proxies if isinstance(proxies, str) or proxies is None else proxies.get("https") or proxies.get("http")
        )
        # one client per key; per event loop for the async client, whose connections belong to a loop
        self._loop_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _AsyncClient]] = (
            weakref.WeakKeyDictionary()
        )
        self._loop_keepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[AsyncGenerator[None, None]]] = (
            weakref.WeakKeyDictionary()
        )
        self._sync_clients: dict[str, _Client] = {}
        self._lock = threading.Lock()
        # close pooled connections when this model goes away, before their sockets are collected
        weakref.finalize(self, _close_clients, self._sync_clients)

    def close(self) -> None:
        """Close the sync clients' pooled connections (async clients close with their event loop)."""
        _close_clients(self._sync_clients)

    @overload
    def _new_client(self, key: str, asynchronous: Literal[False]) -> _Client: ...

    @overload
    def _new_client(self, key: str, asynchronous: Literal[True]) -> _AsyncClient: ...

    def _new_client(self, key: str, asynchronous: bool) -> _Client | _AsyncClient:
        cls = self.sdk.AsyncAnthropic if asynchronous else self.sdk.Anthropic
        kwargs: dict[str, object] = {"api_key": key, "max_retries": self.retry - 1, "timeout": self.timeout}
        if self.base_url is not None:
            kwargs["base_url"] = self.base_url
        if self.proxy is not None:
            http = self.sdk.DefaultAsyncHttpxClient if asynchronous else self.sdk.DefaultHttpxClient
            kwargs["http_client"] = http(proxy=self.proxy)
        client: _Client | _AsyncClient = cls(**kwargs)
        return client

    # shared request logic

    def _request(self, call: ToolRequest) -> tuple[dict[str, object], GenParams]:
        messages, params = self._prepare(call.inputs, call.overrides)
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        return build_request(self.model_type, messages, params, call.tools, call.tool_choice), params

    def _secrets(self) -> list[str]:
        """What error messages and quoted bodies are scrubbed of: the keys, and the URLs' secrets."""
        return [*self.keys.keys, *url_secrets(self.base_url), *url_secrets(self.proxy)]

    def _after_failure(self, exc: BaseException, key: str) -> None:
        """Return when another key should be tried; otherwise raise the plait error."""
        if _is_key_problem(self.sdk, exc) and self.keys.retire(key):
            return
        secrets = self._secrets()
        error = _to_plait(self.sdk, exc, attempts=self.retry, secrets=secrets)
        if error is None:
            raise exc
        _raise_plait(error, exc, secrets)

    def _complete_flow(
        self, request: Mapping[str, object], params: Mapping[str, object], client_for: _ClientGetter
    ) -> Flow[ModelResponse]:
        """One reply, trying the next key when one is rejected; `client_for` is the class's client getter."""
        while True:
            key = self.keys.pick()[0] or ""
            try:
                client = yield Call(client_for, (key,), offload=False)
                message = yield Call(client.messages.create, kwargs=request)
            except self.sdk.APIError as exc:
                self._after_failure(exc, key)
                continue
            return self._finish_response(parse_message(message), params)

    # shared by the sync and async `stream_chat`

    def _stream_failed(self, exc: BaseException, key: str, seen: bool) -> None:
        """Return when the stream should start again (another key); otherwise raise.

        A stream the caller has partly `seen` is never restarted.
        """
        if seen:
            secrets = self._secrets()
            error = _to_plait(self.sdk, exc, attempts=1, secrets=secrets)
            if error is None:
                raise exc
            _raise_plait(error, exc, secrets)
        self._after_failure(exc, key)

    def _stream_attempts(self) -> Iterator[tuple[str, _Deadline]]:
        """The attempts of one stream: each one's key and its own fresh deadline (stop when one succeeds)."""
        while True:
            yield self.keys.pick()[0] or "", _Deadline(stream_deadline(self.timeout, self.stream_timeout))

    def _stream_end(self, final: object, params: Mapping[str, object]) -> StreamItem:
        """The `END` item for the SDK's final message: the reply text and the `ModelResponse`."""
        response = self._finish_response(parse_message(final), params)
        return ModelStatusCode.END, response.content, response

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_type={self.model_type!r})"


class ClaudeAPI(_ClaudeCore, ToolLLM):
    """Synchronous Claude client (see `_ClaudeCore` for the arguments). Thread-safe."""

    def _client(self, key: str) -> _Client:
        """The sync client for `key`."""
        with self._lock:
            client = self._sync_clients.get(key)
            if client is None:
                client = self._sync_clients[key] = self._new_client(key, asynchronous=False)
        return client

    def _respond(self, call: ToolRequest) -> ModelResponse:
        request, params = self._request(call)
        return run_sync(self._complete_flow(request, params, self._client))

    def chat(self, inputs: ChatInput, **gen_params: Any) -> str:
        """The reply text."""
        return self.complete(inputs, **gen_params).content

    def _respond_stream(self, call: ToolRequest) -> Iterator[StreamItem]:
        request, params = self._request(call)
        for key, deadline in self._stream_attempts():
            text = ""
            try:
                with self._client(key).messages.stream(**request) as stream, deadline.watch(stream.close):
                    for delta in stream.text_stream:
                        text += delta
                        yield ModelStatusCode.STREAM_ING, self._finish(text, params), None
                    final = stream.get_final_message()
            except self.sdk.APIError as exc:
                self._stream_failed(exc, key, seen=bool(text))
                continue
            yield self._stream_end(final, params)
            return


class AsyncClaudeAPI(_ClaudeCore, AsyncToolLLM):
    """Asynchronous Claude client (see `_ClaudeCore` for the arguments). Task-safe."""

    async def _client(self, key: str) -> _AsyncClient:
        """The running loop's client for `key`; it is closed when that loop shuts down."""
        loop = asyncio.get_running_loop()
        clients = self._loop_clients.setdefault(loop, {})
        client = clients.get(key)
        if client is None:
            client = clients[key] = self._new_client(key, asynchronous=True)
            # the loop holds the keeper only weakly: keep it as long as the client
            self._loop_keepers.setdefault(loop, []).append(await close_with_loop(client))
        return client

    async def _respond(self, call: ToolRequest) -> ModelResponse:
        request, params = self._request(call)
        return await run_async(self._complete_flow(request, params, self._client))

    async def chat(self, inputs: ChatInput, session_ids: SessionIds = None, **gen_params: Any) -> str:
        """The reply text."""
        return (await self.complete(inputs, **gen_params)).content

    async def _respond_stream(self, call: ToolRequest, session_ids: SessionIds) -> AsyncGenerator[StreamItem, None]:
        request, params = self._request(call)
        for key, deadline in self._stream_attempts():
            text = ""
            try:
                async with (await self._client(key)).messages.stream(**request) as stream:
                    deltas = aiter(stream.text_stream)
                    while (delta := await deadline.next(deltas)) is not None:
                        text += delta
                        yield ModelStatusCode.STREAM_ING, self._finish(text, params), None
                    final = await deadline.wait(stream.get_final_message())
            except self.sdk.APIError as exc:
                self._stream_failed(exc, key, seen=bool(text))
                continue
            yield self._stream_end(final, params)
            return


def _close_clients(clients: dict[str, _Client]) -> None:
    for client in list(clients.values()):
        client.close()
    clients.clear()
