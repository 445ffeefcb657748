"""The one IO path of the OpenAI-compatible clients (async; the sync client runs it on a private loop).

`ChatTransport` sends a prepared request body with bounded retries, key rotation and
usage accounting; `complete` reads a JSON reply, `stream` reads SSE; `get_json` reads one
JSON document (the ``/models`` listing) the same way, unretried. Every decision it
makes (URLs, bodies, parsing, retry timing) lives in pure modules it calls.

Time limits: a non-streaming attempt may take `timeout` seconds in all. A streaming attempt
may wait `timeout` seconds for the connection and for each read, and may take its deadline
(``stream_timeout``; by default `STREAM_DEADLINE_FACTOR` times `timeout`) in all, keep-alive
comments included. Either limit ends the attempt with `LLMTimeoutError`, retried per the policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import sys
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

import orjson

from ..exceptions import (
    LLMConnectionError,
    LLMError,
    LLMRateLimitError,
    LLMResponseError,
    LLMTimeoutError,
    ParseError,
    UserError,
)
from ..untrusted import loads
from ..utils._json import text_json
from ..utils.redact import is_clean, redact, redact_url, url_secrets
from ._http import HTTPResponse, Limits, client_for
from ._http1 import IncompleteResponse, ResponseTooLong
from ._openai_protocol import Payload, StreamAccumulator, build_headers, parse_completion
from ._retry import RetryPolicy, describe_body, error_for_status, is_quota_error, parse_retry_after
from ._sse import SSEDecoder
from .profiles import ThinkTags
from .response import ModelResponse, Usage

__all__ = ["MAX_JSON_BYTES", "STREAM_DEADLINE_FACTOR", "ChatTransport", "KeyRing", "stream_deadline"]

STREAM_DEADLINE_FACTOR = 4.0
"""A streaming attempt's default deadline, in multiples of its (per-read) `timeout`."""


def encode_body(payload: Payload) -> bytes:
    """A request's body as compact UTF-8 JSON (orjson: 5-10x the standard encoder on chat requests).

    What orjson refuses (keys that are not strings, a lone surrogate, an integer beyond 64
    bits, a type it does not know) goes through the standard encoder instead, as before:
    keys become strings, any integer is sent, and a lone surrogate in a caller's own
    generation parameter becomes "?" (text is cleaned where it enters plait; this is the
    last guard) rather than failing before the request. NaN and infinities, which JSON
    cannot hold, are sent as null.
    """
    try:
        return orjson.dumps(payload)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return text_json(payload).encode("utf-8", "replace")


MAX_JSON_BYTES = 16 * 1024 * 1024
"""The longest body `ChatTransport.get_json` reads (a ``/models`` listing takes kilobytes)."""


def stream_deadline(timeout: float | None, stream_timeout: float | None) -> float | None:
    """The longest one streaming attempt may take in all, in seconds (None: no limit).

    Args:
        timeout: The attempt's timeout (the longest wait for the connection or a read).
        stream_timeout: The configured deadline: seconds, ``math.inf`` for none, or None
            for `STREAM_DEADLINE_FACTOR` times `timeout` (no limit when `timeout` is None).

    Raises:
        UserError: `stream_timeout` is not a positive number.
    """
    if stream_timeout is not None and not stream_timeout > 0:  # also NaN
        raise UserError(
            f"stream_timeout must be a positive number of seconds, math.inf or None, not {stream_timeout!r}"
        )
    if stream_timeout is None:
        return None if timeout is None else STREAM_DEADLINE_FACTOR * timeout
    return None if math.isinf(stream_timeout) else stream_timeout


def _held_back(shown: Sequence[str], progress: Sequence[str]) -> bool | None:
    """How a retried stream's `progress` relates to what the caller was `shown` already.

    Both are `StreamAccumulator.progress` tuples (the text, then each tool call's name and
    arguments so far), compared part by part; a missing part counts as ``''``.

    Returns:
        True while `progress` repeats part of what was shown (pass nothing on), False once
        it holds all of it and goes on (pass it on), None when a part differs (the retry
        diverged).
    """
    ahead = behind = False
    for old, new in itertools.zip_longest(shown, progress, fillvalue=""):
        if old == new:
            continue
        if old.startswith(new):
            behind = True
        elif new.startswith(old):
            ahead = True
        else:
            return None
    return behind or not ahead


class KeyRing:
    """API keys used round-robin; keys that ran out of quota are retired. Thread- and task-safe.

    Args:
        keys: The keys; an empty list means requests carry no ``Authorization`` header.
        orgs: Organization ids, used round-robin alongside (optional).
    """

    def __init__(self, keys: Sequence[str], orgs: Sequence[str] = ()) -> None:
        self.keys = [key for key in keys if key]
        for what, values in (("API key", self.keys), ("organization", orgs)):
            for number, value in enumerate(values, 1):
                if not (value.isascii() and value.isprintable()):  # it would break (or smuggle) a header
                    raise UserError(
                        f"{what} {number} holds a line break, a control character or a non-ASCII character; "
                        "check where it was read from (the value is not shown)"
                    )
        self.retired: set[str] = set()
        self._orgs = itertools.cycle(list(orgs)) if orgs else None
        self._index = 0
        self._lock = threading.Lock()

    def pick(self) -> tuple[str | None, str | None]:
        """The next usable key (and organization).

        Raises:
            LLMRateLimitError: Every key has been retired for insufficient quota.
        """
        with self._lock:
            org = next(self._orgs) if self._orgs is not None else None
            if not self.keys:
                return None, org
            for _ in range(len(self.keys)):
                key = self.keys[self._index % len(self.keys)]
                self._index += 1
                if key not in self.retired:
                    return key, org
        raise LLMRateLimitError(
            f"all {len(self.keys)} API keys have insufficient quota", status=429, body="insufficient_quota", attempts=0
        )

    def retire(self, key: str | None) -> bool:
        """Stop using `key`; True when another key is left to try."""
        if key is None:
            return False
        with self._lock:
            self.retired.add(key)
            return any(k not in self.retired for k in self.keys)

    def __repr__(self) -> str:
        return f"KeyRing(keys={len(self.keys)}, retired={len(self.retired)})"


def _llm_error(exc: BaseException, secrets: Sequence[str] = ()) -> LLMError | None:
    """`exc` as the plait error it stands for (None: not an IO failure, let it propagate).

    The message quotes `exc` with `secrets` (and any URL password or key-like value) masked.
    """
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):  # aiohttp's timeouts subclass both
        return LLMTimeoutError(f"the request timed out ({type(exc).__name__})")
    detail = redact(str(exc), secrets)
    if isinstance(exc, ResponseTooLong):
        return LLMResponseError(f"the server's response is too long: {detail}")
    aiohttp = sys.modules.get("aiohttp")  # an aiohttp error comes only from an aiohttp already imported
    if isinstance(exc, IncompleteResponse) or (aiohttp is not None and isinstance(exc, aiohttp.ClientPayloadError)):
        return LLMConnectionError(f"the connection broke before the response was complete: {detail}")
    if isinstance(exc, OSError) or (aiohttp is not None and isinstance(exc, aiohttp.ClientError)):
        return LLMConnectionError(f"could not reach the server: {type(exc).__name__}: {detail}")
    if isinstance(exc, (ParseError, UnicodeDecodeError)):  # `plait.untrusted.loads`: also huge numbers, deep nesting
        return LLMResponseError(f"the server's response is not valid JSON: {detail}")
    return None


async def _refuse_html(resp: HTTPResponse) -> None:
    """Raise `LLMResponseError` for a web page answered with 200 (the address is a web server, not the API)."""
    if resp.headers.get("Content-Type", "").lower().startswith("text/html"):
        text = (await resp.read())[:4096].decode("utf-8", errors="replace")
        raise LLMResponseError(f"the server answered {describe_body(text)}")


@dataclass
class _Tries:
    """The tries of one request: those the retry policy counts, and every request sent."""

    counted: int = 0
    sent: int = 0


class ChatTransport:
    """Sends chat-completion requests to one endpoint.

    Args:
        url: The full chat-completions URL.
        keys: Key rotation state.
        policy: Retry policy.
        timeout: Default per-attempt timeout in seconds (None: no limit). For streams it
            bounds the connection and each wait between reads; see `stream_timeout`.
        stream_timeout: The longest one streaming attempt may take in all, in seconds,
            keep-alive comments included (``math.inf``: no limit). None (the default):
            `STREAM_DEADLINE_FACTOR` times the attempt's timeout (no limit when that is None).
        proxy: Proxy URL for every request (None: direct, or the environment's when
            `trust_env`).
        trust_env: Read proxy settings from the environment.
        max_connections: Pool size per event loop.

    Attributes:
        before_send: Awaited before each request is first sent (None: nothing to wait
            for); a launched server sets it to wait until the server is up.
    """

    def __init__(
        self,
        url: str,
        keys: KeyRing,
        policy: RetryPolicy,
        *,
        timeout: float | None = 300.0,
        stream_timeout: float | None = None,
        proxy: str | None = None,
        trust_env: bool = False,
        max_connections: int = 1024,
    ) -> None:
        self.url = url
        self.keys = keys
        self.policy = policy
        self.timeout = timeout
        stream_deadline(timeout, stream_timeout)  # refuse a bad value now, not at the first stream
        self.stream_timeout = stream_timeout
        self.proxy = proxy
        self.http = client_for(url, proxy=proxy, trust_env=trust_env, max_connections=max_connections)
        self.usage = Usage()
        self._usage_lock = threading.Lock()
        self.before_send: Callable[[], Awaitable[None]] | None = None

    def _record(self, usage: Usage | None) -> None:
        if usage is not None:
            with self._usage_lock:
                self.usage.add(usage)

    async def _after_failure(self, exc: BaseException, tries: _Tries, key: str | None) -> None:
        """Decide what follows a failed try, or raise the plait error.

        Waits and returns (retry, counted), returns at once (retry with another key, not
        counted), or raises.
        """
        secrets = self._secrets()
        err = _llm_error(exc, secrets)
        if err is None:
            raise exc
        err.attempts = tries.sent
        if is_quota_error(err):
            if self.keys.retire(key):
                tries.counted -= 1
                return
            delay = None  # no key left with quota: waiting will not help
        else:
            delay = self.policy.decide(err, tries.counted)
        if delay is None:
            if err is exc:
                raise err
            # a cause whose text holds a secret is left out of the chain (tracebacks print it)
            raise err from (exc if is_clean(str(exc), secrets) else None)
        await asyncio.sleep(delay)

    async def _begin(self, payload: Payload, timeout: float | None) -> tuple[bytes, float | None, _Tries]:
        """The encoded body, the per-attempt timeout and a fresh try count (after `before_send`)."""
        if self.before_send is not None:
            await self.before_send()
        body = encode_body(payload)
        return body, self.timeout if timeout is None else timeout, _Tries()

    def _next_try(self, tries: _Tries) -> tuple[str | None, str | None]:
        """The key and organization of the next try, counted."""
        key, org = self.keys.pick()
        tries.counted += 1
        tries.sent += 1
        return key, org

    def _post(
        self,
        body: bytes,
        key: str | None,
        org: str | None,
        timeout: float | None,
        stream: bool,
        deadline: float | None = None,
    ) -> Awaitable[HTTPResponse]:
        """Send `body`: `timeout` for the whole exchange, or for a stream per read and `deadline` in all.

        The deadline covers reading the body too, so a stream kept open by keep-alive
        comments still ends at it. (The client's request itself is returned, to be awaited:
        no coroutine of its own on the hot path.)
        """
        limits = Limits(deadline, timeout, timeout) if stream else Limits(timeout)
        return self.http.request("POST", self.url, body, build_headers(key, org), limits)

    async def _raise_for_status(self, resp: HTTPResponse) -> NoReturn:
        """Raise the plait error of an HTTP error status (callers check ``resp.status >= 400`` first)."""
        text = (await resp.read()).decode("utf-8", errors="replace")
        retry_after = parse_retry_after(resp.headers)
        raise error_for_status(resp.status, text, retry_after=retry_after, secrets=self._secrets())

    async def complete(
        self, payload: Payload, timeout: float | None = None, think: ThinkTags = "closed"
    ) -> ModelResponse:
        """One chat completion (non-streaming), retried per the policy (`think`: how think tags are read)."""
        body, seconds, tries = await self._begin(payload, timeout)
        while True:
            key, org = self._next_try(tries)
            try:
                async with await self._post(body, key, org, seconds, stream=False) as resp:
                    if resp.status >= 400:
                        await self._raise_for_status(resp)
                    await _refuse_html(resp)
                    raw = await resp.read()
                response = parse_completion(loads(raw), think)
            except Exception as exc:  # classified in _after_failure
                await self._after_failure(exc, tries, key)
                continue
            self._record(response.usage)
            return response

    async def get_json(self, url: str, *, max_bytes: int = MAX_JSON_BYTES) -> object:
        """One ``GET`` of a JSON document, such as the ``/models`` listing; not retried.

        Sent as the chat requests are: after `before_send`, with the next key (and
        organization), the proxy, and `timeout` for the whole exchange.

        Args:
            url: The document's URL.
            max_bytes: The longest body read; a longer one is a failure.

        Raises:
            LLMError: Whatever failed (an HTTP error status, no connection, a timeout, a body
                that is too long or not JSON), the keys and the URLs' secrets masked in its
                message and no cause chained.
        """
        try:
            if self.before_send is not None:
                await self.before_send()
            key, org = self.keys.pick()
            async with await self.http.request("GET", url, b"", build_headers(key, org), Limits(self.timeout)) as resp:
                if resp.status >= 400:
                    await self._raise_for_status(resp)
                body = bytearray()
                async for chunk in resp.chunks():
                    body += chunk
                    if len(body) > max_bytes:
                        raise LLMResponseError(f"the response is longer than {max_bytes} bytes")
            return loads(bytes(body))
        except Exception as exc:  # every failure becomes an LLMError whose text is safe to show
            secrets = [*self._secrets(), *url_secrets(url)]
            err = _llm_error(exc, secrets)
            if err is None:
                err = LLMResponseError(f"{type(exc).__name__}: {redact(str(exc), secrets)}")
            raise err from None

    async def stream(
        self, payload: Payload, timeout: float | None = None, think: ThinkTags = "closed"
    ) -> AsyncIterator[tuple[StreamAccumulator, bool]]:
        """Stream one chat completion, retried per the policy.

        Yields ``(accumulator, False)`` each time the text, the reasoning or a tool call grows, then
        ``(accumulator, True)``
        once the stream is complete. Each attempt has its own `stream_deadline`.

        A retry before any text was yielded is invisible. Once text was yielded, the caller
        only ever sees it grow: a retried attempt's accumulator is held back while its text
        repeats part of what was yielded, and passed on once it goes beyond it. A retried
        attempt whose text differs from what was yielded (a sampled answer that came out
        differently) ends the call with `LLMConnectionError`. Tool calls being written count
        as text does (`StreamAccumulator.progress`: each call's name and arguments so far), so
        a retry never takes back part of a call either. `think` says how inline think tags are
        read (the text the caller sees never holds a think block).

        Raises:
            LLMConnectionError: Also when a retry after a cut stream diverged from the text
                already yielded (not retried: the caller cannot take that text back).
        """
        body, seconds, tries = await self._begin(payload, timeout)
        deadline = stream_deadline(seconds, self.stream_timeout)
        shown: tuple[str, ...] = ("",)  # what the caller has been given (`StreamAccumulator.progress`)
        while True:
            key, org = self._next_try(tries)
            acc = StreamAccumulator(think)
            diverged = False
            catching_up = shown != ("",)  # a retry after something was yielded: it is checked against that
            try:
                async with contextlib.aclosing(self._stream_once(body, key, org, seconds, deadline, acc)) as chunks:
                    async for _ in chunks:
                        if not catching_up:
                            shown = acc.progress()
                            yield acc, False
                            continue
                        held = _held_back(shown, acc.progress())
                        if held is None:
                            diverged = True
                            break
                        if not held:  # caught up: from here on this attempt only grows
                            catching_up = False
                            shown = acc.progress()
                            yield acc, False
            except Exception as exc:  # classified in _after_failure
                await self._after_failure(exc, tries, key)
                continue
            final = acc.progress()
            if diverged or (final != shown and _held_back(shown, final) is not False):
                raise LLMConnectionError(
                    f"the stream was cut after {sum(map(len, shown))} characters and the retried answer differs "
                    "from the text (or tool calls) already streamed",
                    attempts=tries.sent,
                )
            self._record(acc.usage)
            yield acc, True
            return

    async def _stream_once(
        self,
        body: bytes,
        key: str | None,
        org: str | None,
        timeout: float | None,
        deadline: float | None,
        acc: StreamAccumulator,
    ) -> AsyncGenerator[None, None]:
        decoder = SSEDecoder()
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with await self._post(body, key, org, timeout, True, deadline) as resp:
                if resp.status >= 400:
                    await self._raise_for_status(resp)
                await _refuse_html(resp)
                async for chunk in resp.chunks():
                    for data in decoder.feed(chunk):
                        if acc.feed_data(data):
                            yield None
                        if acc.done:
                            return
                for data in decoder.flush():
                    if acc.feed_data(data):
                        yield None
        except (asyncio.TimeoutError, TimeoutError) as exc:  # aiohttp's: the deadline, or one read
            if deadline is not None and loop.time() - started >= deadline:
                raise LLMTimeoutError(
                    f"the stream did not finish within its {deadline:g} s deadline (stream_timeout)"
                ) from exc
            raise
        if not acc.complete:
            raise LLMConnectionError("the stream ended before the response was complete (no [DONE])")

    def _secrets(self) -> list[str]:
        """What error messages and quoted bodies are scrubbed of: the keys, and the URLs' secrets."""
        return [*self.keys.keys, *url_secrets(self.url), *url_secrets(self.proxy)]

    def __repr__(self) -> str:
        return f"ChatTransport(url={redact_url(self.url)!r}, keys={self.keys!r})"
