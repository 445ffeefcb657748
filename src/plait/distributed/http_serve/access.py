"""Who may talk to a served agent, and how much of the server one client can hold (private).

* **Bearer tokens.** `AccessControl` checks ``Authorization: Bearer <token>`` on every route
  (constant-time). One token: one tenant, sessions as clients name them. Several named
  tokens (``{"alice": "...", "bob": "..."}``): each tenant's sessions live in its own
  namespace (``alice/<session>``), so one tenant can neither read nor continue another's.
  Tokens come from the environment (``PLAIT_SERVER_TOKEN``) or a file only readable by its
  owner (`read_tokens`), never from a command line, where ``ps`` would show them.
* **Every error a JSON body**: `json_errors` turns aiohttp's own errors (404, 405, 413 for a
  body over the limit) and any unexpected exception into ``{"error": {"type", "message"}}``.
* **Exposure**: `listen` refuses a non-loopback address without a token (unless told the
  server sits behind an authenticating proxy: `check_exposure`, which ``plait models serve``
  follows too), then listens behind a `ConnectionGate`
  (connection caps per client address, request-head deadlines, a reserved way in for the
  health check); the agent server and the MCP server both start this way.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import socket
import stat
from collections.abc import Mapping
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from ...exceptions import PlaitError, UserError
from ...types import SessionId
from .connections import ConnectionGate

__all__ = ["TOKEN_ENV", "AccessControl", "check_exposure", "is_loopback", "json_errors", "listen", "read_tokens"]

logger = logging.getLogger(__name__)

TOKEN_ENV = "PLAIT_SERVER_TOKEN"
"""The environment variable holding the server's bearer token (read by ``plait serve`` and the clients)."""

_TENANT = web.RequestKey("plait_tenant", str)


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, *, has_token: bool, insecure: bool, what: str) -> None:
    """Refuse to serve a non-loopback `host` without a token, unless told it sits behind an authenticating proxy.

    The one rule every plait server follows (the agent server, the MCP server, ``plait models serve``).

    Args:
        host: The address to listen on.
        has_token: Whether requests will need a bearer token.
        insecure: Serve a non-loopback `host` without a token (behind an authenticating proxy).
        what: What a stranger could do, for the refusal (``'use the agent'``).
        sock: A socket already listening on `host`:`port` to accept from instead (one that
            several worker processes share, `plait.distributed.http_serve.workers`).

    Raises:
        UserError: A non-loopback `host` without a token (and without `insecure`).
    """
    if not (has_token or insecure or is_loopback(host)):
        raise UserError(
            f"serving on {host!r} without a token would let anyone on the network {what}: "
            f"set ${TOKEN_ENV} (or token=), or pass insecure=True (--insecure) behind an authenticating proxy"
        )


def read_tokens(path: str | os.PathLike[str]) -> str | dict[str, str]:
    """The tokens in a file: one token, or ``name:token`` lines (one tenant each).

    Raises:
        UserError: The file is readable by others than its owner, or holds no token.
    """
    file = Path(path)
    if file.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UserError(f"{file} is readable by other users; run: chmod 600 {file}")
    lines = [line.strip() for line in file.read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    if not lines:
        raise UserError(f"{file} holds no token")
    if len(lines) == 1 and ":" not in lines[0]:
        return lines[0]
    tenants = dict(line.split(":", 1) for line in lines if ":" in line)
    if len(tenants) != len(lines):
        raise UserError(f"{file}: with several tokens, each line is 'name:token'")
    return {name.strip(): token.strip() for name, token in tenants.items()}


class AccessControl:
    """Bearer-token checks and per-tenant session namespaces.

    Args:
        tokens: None (no authentication), one token, or ``{tenant name: token}``.

    Raises:
        UserError: An empty token or tenant name, or a name with ``/``.
    """

    def __init__(self, tokens: str | Mapping[str, str] | None = None) -> None:
        named = {"": tokens} if isinstance(tokens, str) else dict(tokens or {})
        if any(not token for token in named.values()) or any("/" in name for name in named):
            raise UserError("server tokens must be non-empty, and tenant names must not contain '/'")
        if len(named) > 1 and "" in named:
            raise UserError("with several tokens, every one needs a tenant name")
        self._digests = {name: hashlib.sha256(token.encode()).digest() for name, token in named.items()}

    @property
    def enabled(self) -> bool:
        """Whether requests need a token."""
        return bool(self._digests)

    def __repr__(self) -> str:
        return f"AccessControl(tenants={sorted(self._digests)!r})"

    def tenant(self, authorization: str | None) -> str:
        """The tenant an ``Authorization`` header belongs to (``''`` without authentication).

        Raises:
            web.HTTPUnauthorized: Authentication is on and the header has no valid token.
        """
        if not self._digests:
            return ""
        scheme, _, token = (authorization or "").partition(" ")
        digest = hashlib.sha256(token.strip().encode()).digest()
        found = ""
        matched = False
        for name, expected in self._digests.items():  # every digest compared: no early exit to time
            if hmac.compare_digest(digest, expected) and scheme.lower() == "bearer":
                found, matched = name, True
        if not matched:
            raise web.HTTPUnauthorized(
                text=_error_body("Unauthorized", "a valid 'Authorization: Bearer <token>' header is required"),
                content_type="application/json",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return found

    @property
    def tenants(self) -> tuple[str, ...]:
        """The tenants' names (``('',)``: one tenant, with one token or none)."""
        return tuple(sorted(self._digests)) or ("",)

    @staticmethod
    def tenant_of(request: web.Request) -> str:
        """The tenant of an authenticated request (``''`` for a lone token or no authentication)."""
        tenant: str = request.get(_TENANT, "")
        return tenant

    @staticmethod
    def scope(request: web.Request, session: SessionId) -> SessionId:
        """`session` in the namespace of the request's tenant (unchanged for a lone token)."""
        tenant = request.get(_TENANT, "")
        return f"{tenant}/{session}" if tenant else session

    def middleware(self) -> Middleware:
        """The aiohttp middleware: authenticate, then run the handler with JSON errors."""

        @web.middleware
        async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
            return await json_errors(request, handler, self)

        return guard


def _error_body(kind: str, message: str) -> str:
    return json.dumps({"error": {"type": kind, "message": message}}, ensure_ascii=False)


def _json_response(status: int, kind: str, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, text=_error_body(kind, message), content_type="application/json", headers=headers
    )


async def json_errors(request: web.Request, handler: Handler, access: AccessControl) -> web.StreamResponse:
    """Run `handler` for an authenticated request; every failure becomes a JSON error response."""
    try:
        request[_TENANT] = access.tenant(request.headers.get("Authorization"))
        return await handler(request)
    except web.HTTPException as exc:
        if exc.content_type == "application/json":
            raise
        kind = type(exc).__name__.removeprefix("HTTP")
        headers = {k: v for k, v in exc.headers.items() if k.lower() not in ("content-type", "content-length")}
        return _json_response(exc.status, kind, exc.reason, headers)
    except PlaitError as exc:  # a handler's own PlaitError it did not map (a bug of the handler's, not the client's)
        logger.warning("request failed: %s", exc)
        status = 400 if isinstance(exc, UserError) else 500
        return web.Response(
            status=status, text=_error_body(type(exc).__name__, str(exc)), content_type="application/json"
        )
    except Exception as exc:
        logger.exception("request failed")
        return web.Response(
            status=500, text=_error_body(type(exc).__name__, "internal error"), content_type="application/json"
        )


async def listen(
    runner: web.AppRunner,
    host: str,
    port: int,
    *,
    access: AccessControl,
    insecure: bool,
    gate: ConnectionGate,
    what: str,
    sock: socket.socket | None = None,
) -> asyncio.Server:
    """Set `runner` up and listen on `host`:`port`, every connection admitted by `gate`.

    The gate's middleware is installed on the runner's application, outermost: it tells the
    gate when each request's head has arrived and when its answer is done.

    Args:
        runner: The application's runner (not set up yet).
        host: The address; one beyond loopback needs a token or `insecure`.
        port: The port (0: a free one; read it from the returned server's sockets).
        access: The server's token check.
        insecure: Serve a non-loopback `host` without a token (behind an authenticating proxy).
        gate: Connection caps (per client address too), deadlines and reserved slots.
        what: What a stranger could do, for the refusal (``'use the agent'``).
        sock: A socket already listening on `host`:`port` to accept from instead (one that
            several worker processes share, `plait.distributed.http_serve.workers`).

    Raises:
        UserError: A non-loopback `host` without a token (and without `insecure`).
    """
    check_exposure(host, has_token=access.enabled, insecure=insecure, what=what)
    runner.app.middlewares.insert(0, gate.middleware())  # before setup freezes the application
    await runner.setup()
    assert runner.server is not None  # set by setup()
    loop = asyncio.get_running_loop()
    if sock is not None:
        return await loop.create_server(gate.factory(runner.server), sock=sock)
    return await loop.create_server(gate.factory(runner.server), host, port, reuse_address=True)
