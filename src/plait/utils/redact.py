"""Secret redaction: the one place that keeps keys, passwords and tokens out of text plait shows.

Reprs, log records, error messages and quoted response bodies pass through here; the
values used for requests never do (a client keeps its real URL and keys).

* `redact`: free text with given secret values, URL passwords and ``key=``-style query
  values replaced by ``***``.
* `redact_url`: one URL with its password and secret-looking query (and fragment) values
  replaced by ``***``, the rest kept as written.
* `url_secrets`: the secret values a URL carries, for scrubbing text that might echo them
  (an upstream error body quoting the request).
* `is_clean`: whether text holds nothing `redact` would mask (so an exception may be chained).

Example:
    ```python
    redact_url('http://user:pw@host/v1?api_key=abc&q=1')  # 'http://user:***@host/v1?api_key=***&q=1'
    redact('invalid key sk-abc123', ['sk-abc123'])         # 'invalid key ***'
    ```
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, unquote_plus, urlsplit, urlunsplit

__all__ = ["MASK", "is_clean", "redact", "redact_url", "url_secrets"]

MASK = "***"
"""What a secret is replaced with."""

# Parameter names whose values are secrets: anything ending in one of these words
# (``api_key``, ``subscription-key``, ``access_token``, ``X-Amz-Signature``, ``client_secret``...).
_NAME = r"[\w.-]{0,64}?(?:key|token|secret|password|passwd|pwd|sig|signature|credential|auth)"
_SECRET_NAME = re.compile(rf"(?i){_NAME}")
_SECRET_PARAM = re.compile(rf"(?i)\b({_NAME}=)[^&\s#\"';,]+")
# ``scheme://user:password@host``: the password (up to the last ``@`` of the authority).
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]{0,30}://[^\s/?#@:\"'<>]*:)[^\s/?#\"'<>]*@")
_MIN_SECRET = 4
"""Shorter given secrets are not searched for (masking every ``"ab"`` would garble text)."""


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every secret value, URL password and ``key=...``-style value replaced by ``***``.

    Args:
        text: Free text: an error message, a response body, a URL, a log line.
        secrets: Values to mask wherever they occur (also percent-encoded); values shorter
            than 4 characters are ignored.

    Returns:
        The text with the secrets masked.
    """
    for secret in sorted({s for s in secrets if s and len(s) >= _MIN_SECRET}, key=len, reverse=True):
        text = text.replace(secret, MASK)
        encoded = quote(secret, safe="")
        if encoded != secret:
            text = text.replace(encoded, MASK)
    text = _URL_PASSWORD.sub(rf"\1{MASK}@", text)
    return _SECRET_PARAM.sub(rf"\1{MASK}", text)


def redact_url(url: str) -> str:
    """`url` as it may be shown: the password and secret-looking query values replaced by ``***``.

    The user name, host, path and other parameters are kept as written. Text that is not
    a URL is redacted as free text (`redact`).

    Args:
        url: The URL (``http://user:password@host/v1?api_key=...``).

    Returns:
        The URL with its secrets masked.
    """
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return redact(url)
    netloc = parts.netloc
    if password is not None:
        userinfo, _, host = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:{MASK}@{host}"
    query, fragment = _redact_params(parts.query), _redact_params(parts.fragment)
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url
    return urlunsplit(parts._replace(netloc=netloc, query=query, fragment=fragment))


def url_secrets(url: str | None) -> list[str]:
    """The secrets `url` carries: its password and secret-looking query (or fragment) values.

    Each is given as written and decoded, so text echoing either form can be scrubbed.

    Args:
        url: A URL, or None (no secrets).

    Returns:
        The secret values (empty when there are none).
    """
    if not url:
        return []
    try:
        parts = urlsplit(url)
        found = [] if parts.password is None else [parts.netloc.rpartition("@")[0].partition(":")[2]]
    except ValueError:
        return []
    for params in (parts.query, parts.fragment):
        for param in params.split("&"):
            name, sep, value = param.partition("=")
            if sep and value and _SECRET_NAME.fullmatch(unquote_plus(name)):
                found.append(value)
    return list(dict.fromkeys(s for value in found for s in (value, unquote_plus(value)) if s))


def is_clean(text: str, secrets: Iterable[str] = ()) -> bool:
    """Whether `text` holds nothing `redact` would mask.

    Args:
        text: The text to check (an exception's message, before chaining it).
        secrets: The secret values to look for.

    Returns:
        True when `redact` would leave the text unchanged.
    """
    return redact(text, secrets) == text


def _redact_params(params: str) -> str:
    """A query (or fragment) string with the values of secret-looking parameters masked."""
    if "=" not in params:
        return params
    out = []
    for param in params.split("&"):
        name, sep, value = param.partition("=")
        if sep and value and _SECRET_NAME.fullmatch(unquote_plus(name)):
            param = f"{name}={MASK}"
        out.append(param)
    return "&".join(out)
