"""Building blocks of plait's web tools (`WebBrowser`, `ArxivSearch`, `GoogleSearch`, ...).

* `errors`: `error_return` (a `WebError` of `plait.exceptions` as the `ActionReturn` a tool
  reports) and `redact`, which keeps secrets out of messages.
* `messages`: `HTTPRequest` / `HTTPResponse`, requests and responses as plain data, and
  `as_dict` / `as_list` for JSON of unknown shape.
* `policy`: `RetryConfig` (bounded retries, backoff) and `TTLCache`.
* `client`: `WebClient`, the one aiohttp IO path, and `SyncBridge` for sync callers.
* `ssrf`: `URLGuard`, which refuses URLs that resolve to non-public addresses.
* `html_text`: readable text from HTML (stdlib ``html.parser``).
* `fetcher`: `ContentFetcher`, guarded page downloads as bounded text.
* `tc3`: Tencent Cloud TC3-HMAC-SHA256 request signing.
* `searchers`: the search backends and their registry (`get_searcher`).
* `tool`: `WebToolMixin` / `as_data`, how a tool writes each API once for sync and async, and
  `env_or` / `require` for credentials.
"""

from __future__ import annotations

from ...exceptions import (
    APIResponseError,
    BlockedURLError,
    HTTPStatusError,
    WebConnectionError,
    WebError,
    WebTimeoutError,
)
from .client import RETRYABLE_STATUS, SyncBridge, WebClient
from .errors import error_return, redact
from .messages import HTTPRequest, HTTPResponse, as_dict, as_list, encode_query
from .policy import RetryConfig, TTLCache
from .ssrf import URLGuard, is_public_address
from .tool import RetryOptions, WebToolMixin, WebToolOptions, as_data, env_or, require

__all__ = [
    "RETRYABLE_STATUS",
    "APIResponseError",
    "BlockedURLError",
    "HTTPRequest",
    "HTTPResponse",
    "HTTPStatusError",
    "RetryConfig",
    "RetryOptions",
    "SyncBridge",
    "TTLCache",
    "URLGuard",
    "WebClient",
    "WebConnectionError",
    "WebError",
    "WebTimeoutError",
    "WebToolMixin",
    "WebToolOptions",
    "as_data",
    "as_dict",
    "as_list",
    "encode_query",
    "env_or",
    "error_return",
    "is_public_address",
    "redact",
    "require",
]
