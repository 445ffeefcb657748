"""`WebToolMixin`: how a web tool writes each API once and serves sync and async callers.

Each API's logic is one coroutine (``async def _search(...)``) on the tool's shared core
(``_XCore(WebToolMixin, ActionCore)``). The sync tool's API method runs it on a private loop
thread (`run_io`); its async sibling (``AsyncX(AsyncActionMixin, _XCore, sibling_of=X)``)
declares the same API as ``async def`` that awaits the same coroutine. `as_data` turns a
`WebError` into the `ActionReturn` the model reads (HTTP_ERROR, API_ERROR or ARGS_ERROR).
`env_or` / `require` read a credential given as an argument or in the environment.
Every tool takes the same client knobs as keyword arguments (`WebToolOptions`); a tool's
``client_defaults`` says what they are when not given.
"""

from __future__ import annotations

import os
import threading
from abc import ABC
from collections.abc import Awaitable, Coroutine
from typing import ClassVar, TypeVar

from typing_extensions import TypedDict

from ...exceptions import UserError, WebError
from ...schema import ActionReturn
from ...types import JSONValue
from .client import SyncBridge, WebClient
from .errors import error_return
from .messages import HTTPRequest

__all__ = ["RetryOptions", "WebToolMixin", "WebToolOptions", "as_data", "env_or", "require"]

T = TypeVar("T")
_LOCK = threading.Lock()


def env_or(explicit: str | None, var: str | None) -> str | None:
    """`explicit` when given (even empty), else the environment variable `var`."""
    if explicit is not None:
        return explicit
    return os.environ.get(var) if var else None


def require(value: str | None, what: str, env: str | None) -> str:
    """`value`, or a `UserError` saying how to provide it."""
    if not value:
        where = f" or set ${env}" if env else ""
        raise UserError(f"{what} is required: pass it{where}")
    return value


async def as_data(awaitable: Awaitable[T]) -> T | ActionReturn:
    """Await `awaitable`; a `WebError` comes back as an `ActionReturn` instead of raising."""
    try:
        return await awaitable
    except WebError as exc:
        return error_return(exc)


class RetryOptions(TypedDict, total=False):
    """`WebToolOptions` but the timeout (for the tools that take ``timeout`` positionally).

    Attributes:
        max_retry: Attempts per request (timeouts, connection errors, 408/425/429/5xx are retried).
        backoff: The first wait between attempts, in seconds (doubles each time).
        cache_ttl: Seconds a successful answer is reused (0: no cache).
    """

    max_retry: int
    backoff: float
    cache_ttl: float


class WebToolOptions(RetryOptions, total=False):
    """The HTTP knobs every web tool takes as keyword arguments (`RetryOptions` and a timeout).

    Attributes:
        timeout: Seconds per attempt (connect + read).
    """

    timeout: float


class WebToolMixin(ABC):
    """Runs a tool's coroutines for its sync APIs and closes its HTTP sessions.

    Attributes:
        client_defaults: The `WebToolOptions` a tool's client gets where the caller leaves them out.
    """

    client_defaults: ClassVar[WebToolOptions] = {"timeout": 10.0, "max_retry": 3, "backoff": 0.5, "cache_ttl": 600.0}

    client: WebClient
    """The tool's one HTTP client (``self.client = self._client_for(options)``), unless it overrides `web_clients`."""

    def _client_for(self, options: WebToolOptions) -> WebClient:
        """A `WebClient` with `options` over this tool's `client_defaults`."""
        merged: WebToolOptions = {**self.client_defaults, **options}
        return WebClient.build(
            timeout=merged["timeout"],
            max_retry=merged["max_retry"],
            backoff=merged.get("backoff", 0.5),
            cache_ttl=merged["cache_ttl"],
        )

    def web_clients(self) -> list[WebClient]:
        """The HTTP clients this tool uses (their sessions are closed with it): its `client`."""
        return [self.client]

    async def _fetch_json(self, request: HTTPRequest) -> JSONValue:
        """Send `request` with `client`; the answer's body as JSON (errors name the request's service).

        Raises:
            WebError: The request failed, or the body is not JSON.
        """
        return (await self.client.send(request)).json(request.service)

    def run_io(self, coro: Coroutine[object, object, T]) -> T:
        """Run `coro` on this tool's private IO thread (started on first use) and wait for it."""
        bridge: SyncBridge | None = self.__dict__.get("_web_bridge")
        if bridge is None:
            with _LOCK:
                bridge = self.__dict__.get("_web_bridge")
                if bridge is None:
                    bridge = SyncBridge(self, self.web_clients(), name=f"plait-{type(self).__name__}")
                    self.__dict__["_web_bridge"] = bridge
        return bridge.run(coro)

    def close(self) -> None:
        """Stop the private IO thread used by the sync APIs (it restarts on the next sync call)."""
        with _LOCK:
            bridge: SyncBridge | None = self.__dict__.pop("_web_bridge", None)
        if bridge is not None:
            bridge.close()

    async def aclose(self) -> None:
        """Close this tool's HTTP sessions on the running loop (async callers)."""
        for client in self.web_clients():
            await client.aclose()
