"""Web errors as tool results, and secret redaction.

Every failure of a web request is a `WebError` (the classes live in `plait.exceptions`, with
the rest of plait's exception tree) whose ``state`` says which `ActionStatusCode` a tool
reports for it; messages are written for the model and never contain a secret (`redact`,
shared with the model clients, lives in `plait.utils.redact`).
"""

from __future__ import annotations

from collections.abc import Mapping

from ...exceptions import WebError
from ...schema import ActionReturn
from ...utils.redact import redact

__all__ = ["error_return", "redact"]


def error_return(error: WebError, args: Mapping[str, object] | None = None, type: str | None = None) -> ActionReturn:
    """`error` as the `ActionReturn` a tool gives the model (``errmsg``: the message, ``state``: its `state`)."""
    return ActionReturn(args=dict(args) if args else None, type=type, errmsg=str(error), state=error.state)
