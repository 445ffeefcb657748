"""Which ``Host`` and ``Origin`` headers the Streamable HTTP endpoint answers: DNS-rebinding protection (private).

A web page can make a browser send requests to ``127.0.0.1`` by pointing a name it controls
at that address (DNS rebinding); the browser then sends ``Host: evil.example.com`` and, for
scripted requests, ``Origin: http://evil.example.com``. The MCP specification asks servers to
validate ``Origin``; this one checks ``Host`` too, both against one allow-list, so neither
header's value is trusted to vouch for the other.

An entry is a host name or address (any port: ``localhost``, ``127.0.0.1``, ``[::1]`` or
``::1``), a name with a port (``mcp.example.com:8443``: that port only), or ``*`` (any host:
the check is off, for a server behind a proxy that checks it). By default the list holds the
loopback names, and the address the server listens on when it is a specific one; a server on
a wildcard address (``0.0.0.0``, ``::``) that clients reach by name needs that name listed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

from ...exceptions import UserError

__all__ = ["LOOPBACK_HOSTS", "HostAllowList"]

LOOPBACK_HOSTS: Final = ("localhost", "127.0.0.1", "[::1]")
"""The hosts allowed by default (with any port)."""

_WILDCARD_ADDRESSES: Final = frozenset({"", "0.0.0.0", "::", "[::]"})


def _split(value: str) -> tuple[str, int | None] | None:
    """``(lower-case host without brackets, port or None)`` of ``host[:port]`` (None: not one)."""
    value = value.strip()
    if not value or any(c in value for c in "/?#@ \t"):
        return None
    if value.count(":") > 1 and not value.startswith("["):  # a bare IPv6 address: no port
        value = f"[{value}]"
    try:
        parts = urlsplit(f"//{value}")
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number, or out of range
        return None
    return (host, port) if host else None


class HostAllowList:
    """The hosts the endpoint answers (see the module docstring).

    Args:
        hosts: Allowed entries; None: `LOOPBACK_HOSTS` plus `listen_host` unless it is a
            wildcard address.
        listen_host: The address the server listens on.

    Raises:
        UserError: An entry is not ``host``, ``host:port`` or ``*``.
    """

    def __init__(self, hosts: Iterable[str] | None, listen_host: str = "127.0.0.1") -> None:
        if hosts is None:
            extra = [] if listen_host.strip() in _WILDCARD_ADDRESSES else [listen_host]
            hosts = [*LOOPBACK_HOSTS, *extra]
        self.entries = tuple(hosts)
        self.any = "*" in self.entries
        self._allowed: set[tuple[str, int | None]] = set()
        for entry in self.entries:
            if entry == "*":
                continue
            split = _split(entry) if isinstance(entry, str) else None
            if split is None:
                raise UserError(
                    f"allowed host {entry!r} is not a host name or address with an optional port "
                    "('localhost', '127.0.0.1:8000', '[::1]', 'mcp.example.com') or '*'"
                )
            self._allowed.add(split)

    def __repr__(self) -> str:
        return f"HostAllowList({list(self.entries)!r})"

    def allows(self, host: str) -> bool:
        """Whether ``host[:port]`` (a ``Host`` header's value) is on the list."""
        if self.any:
            return True
        split = _split(host)
        return split is not None and (split in self._allowed or (split[0], None) in self._allowed)

    def allows_origin(self, origin: str) -> bool:
        """Whether an ``Origin`` header (``scheme://host[:port]``; ``null`` never) names an allowed host."""
        if self.any:
            return True
        try:
            parts = urlsplit(origin.strip())
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        return self.allows(parts.netloc)

    def problem(self, host: str | None, origin: str | None) -> str | None:
        """Why a request with these headers is refused (None: it is not)."""
        if host is None or not self.allows(host):
            shown = "no Host header" if host is None else f"the Host {host[:100]!r}"
            return f"{shown} is not allowed (DNS-rebinding protection); allowed hosts: {', '.join(self.entries)}"
        if origin is not None and not self.allows_origin(origin):
            return (
                f"requests from the origin {origin[:100]!r} are not allowed; allowed hosts: {', '.join(self.entries)}"
            )
        return None
