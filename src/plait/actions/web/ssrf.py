"""Refuse URLs that point into private networks (server-side request forgery guard).

A model chooses the URLs that `WebBrowser.open_url` and `select` fetch, so a prompt
injection could make it read ``http://169.254.169.254/`` (cloud metadata), ``http://localhost``
admin pages or intranet hosts. `URLGuard` refuses, by default, every address that is not
globally routable: loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local
(169.254/16, fe80::/10), shared, multicast, reserved and unspecified addresses, IPv4-mapped
IPv6 forms included.

Literal IP hosts are checked before connecting; host names are checked by a resolver
installed in the client's connector, so the address actually connected to is the one that
was checked (no DNS-rebinding window) and every redirect hop is checked too.

Example:
    ```python
    guard = URLGuard()                                   # public internet only
    guard = URLGuard(allow=['127.0.0.1', '10.0.0.0/8'])  # tests and intranets
    guard = URLGuard(allow=['wiki.corp'])                # a host name, whatever it resolves to
    ```
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from ...exceptions import BlockedURLError

__all__ = ["URLGuard", "is_public_address"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _unwrap(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def is_public_address(address: str | IPAddress) -> bool:
    """Whether `address` is a globally routable unicast address."""
    try:
        ip = _unwrap(ipaddress.ip_address(address.split("%", 1)[0] if isinstance(address, str) else address))
    except ValueError:
        return False
    return ip.is_global and not ip.is_multicast and not ip.is_reserved and not ip.is_unspecified


class _BlockedAddress(OSError):
    """Raised by the guarded resolver; the client turns it into `BlockedURLError`."""

    def __init__(self, host: str, addresses: list[str]) -> None:
        super().__init__(f"{host} resolves to a non-public address ({', '.join(addresses)})")
        self.host = host
        self.addresses = addresses


class _GuardedResolver(AbstractResolver):
    def __init__(self, guard: URLGuard) -> None:
        self._guard = guard
        self._inner = aiohttp.DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        if self._guard.host_allowed(host):
            return results
        refused = [r["host"] for r in results if not self._guard.address_allowed(r["host"])]
        if refused:  # one bad address taints the name: refuse it whole
            raise _BlockedAddress(host, refused)
        return results

    async def close(self) -> None:
        await self._inner.close()


class URLGuard:
    """Decides which URLs a tool may fetch on a model's behalf.

    Args:
        allow: Exceptions to the rule: IP addresses or networks (``'127.0.0.1'``,
            ``'10.0.0.0/8'``, ``'::1'``), or host names (``'localhost'``, ``'wiki.corp'``;
            ``'.corp'`` matches every subdomain of ``corp``).
        allow_private: Allow every address (turns the address check off; schemes are still checked).
        schemes: The URL schemes allowed.
    """

    def __init__(
        self,
        allow: Iterable[str] = (),
        *,
        allow_private: bool = False,
        schemes: Iterable[str] = ("http", "https"),
    ) -> None:
        self.allow_private = allow_private
        self.schemes = frozenset(s.lower() for s in schemes)
        self.networks: list[IPNetwork] = []
        self.hosts: set[str] = set()
        for entry in allow:
            try:
                self.networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                self.hosts.add(entry.strip().lower().rstrip("."))

    def address_allowed(self, address: str) -> bool:
        """Whether a resolved or literal address may be connected to."""
        if self.allow_private or is_public_address(address):
            return True
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return False
        candidates = {ip, _unwrap(ip)}
        return any(candidate in network for network in self.networks for candidate in candidates)

    def host_allowed(self, host: str) -> bool:
        """Whether `host` is on the allow-list by name."""
        name = host.lower().rstrip(".")
        return name in self.hosts or any(h.startswith(".") and (name.endswith(h) or name == h[1:]) for h in self.hosts)

    def check_url(self, url: str) -> None:
        """Refuse `url` if its scheme is not allowed or its host is a non-public literal address.

        Host names are checked when they are resolved (see `resolver`).

        Raises:
            BlockedURLError: The URL is refused; the message says why.
        """
        try:
            parts = urlsplit(url)
            host = parts.hostname
        except ValueError as exc:
            raise BlockedURLError(f"refused to fetch {url!r}: not a valid URL ({exc})") from None
        if parts.scheme.lower() not in self.schemes:
            allowed = ", ".join(sorted(self.schemes))
            raise BlockedURLError(f"refused to fetch {url!r}: only {allowed} URLs can be opened")
        if not host:
            raise BlockedURLError(f"refused to fetch {url!r}: the URL has no host")
        literal = _literal_address(host)
        if literal is not None and not self.host_allowed(host) and not self.address_allowed(literal):
            raise BlockedURLError(f"refused to fetch {url!r}: {host} is a private, loopback or link-local address")

    def resolver(self) -> AbstractResolver | None:
        """The resolver a client's connector uses to check host names (None when nothing is checked)."""
        return None if self.allow_private else _GuardedResolver(self)

    def blocked_error(self, exc: BaseException, url: str = "") -> BlockedURLError | None:
        """The `BlockedURLError` behind a connection error raised by the guarded resolver, if any."""
        seen: set[int] = set()
        current: BaseException | None = exc
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            if isinstance(current, _BlockedAddress):
                target = f"{url!r}" if url else current.host
                return BlockedURLError(
                    f"refused to fetch {target}: {current} (private, loopback or link-local addresses are not opened)"
                )
            current = getattr(current, "os_error", None) or current.__cause__ or current.__context__
        return None

    def __repr__(self) -> str:
        allowed = [str(n) for n in self.networks] + sorted(self.hosts)
        return f"URLGuard(allow={allowed}, allow_private={self.allow_private})"


def _literal_address(host: str) -> str | None:
    candidate = host.strip("[]")
    try:
        ipaddress.ip_address(candidate.split("%", 1)[0])
    except ValueError:
        pass
    else:
        return candidate
    try:  # legacy forms the OS accepts: 2130706433, 0x7f.1, 127.1
        packed = socket.inet_aton(candidate)
    except OSError:
        return None
    if all(c in "0123456789abcdefxABCDEFX." for c in candidate):
        return socket.inet_ntoa(packed)
    return None
