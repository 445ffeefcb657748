"""`RecordProxy`: an OpenAI-compatible endpoint that forwards to a real server and records trajectories.

Point any agent (plait's own, an OpenAI SDK loop, a coding agent) at the proxy instead of its
model server: ``POST /v1/chat/completions`` (streaming or not) is forwarded to the upstream
server as sent and its answer sent back as received, and each exchange is filed into a
trajectory (`plait.trajectories.grouping`: by the ``X-Session-Id`` header when the client
sends one, else by prefix matching, with branches stored once). ``GET /v1/models`` is passed
through; ``POST /v1/trajectories/flush`` writes every open trajectory now.

* **When trajectories are written.** A trajectory is written, whole, as one line of the
  output file (`TrajectoryFile`) when it ends: after ``idle_s`` seconds without a request
  that continues it, on a flush, and when the proxy stops (Ctrl-C, SIGTERM). Every
  `CHECKPOINT_S` seconds, when something changed, the trajectories still open are written to
  ``OUT.open`` (a temporary file renamed over it: whole or absent); a proxy started after a
  crash (``kill -9``, a power cut) appends them to ``OUT`` as ended and removes the
  checkpoint. So a crash loses at most the last `CHECKPOINT_S` seconds of exchanges, and every
  line of ``OUT`` is whole.
* **Tokens.** When the upstream server returns them (`plait.trajectories.wire`), each
  reply's exact token ids and log-probabilities are kept; with ``tokens=True``
  (``--tokens``) the proxy asks for them (``logprobs`` and vLLM's ``return_token_ids``,
  which the client then sees in the reply too).
* **Access.** The rules of ``plait serve``: loopback only unless a token is set
  (``$PLAIT_SERVER_TOKEN`` or a token file) or ``insecure``; the same connection caps and
  deadlines. The upstream's API key (``upstream_key``) is sent upstream as a bearer token and
  written nowhere: not in trajectories (headers are never recorded), logs or reprs. Without
  one, and without a proxy token, the client's own ``Authorization`` header is passed on.
* **Hostile bytes.** A request that is not a chat request is a 400; an upstream that cannot
  be reached, or answers with something that is not a reply, is a 502 (or its own error
  status, passed on); neither is recorded, and nothing crashes the proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from ..distributed.http_serve.access import AccessControl, check_exposure, listen
from ..distributed.http_serve.connections import ConnectionGate
from ..distributed.http_serve.requests import ServerLimits
from ..exceptions import ParseError, UserError
from ..llms._http import Limits, client_for
from ..llms._sse import SSEDecoder
from ..untrusted import loads
from ..utils._aio import LoopThread
from ..utils.redact import redact
from .grouping import TrajectoryBook
from .record import TrajectoryFile, read_trajectories
from .wire import ReplyReader, ask_for_tokens

__all__ = ["CHECKPOINT_S", "SESSION_HEADER", "RecordProxy"]

logger = logging.getLogger(__name__)

SESSION_HEADER = "X-Session-Id"
"""The request header that names a client's session (its requests then form one tree of trajectories)."""

_EXPOSED = "use the upstream model through it"

CHECKPOINT_S = 2.0
"""How often the open trajectories are saved to ``OUT.open`` (when something changed)."""

_LIMITS = Limits(None, 30.0, 600.0)  # no total: a long generation streams for as long as it takes
_MAX_BODY = 64 * 1024 * 1024


def _error(status: int, kind: str, message: str) -> web.Response:
    return web.json_response({"error": {"type": kind, "message": message}}, status=status)


class RecordProxy:
    """The recording proxy (see the module docstring).

    Args:
        upstream: The upstream server's base URL, as ``--api-base`` takes it (``http://127.0.0.1:8080/v1``).
        out: The JSON Lines file trajectories are appended to.
        host: The address to listen on.
        port: The port (0: a free one; `port` holds it once started).
        token: The proxy's bearer token(s), as ``plait serve`` takes them (None: none).
        upstream_key: The API key sent upstream (never written anywhere).
        insecure: Listen beyond loopback without a token (behind an authenticating proxy).
        tokens: Ask the upstream for each reply's token ids and log-probabilities.
        idle_s: Seconds without a request after which a trajectory ends and is written.
        limits: Connection caps and deadlines (``plait serve``'s).

    Raises:
        UserError: The output file cannot be opened, or a bad token.
    """

    def __init__(
        self,
        upstream: str,
        out: str,
        *,
        host: str = "127.0.0.1",
        port: int = 8091,
        token: str | Mapping[str, str] | None = None,
        upstream_key: str | None = None,
        insecure: bool = False,
        tokens: bool = False,
        idle_s: float = 300.0,
        limits: ServerLimits | None = None,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.host, self.port = host, port
        self.access = AccessControl(token)
        self.insecure = insecure
        check_exposure(host, has_token=self.access.enabled, insecure=insecure, what=_EXPOSED)  # before OUT is made
        self.tokens = tokens
        self._key = upstream_key or None
        self.book = TrajectoryBook(idle_s)
        self.file = TrajectoryFile(out)
        self.written = 0
        self.checkpoint = out + ".open"
        self._saved = 0  # `book.changes` when the checkpoint was written
        self.recovered = self._recover()
        limits = limits or ServerLimits()
        self.gate = ConnectionGate(
            limits.max_connections,
            limits.max_connections_per_client,
            reserved=limits.reserved_connections,
            health_paths=("/health_check",),
            header_timeout=limits.header_timeout,
            idle_timeout=limits.idle_timeout,
        )
        self.http = client_for(self.upstream, proxy=None, trust_env=False, max_connections=limits.max_connections)
        self.app = web.Application(client_max_size=_MAX_BODY, middlewares=[self.access.middleware()])
        self.app.add_routes(
            [
                web.get("/health_check", self._health),
                web.get("/v1/models", self._models),
                web.post("/v1/chat/completions", self._chat),
                web.post("/v1/trajectories/flush", self._flush),
            ]
        )
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._loop: LoopThread | None = None

    def __repr__(self) -> str:
        key = "set" if self._key else "none"
        return f"RecordProxy(upstream={redact(self.upstream)!r}, out={self.file.path!r}, key={key}, {self.book!r})"

    @property
    def url(self) -> str:
        """The proxy's base URL, as a client's ``base_url`` takes it (``http://host:port/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    # -- handlers -------------------------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    def _headers(self, request: web.Request) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": request.headers.get("Accept", "*/*")}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        elif not self.access.enabled and "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        return headers

    def _clean(self, text: str, request: web.Request | None = None) -> str:
        """`text` with the keys this exchange sent upstream masked (the client's own, when passed on)."""
        secrets = [self._key] if self._key else []
        if request is not None and not self._key and not self.access.enabled:
            secrets.append(request.headers.get("Authorization", "").partition(" ")[2].strip())
        return redact(text, secrets)

    async def _models(self, request: web.Request) -> web.Response:
        try:
            async with await self.http.request(
                "GET", self.upstream + "/models", b"", self._headers(request), _LIMITS
            ) as upstream:
                body = await upstream.read()
                status, kind = upstream.status, upstream.headers.get("Content-Type", "application/json")
        except Exception as exc:  # an unreachable or broken upstream is the client's 502, not a crash
            return self._unreachable(exc, request)
        if status != 200:  # an error body may quote what was sent
            body = self._clean(body.decode("utf-8", "replace"), request).encode()
        return web.Response(status=status, body=body, headers={"Content-Type": kind})

    def _unreachable(self, exc: BaseException, request: web.Request) -> web.Response:
        message = self._clean(f"the upstream server failed: {type(exc).__name__}: {exc}"[:500], request)
        logger.warning("%s", message)
        return _error(502, "BadGateway", message)

    async def _flush(self, request: web.Request) -> web.Response:
        written = self._write(all_open=True)
        self._saved = -1
        self._save()
        return web.json_response({"written": written})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = loads(raw)
        except ParseError as exc:
            return _error(400, "BadRequest", f"the request body is not JSON: {exc}")
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages
        ):
            return _error(400, "BadRequest", "a chat request is a JSON object with 'messages', each with a 'role'")
        assert isinstance(body, dict)
        if self.tokens:
            raw = json.dumps(ask_for_tokens(body), ensure_ascii=False, separators=(",", ":")).encode()
        reader = ReplyReader()
        try:
            async with await self.http.request(
                "POST", self.upstream + "/chat/completions", raw, self._headers(request), _LIMITS
            ) as upstream:
                kind = upstream.headers.get("Content-Type", "")
                if upstream.status == 200 and "text/event-stream" in kind:
                    return await self._relay_stream(request, upstream, reader, body)
                answer = await upstream.read()
                status = upstream.status
        except Exception as exc:
            return self._unreachable(exc, request)
        if status != 200:
            text = self._clean(answer.decode("utf-8", "replace"), request)
            return web.Response(status=status, text=text, content_type=kind.split(";")[0] or "application/json")
        try:
            reader.whole(loads(answer))
        except ParseError:
            return _error(502, "BadGateway", "the upstream server's reply is not JSON")
        self._record(request, body, reader)
        return web.Response(status=200, body=answer, content_type="application/json")

    async def _relay_stream(
        self, request: web.Request, upstream: Any, reader: ReplyReader, body: dict[str, Any]
    ) -> web.StreamResponse:
        """Send the upstream's events on as they arrive; record the reply once the stream completed."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        decoder = SSEDecoder()
        done = False
        try:
            async for chunk in upstream.chunks():
                await response.write(chunk)
                done |= self._events(decoder.feed(chunk), reader)
            done |= self._events(decoder.flush(), reader)
        except Exception as exc:  # either side went away mid-stream, or the upstream broke off
            logger.info("stream ended early: %s", self._clean(f"{type(exc).__name__}: {exc}", request))
            if request.transport is not None:  # the client sees the stream break off, as it did
                request.transport.abort()
            return response
        if done or reader.finished:
            self._record(request, body, reader)
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response

    @staticmethod
    def _events(events: list[str], reader: ReplyReader) -> bool:
        """Read decoded events into `reader`; whether ``[DONE]`` was among them."""
        done = False
        for data in events:
            if data.strip() == "[DONE]":
                done = True
                continue
            with contextlib.suppress(ParseError):
                reader.chunk(loads(data))
        return done

    def _record(self, request: web.Request, body: dict[str, Any], reader: ReplyReader) -> None:
        reply = reader.assistant()
        if reply is None:
            return
        tools = [tool for tool in body.get("tools") or () if isinstance(tool, dict)]
        model = body.get("model") if isinstance(body.get("model"), str) else None
        session = request.headers.get(SESSION_HEADER)
        try:
            self.book.record(
                body["messages"],
                reply,
                tokens=reader.tokens(),
                tools=tools,
                model=model,
                session=session[:256] if session else None,
                tenant=AccessControl.tenant_of(request),
            )
        except Exception:  # the client has its answer; a shape nobody foresaw must not take it away
            logger.exception("exchange not recorded")

    def _write(self, *, all_open: bool = False) -> int:
        count = 0
        for trajectory in self.book.ended(all_open=all_open):
            try:
                self.file.append(trajectory)
                count += 1
            except (OSError, ValueError) as exc:
                logger.error("trajectory %s not written: %s", trajectory.id, exc)
        self.written += count
        return count

    def _recover(self) -> int:
        """Append the trajectories a crashed proxy left open (its checkpoint) to the file; how many."""
        if not os.path.exists(self.checkpoint):
            return 0
        try:
            left = list(read_trajectories(self.checkpoint))
        except (OSError, UserError) as exc:
            logger.error("the checkpoint %s cannot be read (%s); left in place", self.checkpoint, exc)
            return 0
        for trajectory in left:
            self.file.append(trajectory)
        os.unlink(self.checkpoint)
        logger.warning("%d trajectories left open by a stopped proxy were written from %s", len(left), self.checkpoint)
        return len(left)

    def _save(self) -> None:
        """Write the open trajectories to the checkpoint (whole or not at all), or remove it when none are open."""
        if self._saved == self.book.changes:
            return
        trajectories = self.book.open()
        try:
            if not trajectories:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.checkpoint)
            else:
                partial = self.checkpoint + ".tmp"
                with open(partial, "w", encoding="utf-8") as fh:
                    fh.writelines(trajectory.to_json() + "\n" for trajectory in trajectories)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(partial, self.checkpoint)
            self._saved = self.book.changes
        except (OSError, ValueError) as exc:
            logger.error("the open trajectories were not saved to %s: %s", self.checkpoint, exc)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(max(0.05, min(self.book.idle_s / 4, CHECKPOINT_S)))
            if self._write():
                self._saved = -1  # what is open changed
            self._save()

    # -- running --------------------------------------------------------------------------------
    async def start_async(self) -> None:
        """Listen on the running loop (`port` then holds the real port).

        Raises:
            UserError: A non-loopback `host` without a token (and without ``insecure``).
        """
        self._runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=1.0)
        self._server = await listen(
            self._runner,
            self.host,
            self.port,
            access=self.access,
            insecure=self.insecure,
            gate=self.gate,
            what=_EXPOSED,
        )
        if self._server.sockets:
            self.port = int(self._server.sockets[0].getsockname()[1])
        self._sweeper = asyncio.create_task(self._sweep())

    async def stop_async(self) -> None:
        """Stop listening, write every open trajectory, close the file and the upstream connections."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.gate.close()
        self._write(all_open=True)
        self._saved = -1
        self._save()  # none open: the checkpoint goes
        self.file.close()
        await self.http.aclose()

    def start(self) -> RecordProxy:
        """Serve from a background thread (returns once listening)."""
        self._loop = LoopThread(name="plait-record-proxy")
        self._loop.run(self.start_async())
        return self

    def stop(self) -> None:
        """Stop a proxy started with `start` (open trajectories are written)."""
        if self._loop is not None:
            self._loop.run(self.stop_async())
            self._loop = None

    def flush(self) -> int:
        """Write every open trajectory now (of a proxy started with `start`); how many were written."""
        if self._loop is None:
            return self._write(all_open=True)

        async def flush() -> int:
            return self._write(all_open=True)

        return self._loop.run(flush())

    def serve_forever(self, on_ready: Callable[[], None] | None = None) -> None:
        """Serve until Ctrl-C or SIGTERM, then write the open trajectories and return."""

        async def serve() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(signum, stop.set)
            await self.start_async()
            if on_ready is not None:
                on_ready()
            else:
                sys.stdout.write(
                    f"plait record-proxy on {self.url} -> {redact(self.upstream)}, writing {self.file.path}\n"
                )
                sys.stdout.flush()
            try:
                await stop.wait()
            finally:
                await self.stop_async()

        asyncio.run(serve())

    def __enter__(self) -> RecordProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
