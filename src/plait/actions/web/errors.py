"""Errors of the web layer and secret redaction.

Every failure of a web request is a `WebError` whose ``state`` says which `ActionStatusCode`
a tool reports for it; messages are written for the model and never contain a secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import ClassVar
from urllib.parse import quote

from ...exceptions import ToolExecutionError
from ...schema import ActionReturn, ActionStatusCode

__all__ = [
    "APIResponseError",
    "BlockedURLError",
    "HTTPStatusError",
    "WebConnectionError",
    "WebError",
    "WebTimeoutError",
    "redact",
]

_SECRET_PARAM = re.compile(
    r"(?i)\b((?:api[_-]?key|apikey|key|token|access[_-]?token|secret[_-]?key|subscription[_-]?key|sig|signature)=)"
    r"[^&\s#\"';,]+"
)

# -- redaction ------------------------------------------------------------------------------


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every secret value and every ``key=...``-style query value replaced by ``***``."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, "***")
        encoded = quote(secret, safe="")
        if encoded != secret:
            text = text.replace(encoded, "***")
    return _SECRET_PARAM.sub(r"\1***", text)


# -- errors -----------------------------------------------------------------------------------


class WebError(ToolExecutionError):
    """A web request failed; ``state`` is the `ActionStatusCode` a tool reports for it."""

    state: ClassVar[int] = ActionStatusCode.HTTP_ERROR

    def action_return(self, args: Mapping[str, object] | None = None, type: str | None = None) -> ActionReturn:
        """This error as an `ActionReturn` (``errmsg`` = the message, ``state`` = `state`)."""
        return ActionReturn(args=dict(args) if args else None, type=type, errmsg=str(self), state=self.state)


class HTTPStatusError(WebError):
    """The server answered with an error status (4xx/5xx).

    Attributes:
        status: The HTTP status code.
        body: The start of the response body, secrets redacted.
    """

    def __init__(self, message: str, *, status: int, body: str = "", tool: str | None = None) -> None:
        super().__init__(message, tool=tool)
        self.status = status
        self.body = body


class WebTimeoutError(WebError):
    """The request took longer than its timeout."""


class WebConnectionError(WebError):
    """The server could not be reached, or the connection broke."""


class BlockedURLError(WebError):
    """The URL is not allowed: bad scheme, or it resolves to a private/loopback/link-local address."""

    state: ClassVar[int] = ActionStatusCode.ARGS_ERROR


class APIResponseError(WebError):
    """The service answered, but with an error payload or something that is not a valid response."""

    state: ClassVar[int] = ActionStatusCode.API_ERROR
