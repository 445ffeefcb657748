"""Retry decisions for HTTP model backends (pure: no IO, no sleeping).

`RetryPolicy.decide` looks at a failure and says whether to try again and after how long:
exponential backoff with jitter, or the server's ``Retry-After`` when it sent one.
"""

from __future__ import annotations

import email.utils
import json
import random
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..exceptions import (
    LLMAPIError,
    LLMConnectionError,
    LLMError,
    LLMRateLimitError,
    LLMResponseError,
    LLMTimeoutError,
)
from ..utils.redact import redact

__all__ = [
    "RETRYABLE_STATUS",
    "RetryPolicy",
    "describe_body",
    "error_for_status",
    "is_quota_error",
    "is_retryable",
    "parse_retry_after",
]

# Statuses worth another attempt (the OpenAI SDK retries the same set).
RETRYABLE_STATUS = frozenset({408, 409, 429})


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, ``Retry-After`` seconds or HTTP date)."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("Retry-After") or headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_for_status(
    status: int,
    body: str,
    *,
    retry_after: float | None = None,
    attempts: int = 1,
    secrets: Iterable[str] = (),
) -> LLMAPIError:
    """The exception for an error status; the message quotes the server's own error text.

    Args:
        status: The HTTP status.
        body: The response body (text).
        retry_after: The server's ``Retry-After``, in seconds (None: not sent).
        attempts: Requests made so far.
        secrets: The client's keys and URL secrets: a body that echoes one (``invalid key
            sk-...``) is scrubbed of it, in the message and in ``body`` alike (`redact`).

    Returns:
        `LLMRateLimitError` for 429, else `LLMAPIError`.
    """
    body = redact(body, secrets)
    detail = _error_message(body)
    cls = LLMRateLimitError if status == 429 else LLMAPIError
    err = cls(f"the server answered HTTP {status}: {detail}", status=status, body=body, attempts=attempts)
    vars(err)["retry_after"] = retry_after  # read by `RetryPolicy.decide` (LLMAPIError declares no such field)
    return err


def is_quota_error(err: LLMError) -> bool:
    """Whether `err` says the API key has no quota left (a key to retire, not a moment to wait)."""
    return isinstance(err, LLMRateLimitError) and "insufficient_quota" in err.body


def is_retryable(err: LLMError) -> bool:
    """Whether another attempt could succeed."""
    if isinstance(err, LLMAPIError):
        return err.status in RETRYABLE_STATUS or err.status >= 500
    return isinstance(err, (LLMConnectionError, LLMTimeoutError, LLMResponseError))


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def describe_body(body: str) -> str:
    """A body that is not JSON, on one line: an HTML page by its title (a web server, not an OpenAI-compatible API)."""
    head = body.lstrip()[:1024].lower()
    if head.startswith(("<!doctype html", "<html")) or "<html" in head:
        found = _TITLE.search(body[:4096])
        title = " ".join(found.group(1).split())[:80] if found else ""
        named = f" ({title!r})" if title else ""
        return (
            f"an HTML page{named}, not an OpenAI-compatible API: check the server address "
            "(an OpenAI-compatible server's usually ends in /v1)"
        )
    return " ".join(body.split())[:300] or "(empty body)"


def _error_message(body: str) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return describe_body(body)
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:500]
        if isinstance(error, str):
            return error[:500]
    return body[:500]


@dataclass(frozen=True)
class RetryPolicy:
    """How many attempts to make and how long to wait between them.

    Args:
        max_attempts: Total attempts, the first included (``retry`` of the API clients).
        backoff_base: First backoff, in seconds; doubles each attempt.
        backoff_max: Longest backoff, in seconds.
        max_retry_after: Longest ``Retry-After`` honoured; a longer one ends the retries.
    """

    max_attempts: int = 2
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    max_retry_after: float = 60.0

    def decide(self, err: LLMError, attempts: int) -> float | None:
        """Seconds to wait before the next attempt, or None to give up and raise `err`."""
        if attempts >= self.max_attempts or not is_retryable(err):
            return None
        retry_after: float | None = getattr(err, "retry_after", None)
        if retry_after is not None:
            if retry_after > self.max_retry_after:
                return None
            # A little jitter on top, so clients told the same time do not return in lockstep.
            return retry_after + random.uniform(0.0, min(0.1, self.backoff_base))
        ceiling = min(self.backoff_max, self.backoff_base * (2 ** (attempts - 1)))
        return random.uniform(ceiling / 2, ceiling)
