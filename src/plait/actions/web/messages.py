"""HTTP requests and responses as plain data, built and read by pure functions.

`as_dict` / `as_list` read JSON of unknown shape without type checks at every step.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from urllib.parse import quote, urlencode, urlsplit

from ...exceptions import APIResponseError
from ...types import JSONValue
from .errors import redact

__all__ = ["HTTPRequest", "HTTPResponse", "as_dict", "as_list", "encode_query"]


def _param_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def encode_query(params: Iterable[tuple[str, str]]) -> str:
    """``a=1&b=x%20y``: every key and value percent-encoded (spaces as ``%20``)."""
    return urlencode(list(params), quote_via=quote)


@dataclass(frozen=True)
class HTTPRequest:
    """One HTTP request as plain data (built by pure functions, sent by `WebClient`).

    Attributes:
        method: ``GET``, ``POST``, ...
        url: The URL without the query parameters in `params` (it may carry its own query).
        params: Query parameters, encoded when sent.
        headers: Request headers.
        body: The request body.
        secrets: Values that must never appear in logs or error messages (API keys).
        service: A human name for the service, used in error messages (``'Bing Web Search'``).
    """

    method: str
    url: str
    params: tuple[tuple[str, str], ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)
    service: str = ""

    @classmethod
    def build(
        cls,
        method: str,
        url: str,
        *,
        params: Mapping[str, object] | Iterable[tuple[str, object]] | None = None,
        headers: Mapping[str, str] | None = None,
        json_body: JSONValue = None,
        form: Mapping[str, object] | None = None,
        body: bytes | str | None = None,
        secrets: Iterable[str | None] = (),
        service: str = "",
    ) -> HTTPRequest:
        """Build a request; ``None`` parameters are dropped, booleans become ``true``/``false``.

        Args:
            method: The HTTP method.
            url: The endpoint URL.
            params: Query parameters.
            headers: Headers.
            json_body: A body to send as JSON (sets ``Content-Type`` unless given).
            form: A body to send form-encoded.
            body: A raw body.
            secrets: Values to redact from logs and errors.
            service: The service name for messages.
        """
        items = params.items() if isinstance(params, Mapping) else (params or ())
        query = tuple((str(k), _param_value(v)) for k, v in items if v is not None)
        head = dict(headers or {})
        data: bytes | None = None
        if json_body is not None:
            data = json.dumps(json_body, ensure_ascii=False).encode("utf-8")
            head.setdefault("Content-Type", "application/json")
        elif form is not None:
            data = encode_query((str(k), _param_value(v)) for k, v in form.items() if v is not None).encode("ascii")
            head.setdefault("Content-Type", "application/x-www-form-urlencoded")
        elif body is not None:
            data = body.encode("utf-8") if isinstance(body, str) else body
        return cls(
            method=method.upper(),
            url=url,
            params=query,
            headers=tuple(head.items()),
            body=data,
            secrets=tuple(s for s in secrets if s),
            service=service,
        )

    @property
    def full_url(self) -> str:
        """The URL with the query parameters encoded."""
        if not self.params:
            return self.url
        return self.url + ("&" if urlsplit(self.url).query else "?") + encode_query(self.params)

    @property
    def safe_url(self) -> str:
        """`full_url` with the secrets redacted (for logs and messages)."""
        return redact(self.full_url, self.secrets)

    @property
    def label(self) -> str:
        """What to call the target in messages: the service name, else the redacted URL."""
        return self.service or self.safe_url

    def cache_key(self) -> str:
        """A digest of everything that determines the response."""
        digest = hashlib.sha256()
        for part in (self.method, self.full_url, json.dumps(sorted(self.headers)), self.body or b""):
            digest.update(part.encode("utf-8") if isinstance(part, str) else part)
            digest.update(b"\x00")
        return digest.hexdigest()

    def __repr__(self) -> str:
        return f"HTTPRequest({self.method} {self.safe_url})"


def _charset(content_type: str) -> str | None:
    message = Message()
    message["content-type"] = content_type
    charset = message.get_param("charset")
    return charset if isinstance(charset, str) else None


_META_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_\-]+)""", re.IGNORECASE)


@dataclass(frozen=True)
class HTTPResponse:
    """A response read into memory.

    Attributes:
        status: The HTTP status code.
        url: The final URL (after redirects).
        headers: Response headers (case-insensitive keys are lowercased).
        body: The body (at most the client's ``max_bytes``).
        truncated: Whether the body was cut at ``max_bytes``.
    """

    status: int
    url: str
    headers: Mapping[str, str]
    body: bytes
    truncated: bool = False

    @property
    def content_type(self) -> str:
        """The media type, lowercased, without parameters (``'text/html'``)."""
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    def text(self) -> str:
        """The body decoded (charset from the headers, a ``<meta>`` tag, else UTF-8)."""
        charset = _charset(self.headers.get("content-type", ""))
        if charset is None and self.content_type in ("text/html", "application/xhtml+xml"):
            match = _META_CHARSET.search(self.body[:4096])
            charset = match.group(1).decode("ascii") if match else None
        try:
            return self.body.decode(charset or "utf-8", errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")

    def json(self, service: str = "the service") -> JSONValue:
        """The body parsed as JSON (read it with `as_dict` / `as_list`).

        Raises:
            APIResponseError: The body is not JSON.
        """
        try:
            data: JSONValue = json.loads(self.text())
            return data
        except ValueError as exc:
            raise APIResponseError(f"{service} answered with a body that is not JSON: {exc}") from None


def as_dict(value: object) -> Mapping[str, JSONValue]:
    """`value` if it is a mapping, else an empty one (for JSON of unknown shape)."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: object) -> list[JSONValue]:
    """`value` if it is a list, else an empty one."""
    return value if isinstance(value, list) else []
