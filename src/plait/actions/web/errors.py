"""Web errors as tool results, and secret redaction.

Every failure of a web request is a `WebError` (the classes live in `plait.exceptions`, with
the rest of plait's exception tree) whose ``state`` says which `ActionStatusCode` a tool
reports for it; messages are written for the model and never contain a secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote

from ...exceptions import WebError
from ...schema import ActionReturn

__all__ = ["error_return", "redact"]

_SECRET_PARAM = re.compile(
    r"(?i)\b((?:api[_-]?key|apikey|key|token|access[_-]?token|secret[_-]?key|subscription[_-]?key|sig|signature)=)"
    r"[^&\s#\"';,]+"
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every secret value and every ``key=...``-style query value replaced by ``***``."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, "***")
        encoded = quote(secret, safe="")
        if encoded != secret:
            text = text.replace(encoded, "***")
    return _SECRET_PARAM.sub(r"\1***", text)


def error_return(error: WebError, args: Mapping[str, object] | None = None, type: str | None = None) -> ActionReturn:
    """`error` as the `ActionReturn` a tool gives the model (``errmsg``: the message, ``state``: its `state`)."""
    return ActionReturn(args=dict(args) if args else None, type=type, errmsg=str(error), state=error.state)
