"""`AgentAPIServer`: an agent served over HTTP (aiohttp; no web framework needed).

Routes (Lagent's, plus streaming):

* ``GET /health_check`` -> ``{"status": "ok", "timestamp": ...}``
* ``POST /chat_completion`` with ``{"message": [str or AgentMessage dict, ...], "session_id": ..., **kwargs}``
  -> the reply, as an `AgentMessage` dict; with ``"stream": true``, Server-Sent Events: one
  `AgentMessage` dict per chunk, the final (END) one last
* ``GET /memory/{session_id}`` -> ``agent.state_dict(session_id)``

Sync agents run in worker threads, async agents on the server's loop, so one slow
conversation never holds up another. Errors come back as ``{"error": {"type", "message"}}``
with status 400 (a bad request or argument), 502 (the model backend failed) or 500.

Run it as a program: ``python -m plait.distributed.http_serve.app --port 8090 --config '<json>'``
(the config is a ``{"type": ..., ...}`` dict; ``python_path`` adds a folder to ``sys.path``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from ...exceptions import PlaitError, UserError
from ...memory.base_memory import MessageLike
from ...schema import AgentMessage
from ...types import SessionId
from ...utils._aio import LoopThread
from ...utils._json import json_default
from ...utils.config import create_object
from ._calls import agent_chunks, http_status
from .openai_route import openai_routes

__all__ = ["AgentAPIServer", "main", "session_key"]

logger = logging.getLogger(__name__)


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
    """

    def __init__(self, config: object, host: str = "127.0.0.1", port: int = 8090) -> None:
        self.agent = build_agent(config)
        self.host = host
        self.port = port
        self.app = web.Application()
        self.app.add_routes(
            [
                web.get("/health_check", self.health_check),
                web.post("/chat_completion", self.chat_completion),
                web.get("/memory/{session_id}", self.memory),
                *openai_routes(lambda: self.agent),
            ]
        )
        self._runner: web.AppRunner | None = None
        self._loop: LoopThread | None = None

    # -- handlers -----------------------------------------------------------------------------
    async def health_check(self, request: web.Request) -> web.Response:
        """``{"status": "ok", "timestamp": ...}``."""
        return web.json_response({"status": "ok", "timestamp": time.time()})

    async def memory(self, request: web.Request) -> web.Response:
        """The agent tree's state of one session."""
        state = self.agent.state_dict(session_key(request.match_info["session_id"]))
        return web.Response(text=_dump(state), content_type="application/json")

    async def chat_completion(self, request: web.Request) -> web.StreamResponse:
        """Answer ``message`` in ``session_id`` (streamed as SSE when ``stream`` is true)."""
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise UserError("the body must be a JSON object")
            messages = body.pop("message", None)
            if messages is None:
                raise UserError("the body needs 'message': a string, a message dict, or a list of them")
            if isinstance(messages, (str, Mapping)):
                messages = [messages]
            inputs = [m if isinstance(m, str) else AgentMessage(**m) for m in messages]
            stream = bool(body.pop("stream", False))
        except (ValueError, TypeError, UserError) as exc:
            return _error(exc, 400)
        if stream:
            return await self._stream(request, inputs, body)
        try:
            reply = await self._call(inputs, body)
        except Exception as exc:  # reported to the client; the server keeps serving
            logger.warning("agent call failed: %s", exc, exc_info=not isinstance(exc, PlaitError))
            return _error(exc, http_status(exc))
        return web.Response(text=_dump(reply.model_dump()), content_type="application/json")

    async def _call(self, inputs: Sequence[MessageLike], kwargs: Mapping[str, object]) -> AgentMessage:
        last = None
        async for chunk in agent_chunks(self.agent, inputs, kwargs):
            last = chunk
        if last is None:
            raise RuntimeError(f"{type(self.agent).__name__} replied with no message")
        return last

    async def _stream(
        self, request: web.Request, inputs: Sequence[MessageLike], kwargs: Mapping[str, object]
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        try:
            async for chunk in agent_chunks(self.agent, inputs, kwargs):
                await response.write(f"data: {_dump(chunk.model_dump())}\n\n".encode())
        except Exception as exc:  # the status line is gone: the error travels as the last event
            error = {"error": {"type": type(exc).__name__, "message": str(exc)}}
            await response.write(f"event: error\ndata: {_dump(error)}\n\n".encode())
        await response.write_eof()
        return response

    # -- running --------------------------------------------------------------------------------
    async def start_async(self) -> None:
        """Start listening on the running loop (`port` then holds the real port)."""
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])

    async def stop_async(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

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

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (Ctrl-C or SIGTERM end it cleanly, so exit handlers run)."""

        async def serve() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):  # not on every platform/thread
                    loop.add_signal_handler(signum, stop.set)
            await self.start_async()
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


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m plait.distributed.http_serve.app --host --port --config JSON``."""
    parser = argparse.ArgumentParser(description="Serve a plait agent over HTTP.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--config", required=True, help='the agent as JSON: {"type": "...", ...}')
    args = parser.parse_args(argv)
    AgentAPIServer(json.loads(args.config), args.host, args.port).serve_forever()


if __name__ == "__main__":
    main()
