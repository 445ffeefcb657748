"""A real HTTP server on 127.0.0.1 that replays canned responses, for offline tool tests.

`FakeHTTPServer` binds a free port and serves from a background thread. Each route (a
method and a path) answers with a `Canned` response, a list of them (used in order, the
last one repeated), or a function of the `RecordedRequest` returning one. Every request is
recorded, so tests can check what a tool sent (query parameters, headers, body).

Example:
    ```python
    from plait.testing.fake_http import Canned, FakeHTTPServer

    with FakeHTTPServer() as server:
        server.route('GET', '/v7.0/search', Canned.json({'webPages': {'value': []}}))
        server.route('GET', '/page', Canned.html('<p>hello</p>'))
        ...
        assert server.requests[0].query['q'] == ['plait']
    ```
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from aiohttp import web
from typing_extensions import TypedDict, Unpack

from ..types import JSONValue
from ._server import BackgroundServer

__all__ = ["Canned", "FakeHTTPServer", "RecordedRequest"]


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received.

    Attributes:
        method: The HTTP method.
        path: The path, without the query string.
        query: The query parameters (each name maps to its values, in order).
        headers: The headers (names lowercased).
        body: The raw body.
    """

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> JSONValue:
        """The body parsed as JSON."""
        value: JSONValue = json.loads(self.body.decode("utf-8"))
        return value

    def form(self) -> dict[str, list[str]]:
        """The body parsed as an urlencoded form."""
        from urllib.parse import parse_qs

        return parse_qs(self.body.decode("utf-8"), keep_blank_values=True)

    def param(self, name: str) -> str | None:
        """The first value of query parameter `name`."""
        values = self.query.get(name)
        return values[0] if values else None


class _CannedOptions(TypedDict, total=False):
    """The keyword arguments every `Canned` constructor takes besides its own."""

    headers: Mapping[str, str]
    delay: float


@dataclass(frozen=True)
class Canned:
    """One canned response.

    Attributes:
        status: The status code.
        body: The body.
        headers: Extra headers (``Content-Type`` among them).
        delay: Seconds to wait before answering (longer than a client's timeout to test timeouts).
        keep_alive: Bytes sent every `keep_alive_every` seconds after the body, for
            `keep_alive_for` seconds, before the response ends (the default, an SSE comment,
            keeps a stream open that never finishes); nothing when `keep_alive_for` is 0.
        keep_alive_every: Seconds between keep-alives.
        keep_alive_for: Seconds of keep-alives.
    """

    status: int = 200
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    keep_alive: bytes = b": ping\n\n"
    keep_alive_every: float = 0.5
    keep_alive_for: float = 0.0

    @classmethod
    def json(cls, data: object, status: int = 200, **kwargs: Unpack[_CannedOptions]) -> Canned:
        """A JSON body (``data`` as given, or the text of a file path)."""
        body = data.read_bytes() if isinstance(data, Path) else json.dumps(data, ensure_ascii=False).encode()
        return cls.text(body, status, "application/json; charset=utf-8", **kwargs)

    @classmethod
    def text(
        cls, text: str | bytes | Path, status: int = 200, content_type: str = "text/plain; charset=utf-8", **kwargs: Any
    ) -> Canned:
        """A body of `content_type` (a string, bytes, or the bytes of a file)."""
        body = text.read_bytes() if isinstance(text, Path) else text.encode("utf-8") if isinstance(text, str) else text
        return cls(status, body, {"Content-Type": content_type, **kwargs.pop("headers", {})}, **kwargs)

    @classmethod
    def html(cls, html: str | Path, status: int = 200, **kwargs: Unpack[_CannedOptions]) -> Canned:
        """An HTML page."""
        return cls.text(html, status, "text/html; charset=utf-8", **kwargs)

    @classmethod
    def xml(cls, xml: str | Path, status: int = 200, **kwargs: Unpack[_CannedOptions]) -> Canned:
        """An Atom/XML document."""
        return cls.text(xml, status, "application/atom+xml; charset=utf-8", **kwargs)

    @classmethod
    def redirect(cls, location: str, status: int = 302) -> Canned:
        """A redirect to `location`."""
        return cls(status, b"", {"Location": location})

    @classmethod
    def error(cls, status: int, message: str = "", **kwargs: Unpack[_CannedOptions]) -> Canned:
        """An error status with a JSON ``{"error": {"message": ...}}`` body."""
        return cls.json({"error": {"code": status, "message": message or f"error {status}"}}, status, **kwargs)


Responder = Union[Canned, Sequence[Canned], Callable[[RecordedRequest], Canned]]


class FakeHTTPServer(BackgroundServer):
    """An HTTP server on ``127.0.0.1`` (a free port) replaying canned responses.

    Attributes:
        requests: Every request received, in order.
        errors: Requests no route matched (answered 404), as ``'METHOD /path'``.
    """

    thread_name = "fake-http"

    def __init__(self, routes: Mapping[tuple[str, str], Responder] | None = None) -> None:
        super().__init__()
        self._routes: dict[tuple[str, str], Responder] = {}
        self._counters: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        for (method, path), responder in (routes or {}).items():
            self.route(method, path, responder)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        """The absolute URL of `path` on this server."""
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def route(self, method: str, path: str, responder: Responder) -> FakeHTTPServer:
        """Answer ``method path`` (``'*'`` for any method) with `responder`; returns self."""
        with self._lock:
            self._routes[(method.upper(), path)] = responder
            self._counters[(method.upper(), path)] = 0
        return self

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """The recorded requests whose path is `path`."""
        return [r for r in self.requests if r.path == path]

    def _make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    # -- serving --------------------------------------------------------------------------------
    def _pick(self, request: RecordedRequest) -> Canned | None:
        with self._lock:
            key = (request.method, request.path)
            if key not in self._routes:
                key = ("*", request.path)
            responder = self._routes.get(key)
            if responder is None:
                return None
            if isinstance(responder, Canned):
                return responder
            if isinstance(responder, Sequence):
                index = min(self._counters[key], len(responder) - 1)
                self._counters[key] += 1
                return responder[index]
        return responder(request)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        recorded = RecordedRequest(
            method=request.method,
            path=request.path,
            query={key: request.query.getall(key) for key in request.query},
            headers={k.lower(): v for k, v in request.headers.items()},
            body=await request.read(),
        )
        with self._lock:
            self.requests.append(recorded)
        canned = self._pick(recorded)
        if canned is None:
            with self._lock:
                self.errors.append(f"{recorded.method} {recorded.path}")
            return web.json_response(
                {"error": {"message": f"no route for {recorded.method} {recorded.path}"}}, status=404
            )
        if canned.delay:
            await asyncio.sleep(canned.delay)
        headers = dict(canned.headers)
        content_type = headers.pop("Content-Type", None)
        if canned.keep_alive_for > 0:
            return await _drip(request, canned, headers, content_type)
        response = web.Response(status=canned.status, body=canned.body, headers=headers)
        if content_type:
            response.headers["Content-Type"] = content_type
        return response


async def _drip(
    request: web.Request, canned: Canned, headers: dict[str, str], content_type: str | None
) -> web.StreamResponse:
    """Send `canned`'s body, then its keep-alives until its `keep_alive_for` has passed."""
    response = web.StreamResponse(status=canned.status, headers=headers)
    if content_type:
        response.headers["Content-Type"] = content_type
    await response.prepare(request)
    loop = asyncio.get_running_loop()
    end = loop.time() + canned.keep_alive_for
    try:
        await response.write(canned.body)
        while loop.time() < end:
            await asyncio.sleep(canned.keep_alive_every)
            await response.write(canned.keep_alive)
        await response.write_eof()
    except ConnectionError:  # the client gave up (what keep-alives test)
        pass
    return response
