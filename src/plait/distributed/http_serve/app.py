"""`AgentAPIServer`: an agent served over HTTP (aiohttp; no web framework needed).

Routes (Lagent's, plus streaming):

* ``GET /health_check`` -> ``{"status": "ok", "timestamp": ...}``
* ``POST /chat_completion`` with ``{"message": [str or AgentMessage dict, ...], "session_id": ...}``
  (and optionally ``stream`` and generation parameters: ``temperature``, ``top_p``, ``top_k``,
  ``max_new_tokens``, ``repetition_penalty``, ``stop_words``)
  -> the reply, as an `AgentMessage` dict; with ``"stream": true``, Server-Sent Events: one
  `AgentMessage` dict per chunk, the final (END) one last; with ``"stream": "events"``, the
  run's typed events (`plait.events`: ``event: tool_call_started`` ... ``event: final``,
  each ``data`` its ``to_dict()``), for any agent, streaming or not
* ``GET /memory/{session_id}`` -> ``agent.state_dict(session_id)``
* ``DELETE /memory/{session_id}`` -> forget the session (in a bound `SessionStore` too)
* with ``a2a=True``: A2A 1.0, the Agent Card at ``/.well-known/agent-card.json`` and JSON-RPC at
  ``/a2a`` (`plait.distributed.http_serve.a2a_route`)

Sync agents run in worker threads, async agents on the server's loop, so one slow
conversation never holds up another. Errors come back as ``{"error": {"type", "message"}}``
with status 400 (a bad request or argument), 401 (no valid token), 409 (the session is
answering another request), 413 (body too large), 502 (the model backend failed) or 500.

A request body is checked against a schema (`plait.distributed.http_serve.requests`):
unknown fields are refused, a client may set only a few generation parameters, within the
server's caps (`ServerLimits`). With a token (``token=``, or ``$PLAIT_SERVER_TOKEN`` for the
program) every route needs ``Authorization: Bearer <token>``; serving beyond loopback
without one is refused unless ``insecure=True``.

One client cannot starve another (`plait.distributed.http_serve.connections`): connections
are capped per client address as well as in all (429 / 503 beyond), a request head must
arrive within `ServerLimits.header_timeout` of its first byte, an idle connection is closed
after `ServerLimits.idle_timeout`, and a few reserved connections answer ``/health_check``
even when every other slot is taken. Sessions leave memory after `ServerLimits.session_ttl`
unused, or beyond `ServerLimits.max_sessions_per_tenant` (`SessionTable`); with a
`SessionStore` attached they are read back on their next request.

Run it as a program: ``python -m plait.distributed.http_serve.app --port 8090 --config -``
with the agent's config as JSON on stdin (``--config '<json>'`` works too, but a command line
is visible to every user of the machine: keep keys out of it). The config is a
``{"type": ..., ...}`` dict; ``python_path`` adds a folder to ``sys.path``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from ...agents.module import AgentModule
from ...events import StreamEvent
from ...exceptions import PlaitError, UserError
from ...hooks.tool_log import ToolLog
from ...hooks.usage import UsageMeter
from ...interceptors import register_interceptor
from ...schema import AgentMessage
from ...types import SessionId
from ...untrusted import loads
from ...utils._aio import LoopThread
from ...utils._json import json_default
from ...utils.config import create_object
from ._calls import agent_chunks, events_call, http_status
from .a2a_route import A2ARoute
from .access import TOKEN_ENV, AccessControl, listen, read_tokens
from .connections import ConnectionGate
from .openai_route import DEFAULT_MODEL_NAME, openai_routes
from .requests import ServerLimits, parse_chat_request, parse_resume_request, session_of
from .sessions import SessionTable

__all__ = ["AgentAPIServer", "ServerLimits", "main", "session_key"]

logger = logging.getLogger(__name__)

SHUTDOWN_S = 1.0
"""How long stopping the server waits for calls in flight before cancelling them."""

SWEEP_S = 60.0
"""The longest wait between two sweeps of idle sessions (shorter for a `ServerLimits.session_ttl` under two minutes)."""


def session_key(text: str) -> SessionId:
    """A session id from a URL: digits are an int (as JSON clients send them), anything else a str."""
    return int(text) if text.lstrip("-").isdigit() else text


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=json_default)


def _error(exc: BaseException, status: int) -> web.Response:
    body = {"error": {"type": type(exc).__name__, "message": str(exc)}}
    return web.Response(status=status, text=_dump(body), content_type="application/json")


def build_agent(config: object) -> Any:
    """The agent a config describes (``python_path`` adds a folder to ``sys.path`` first); the dict is not changed."""
    if not isinstance(config, Mapping):
        return config
    config = dict(config)
    path = config.pop("python_path", None)
    if path and path not in sys.path:
        sys.path.insert(0, str(path))
    return create_object(config)


class AgentAPIServer:
    """Serves one agent over HTTP.

    Args:
        config: The agent, or a config dict (``{"type": "plait.agents.AsyncAgent", "llm": {...}}``).
        host: The address to listen on.
        port: The port (0: pick a free one; see `port` after `start`).
        token: The bearer token every request needs: one token, or ``{tenant: token}`` (each
            tenant's sessions in their own namespace); None: no authentication.
        limits: Body size, message count, generation caps, connection caps and deadlines, and
            how long sessions stay in memory (`ServerLimits`).
        insecure: Serve without a token on an address other than loopback.
        sock: Accept from this listening socket (on `host`:`port`) instead of opening one: the
            socket several worker processes share (`plait serve --workers`).
        a2a: Serve the agent over A2A 1.0 too: its Agent Card at ``/.well-known/agent-card.json``,
            JSON-RPC at ``/a2a`` (`plait.distributed.http_serve.a2a_route`).
        model_name: The name OpenAI clients see the agent under (``GET /v1/models``, each
            reply's ``model``); default ``'plait-agent'``.

    Attributes:
        gate: Admits connections (`ConnectionGate`: its counters say who was refused or cut).
        sessions: The sessions held in memory (`SessionTable`: ``len``, ``evicted``).
        a2a: The A2A routes and their tasks (`A2ARoute`), or None.

    Raises:
        UserError: (from `start`) A non-loopback `host` without a token or ``insecure=True``.
    """

    def __init__(
        self,
        config: object,
        host: str = "127.0.0.1",
        port: int = 8090,
        *,
        token: str | Mapping[str, str] | None = None,
        limits: ServerLimits | None = None,
        insecure: bool = False,
        sock: socket.socket | None = None,
        a2a: bool = False,
        model_name: str = DEFAULT_MODEL_NAME,
    ) -> None:
        self.agent = build_agent(config)
        self.sock = sock
        self.host = host
        self.port = port
        self.limits = limits or ServerLimits()
        self.access = AccessControl(token)
        self.insecure = insecure
        self.gate = ConnectionGate(
            self.limits.max_connections,
            self.limits.max_connections_per_client,
            reserved=self.limits.reserved_connections,
            health_paths=("/health_check",),
            header_timeout=self.limits.header_timeout,
            idle_timeout=self.limits.idle_timeout,
        )
        evictable = isinstance(self.agent, AgentModule)
        self.sessions = SessionTable(
            self.agent.evict if evictable else lambda session: True,
            self.limits.session_ttl if evictable else None,
            self.limits.max_sessions_per_tenant if evictable else None,
        )
        self.app = web.Application(
            client_max_size=self.limits.max_body_bytes, middlewares=[self.access.middleware(), self._track]
        )
        self._inflight: set[asyncio.Task[object]] = set()
        self.meter = UsageMeter()
        self.tool_log = ToolLog()
        if isinstance(self.agent, AgentModule):
            register_interceptor(self.agent, self.meter)
            register_interceptor(self.agent, self.tool_log)
        self.app.add_routes(
            [
                web.get("/health_check", self.health_check),
                web.post("/chat_completion", self.chat_completion),
                web.post("/resume", self.resume),
                web.get("/memory/{session_id}", self.memory),
                web.delete("/memory/{session_id}", self.forget),
                *openai_routes(
                    lambda: self.agent,
                    self.limits,
                    self.access.scope,
                    self.meter,
                    self.tool_log,
                    self._using,
                    model_name=model_name,
                ),
            ]
        )
        self.a2a: A2ARoute | None = None
        if a2a:
            self.a2a = A2ARoute(
                lambda: self.agent, self.sessions.use, self.meter, self.tool_log, secured=self.access.enabled
            )
            self.app.add_routes(self.a2a.routes())
        self._runner: web.AppRunner | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._server: asyncio.Server | None = None
        self._loop: LoopThread | None = None

    # -- handlers -----------------------------------------------------------------------------
    async def health_check(self, request: web.Request) -> web.Response:
        """``{"status": "ok", "timestamp": ...}``."""
        return web.json_response({"status": "ok", "timestamp": time.time()})

    async def memory(self, request: web.Request) -> web.Response:
        """The agent tree's state of one session (of the caller's tenant)."""
        try:
            session = session_of(session_key(request.match_info["session_id"]))
        except UserError as exc:
            return _error(exc, 400)
        scoped = self.access.scope(request, session)
        if isinstance(self.agent, AgentModule):
            self.agent.refresh(scoped)  # another worker may have taken turns on it (a shared store)
        state = self.agent.state_dict(scoped)
        if any(state.values()):  # held in memory now (perhaps read back from a store)
            self.sessions.touch(AccessControl.tenant_of(request), scoped)
        return web.Response(text=_dump(state), content_type="application/json")

    async def forget(self, request: web.Request) -> web.Response:
        """Forget one session of the caller's tenant: every memory of the agent tree, and its stored copy."""
        try:
            session = self.access.scope(request, session_of(session_key(request.match_info["session_id"])))
        except UserError as exc:
            return _error(exc, 400)
        self.agent.reset(session, recursive=True)
        self.sessions.forget(AccessControl.tenant_of(request), session)
        logger.info("DELETE /memory session=%s", session)
        return web.json_response({"deleted": session})

    async def chat_completion(self, request: web.Request) -> web.StreamResponse:
        """Answer ``message`` in ``session_id`` (streamed as SSE when ``stream`` is true)."""
        try:
            chat = parse_chat_request(loads(await request.read()), self.limits)
            call = events_call(self.agent) if chat.stream == "events" else self.agent
        except (ValueError, UserError) as exc:  # ParseError and pydantic's ValidationError are ValueErrors
            return _error(exc, 400)
        session = self.access.scope(request, chat.session_id)
        kwargs = {"session_id": session, **chat.overrides}
        return await self._answer(request, call, chat.inputs, kwargs, bool(chat.stream), "/chat_completion")

    async def resume(self, request: web.Request) -> web.StreamResponse:
        """Take a run paused for approval up again: ``{"decisions": {call id: true | false | reason}, ...}``.

        The answer is the agent's reply (or, while calls still wait, another interrupted
        message), as from ``/chat_completion``; 409 when the session has no paused run.
        """
        try:
            resume = parse_resume_request(loads(await request.read()))
            call = events_call(self.agent, resume=True) if resume.stream == "events" else self.agent.resume
        except (ValueError, UserError) as exc:
            return _error(exc, 400)
        kwargs = {"session_id": self.access.scope(request, resume.session_id)}
        return await self._answer(request, call, [resume.decisions], kwargs, bool(resume.stream), "/resume")

    async def _answer(
        self,
        request: web.Request,
        call: Any,
        args: Sequence[object],
        kwargs: dict[str, object],
        stream: bool,
        route: str,
    ) -> web.StreamResponse:
        """Run `call` (the agent, or its ``resume``) and answer with its reply, or its chunks as SSE."""
        session = kwargs["session_id"]
        assert isinstance(session, (int, str))
        started = time.perf_counter()
        status = 200
        try:
            with self._using(request, session):
                if stream:
                    return await self._stream(request, call, args, kwargs)
                reply = await self._call(call, args, kwargs)
        except Exception as exc:  # reported to the client; the server keeps serving
            logger.warning("agent call failed: %s", exc, exc_info=not isinstance(exc, PlaitError))
            status = http_status(exc)
            return _error(exc, status)
        finally:
            self.meter.take(session)  # this route reports usage in the reply's extra_info, if at all
            self.tool_log.take(session)
            elapsed = (time.perf_counter() - started) * 1000
            logger.info("POST %s session=%s -> %d (%.0f ms)", route, session, status, elapsed)
        return web.Response(text=_dump(reply.model_dump()), content_type="application/json")

    def _using(self, request: web.Request, session: SessionId) -> AbstractContextManager[None]:
        """The request uses `session` (already in its tenant's namespace) while inside: it stays in memory."""
        return self.sessions.use(AccessControl.tenant_of(request), session)

    async def _sweep_idle(self, ttl: float) -> None:
        """Drop sessions unused for `ttl` seconds, checking every half `ttl` (at most every `SWEEP_S`)."""
        while True:
            await asyncio.sleep(min(max(ttl / 2, 0.01), SWEEP_S))
            try:
                self.sessions.sweep()
            except Exception:  # an agent's evict failed: the next sweep tries again
                logger.exception("dropping idle sessions failed")

    async def _call(self, call: Any, inputs: Sequence[Any], kwargs: Mapping[str, object]) -> AgentMessage:
        last = None
        async for chunk in agent_chunks(call, inputs, kwargs):
            last = chunk
        if not isinstance(last, AgentMessage):
            raise RuntimeError(f"{type(self.agent).__name__} replied with no message")
        return last

    async def _stream(
        self, request: web.Request, call: Any, inputs: Sequence[Any], kwargs: Mapping[str, object]
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        try:
            async for chunk in agent_chunks(call, inputs, kwargs):
                if isinstance(chunk, StreamEvent):  # stream "events": each named by its type
                    await response.write(f"event: {chunk.type}\ndata: {_dump(chunk.to_dict())}\n\n".encode())
                else:
                    await response.write(f"data: {_dump(chunk.model_dump())}\n\n".encode())
        except Exception as exc:  # the status line is gone: the error travels as the last event
            error = {"error": {"type": type(exc).__name__, "message": str(exc)}}
            await response.write(f"event: error\ndata: {_dump(error)}\n\n".encode())
        await response.write_eof()
        return response

    # -- running --------------------------------------------------------------------------------
    async def start_async(self) -> None:
        """Start listening on the running loop (`port` then holds the real port).

        Raises:
            UserError: A non-loopback `host` without a token (and without ``insecure=True``).
        """
        self._runner = web.AppRunner(
            self.app,
            access_log=None,
            keepalive_timeout=self.limits.idle_timeout,
            shutdown_timeout=SHUTDOWN_S,  # then in-flight calls are cancelled (and their models stopped)
        )
        self._server = await listen(
            self._runner,
            self.host,
            self.port,
            access=self.access,
            insecure=self.insecure,
            gate=self.gate,
            what="use the agent",
            sock=self.sock,
        )
        if self._server.sockets:
            self.port = int(self._server.sockets[0].getsockname()[1])
        if self.sessions.ttl is not None:
            self._sweeper = asyncio.create_task(self._sweep_idle(self.sessions.ttl))

    @web.middleware
    async def _track(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Keep the requests in flight, so that stopping can cancel them."""
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            return await handler(request)
        finally:
            self._inflight.discard(task)

    async def stop_async(self) -> None:
        """Stop listening, cancel the calls in flight (their models stop), and close every connection."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
        inflight = [task for task in self._inflight if not task.done()]
        for task in inflight:
            task.cancel()
        if inflight:
            await asyncio.wait(inflight, timeout=SHUTDOWN_S)
        if self.a2a is not None:
            await self.a2a.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.gate.close()
        if server is not None:
            await server.wait_closed()

    def start(self) -> AgentAPIServer:
        """Serve from a background thread (returns once listening)."""
        self._loop = LoopThread(name="plait-agent-server")
        self._loop.run(self.start_async())
        return self

    def stop(self) -> None:
        """Stop a server started with `start`."""
        if self._loop is not None:
            self._loop.close(self.stop_async)
            self._loop = None

    def serve_forever(self, on_ready: Callable[[], None] | None = None) -> None:
        """Serve in this thread until interrupted (Ctrl-C or SIGTERM end it cleanly, so exit handlers run).

        Args:
            on_ready: Called once listening (default: print ``plait agent server running on URL``).
        """

        async def serve() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):  # not on every platform/thread
                    loop.add_signal_handler(signum, stop.set)
            await self.start_async()
            if on_ready is not None:
                on_ready()
            else:
                sys.stdout.write(f"plait agent server running on http://{self.host}:{self.port}\n")
                sys.stdout.flush()
            try:
                await stop.wait()
            finally:
                await self.stop_async()

        asyncio.run(serve())

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> AgentAPIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def server_token(token_file: str | None = None) -> str | dict[str, str] | None:
    """The token(s) a server program uses: from `token_file` (see `read_tokens`), else ``$PLAIT_SERVER_TOKEN``."""
    if token_file:
        return read_tokens(token_file)
    return os.environ.get(TOKEN_ENV) or None


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m plait.distributed.http_serve.app --host --port --config JSON|- [--token-file F] [--insecure]``.

    The session and connection flags of ``plait serve`` work too (`plait.cli.add_server_limit_flags`).
    """
    from ...cli import add_server_limit_flags, server_limits  # the flags of ``plait serve``

    parser = argparse.ArgumentParser(description="Serve a plait agent over HTTP.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--config", required=True, help='the agent as JSON: {"type": "...", ...}, or - to read stdin')
    parser.add_argument("--token-file", help=f"bearer token(s), mode 0600 (default: ${TOKEN_ENV})")
    parser.add_argument("--insecure", action="store_true", help="allow a non-loopback address without a token")
    parser.add_argument("--a2a", action="store_true", help="serve over A2A 1.0 too")
    add_server_limit_flags(parser)
    args = parser.parse_args(argv)
    limits = server_limits(args)
    config = json.loads(sys.stdin.read() if args.config == "-" else args.config)
    token = server_token(args.token_file)
    server = AgentAPIServer(
        config, args.host, args.port, token=token, limits=limits, insecure=args.insecure, a2a=args.a2a
    )
    server.serve_forever()


if __name__ == "__main__":
    main()
