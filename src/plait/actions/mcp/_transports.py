"""How MCP messages travel: a server subprocess over stdio, or Streamable HTTP (private).

* `StdioTransport` starts the server as a child process and exchanges newline-delimited
  JSON on its stdin/stdout; the last few KB of its stderr are kept for error messages.
  The child gets a minimal environment (``PATH``, ``HOME``, locale...) plus ``env``,
  so API keys in plait's environment do not leak to third-party servers by default.
* `HTTPTransport` POSTs each message to the server's endpoint and reads the answer as
  JSON or as a Server-Sent-Events stream, carrying the ``Mcp-Session-Id`` the server
  assigns and the negotiated ``MCP-Protocol-Version``. A server that ends (or loses) a
  request's stream before its answer is asked again with a ``GET`` and ``Last-Event-ID``
  after its ``retry`` hint, as spec 2025-11-25 (SEP-1699) has clients resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Mapping, Sequence

import aiohttp

from ...exceptions import MCPError
from ...llms._sse import SSEDecoder
from ...types import JSONValue
from ._session import Closed, Deliver

__all__ = ["HTTPTransport", "StdioTransport", "safe_environment"]

logger = logging.getLogger(__name__)

#: Variables a stdio server inherits from plait's environment unless ``inherit_env=True``.
SAFE_VARIABLES = (
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LOGNAME",
    "PATH",
    "SHELL",
    "SYSTEMROOT",
    "TEMP",
    "TERM",
    "TMP",
    "TMPDIR",
    "USER",
    "VIRTUAL_ENV",
)
_STDERR_KEPT = 4096
_LINE_LIMIT = 64 * 1024 * 1024  # one JSON-RPC message per line; results may be large
_DEFAULT_RETRY = 1.0  # seconds before resuming a stream when the server gave no retry hint
_MAX_RETRY = 30.0  # the longest wait between reconnections that bring nothing
_FRUITLESS_RESUMES = 5  # reconnections in a row without a new event before a request fails


def safe_environment(extra: Mapping[str, str] | None = None, inherit: bool = False) -> dict[str, str]:
    """The environment of a stdio server: the safe variables (or everything) plus `extra`."""
    base = dict(os.environ) if inherit else {k: v for k, v in os.environ.items() if k in SAFE_VARIABLES}
    base.update(extra or {})
    return base


class StdioTransport:
    """A server run as a child process, speaking JSON-RPC lines on stdin/stdout.

    Args:
        command: The program to run.
        args: Its arguments.
        env: The child's environment (see `safe_environment`).
        cwd: Its working directory.
    """

    def __init__(
        self, command: str, args: Sequence[str], env: Mapping[str, str] | None, cwd: str | None = None
    ) -> None:
        self.command = command
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.process: asyncio.subprocess.Process | None = None
        self.stderr_tail = b""
        self._tasks: list[asyncio.Task[None]] = []

    def set_protocol_version(self, version: str) -> None:
        """Not needed over stdio."""

    async def start(self, deliver: Deliver, closed: Closed) -> None:
        """Start the server process and read its output."""
        try:
            self.process = await asyncio.create_subprocess_exec(
                self.command,
                *self.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                limit=_LINE_LIMIT,
            )
        except OSError as exc:
            raise MCPError(f"could not start the MCP server {self.command!r}: {exc}") from exc
        self._tasks = [
            asyncio.create_task(self._read(deliver, closed)),
            asyncio.create_task(self._drain_stderr()),
        ]

    async def _read(self, deliver: Deliver, closed: Closed) -> None:
        process = self.process
        if process is None or process.stdout is None:
            return
        try:
            while line := await process.stdout.readline():
                _deliver_json(line.decode("utf-8", errors="replace"), deliver)
        except (ValueError, OSError) as exc:  # a line over the limit, a broken pipe
            logger.debug("reading from the MCP server failed: %s", exc)
        code = await process.wait()
        await asyncio.sleep(0)  # let the stderr reader catch up
        closed(self.describe_exit(code))

    async def _drain_stderr(self) -> None:
        if self.process is None or self.process.stderr is None:
            return
        while chunk := await self.process.stderr.read(4096):
            self.stderr_tail = (self.stderr_tail + chunk)[-_STDERR_KEPT:]

    def describe_exit(self, code: int | None) -> str:
        """Why the link ended, with the end of the server's stderr."""
        text = f"the MCP server {self.command!r} exited with status {code}"
        tail = self.stderr_tail.decode("utf-8", errors="replace").strip()
        return f"{text}; its stderr ends with:\n{tail[-1000:]}" if tail else text

    async def send(self, message: Mapping[str, JSONValue]) -> None:
        """Write one JSON line to the server's stdin."""
        process = self.process
        if process is None or process.stdin is None or process.returncode is not None:
            raise MCPError(self.describe_exit(process.returncode if process else None))
        try:
            process.stdin.write(json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n")
            await process.stdin.drain()
        except (ConnectionError, OSError) as exc:
            try:  # most often it exited (a bad script): say so, with its stderr, rather than "broken pipe"
                code = await asyncio.wait_for(process.wait(), 1.0)
            except asyncio.TimeoutError:
                raise MCPError(f"the MCP server {self.command!r} stopped reading its input: {exc}") from exc
            await asyncio.sleep(0)  # let the stderr reader catch up
            raise MCPError(self.describe_exit(code)) from exc

    async def close(self) -> None:
        """Close stdin, then terminate (and finally kill) the process if it does not exit."""
        process, self.process = self.process, None
        if process is not None and process.returncode is None:
            if process.stdin is not None:
                process.stdin.close()
            for stop in (None, process.terminate, process.kill):
                if stop is not None:
                    with contextlib.suppress(ProcessLookupError):
                        stop()
                try:
                    await asyncio.wait_for(process.wait(), 2.0)
                    break
                except asyncio.TimeoutError:
                    continue
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []


class HTTPTransport:
    """Streamable HTTP: each message is POSTed; answers come back as JSON or an SSE stream.

    Args:
        url: The server's MCP endpoint (e.g. ``http://127.0.0.1:8000/mcp``).
        headers: Extra request headers (authorization...).
        timeout: Seconds to wait for the connection and each answer.
    """

    def __init__(self, url: str, headers: Mapping[str, str] | None = None, timeout: float | None = 60.0) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._http: aiohttp.ClientSession | None = None
        self._deliver: Deliver | None = None

    def set_protocol_version(self, version: str) -> None:
        """Sent as ``MCP-Protocol-Version`` on every later request."""
        self.protocol_version = version

    async def start(self, deliver: Deliver, closed: Closed) -> None:
        """Open the HTTP connection pool (the handshake is the first POST)."""
        self._deliver = deliver
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.timeout))

    def _request_headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream", **self.headers}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    async def send(self, message: Mapping[str, JSONValue]) -> None:
        """POST `message`; deliver whatever the answer holds, resuming a stream the server ended early.

        Raises:
            MCPError: The server refused the message, could not be reached, or ended a
                request's stream before answering it without a way to resume.
        """
        http, deliver = self._http, self._deliver
        if http is None or deliver is None:
            raise MCPError("the MCP HTTP transport is not started (or was closed)")
        request_id = message.get("id") if "method" in message else None
        stream = _RequestStream(request_id, deliver)
        try:
            async with http.post(self.url, json=message, headers=self._request_headers()) as response:
                session_id = response.headers.get("Mcp-Session-Id")
                if session_id:
                    self.session_id = session_id
                if response.status >= 400:
                    raise await self._refused(response)
                if response.status == 202 or request_id is None:
                    return  # a notification or a response: nothing comes back
                if response.content_type != "text/event-stream":
                    _deliver_json(await response.text(), deliver)
                    return
                await stream.read(response)
        except aiohttp.ClientError as exc:
            if stream.last_event_id is None:
                raise MCPError(f"could not reach the MCP server at {self.url}: {exc}") from exc
            logger.debug("the MCP server's stream broke (%s); resuming after event %s", exc, stream.last_event_id)
        if not stream.answered:
            await self._resume(http, stream, str(message.get("method")))

    async def _resume(self, http: aiohttp.ClientSession, stream: _RequestStream, method: str) -> None:
        """GET the request's stream again from its last event id until its answer comes (spec 2025-11-25, SEP-1699).

        The server's ``retry`` hint sets the wait before each reconnection (1 s without one);
        reconnections that bring no new event back off (doubling, at most 30 s) and end
        after `_FRUITLESS_RESUMES`. The request's own timeout bounds the whole.
        """
        fruitless = 0
        while not stream.answered:
            if stream.last_event_id is None:
                raise MCPError(
                    f"the MCP server at {self.url} ended the stream of {method} before answering it, "
                    "with no event id to resume from"
                )
            if fruitless >= _FRUITLESS_RESUMES:
                raise MCPError(
                    f"the MCP server at {self.url} did not answer {method}: {fruitless} reconnections "
                    f"from event {stream.last_event_id!r} brought nothing"
                )
            wait = stream.retry / 1000 if stream.retry is not None else _DEFAULT_RETRY
            await asyncio.sleep(min(wait * 2**fruitless, _MAX_RETRY) if fruitless else wait)
            before = stream.events
            headers = {**self._request_headers(), "Accept": "text/event-stream", "Last-Event-ID": stream.last_event_id}
            try:
                async with http.get(self.url, headers=headers) as response:
                    if response.status >= 400:
                        raise await self._refused(response, f"resuming {method} from event {stream.last_event_id!r}")
                    if response.content_type != "text/event-stream":
                        raise MCPError(
                            f"the MCP server at {self.url} answered the resumption of {method} "
                            f"with {response.content_type!r}, not an event stream"
                        )
                    await stream.read(response)
            except aiohttp.ClientError as exc:
                logger.debug("resuming %s from the MCP server failed: %s", method, exc)
            fruitless = 0 if stream.events > before else fruitless + 1

    async def _refused(self, response: aiohttp.ClientResponse, doing: str = "") -> MCPError:
        """The error for an HTTP error answer (a 404 on a known session: it expired)."""
        body = (await response.text(errors="replace"))[:500]
        expired = response.status == 404 and self.session_id is not None
        what = "the MCP session expired on the server" if expired else "the MCP server refused a request"
        return MCPError(f"{what}{f' ({doing})' if doing else ''}: HTTP {response.status} from {self.url}: {body}")

    async def close(self) -> None:
        """End the server-side session (``DELETE``) and close the pool."""
        http, self._http = self._http, None
        if http is None:
            return
        if self.session_id:
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
                async with http.delete(self.url, headers=self._request_headers(), timeout=aiohttp.ClientTimeout(2)):
                    pass
        await http.close()


class _RequestStream:
    """The SSE stream(s) that carry one request's answer: its events, last event id and retry hint.

    Args:
        request_id: The request's id (None: a notification or a response, nothing to wait for).
        deliver: Where every message goes.
    """

    def __init__(self, request_id: JSONValue, deliver: Deliver) -> None:
        self.request_id = request_id
        self.deliver = deliver
        self.answered = False
        self.events = 0
        self.last_event_id: str | None = None
        self.retry: int | None = None

    async def read(self, response: aiohttp.ClientResponse) -> None:
        """Deliver the messages of one SSE response until it ends or brings the answer.

        A resumed stream may stay open after the answer (it is the server's, not the
        request's), so reading stops there. A broken stream raises `aiohttp.ClientError`.
        """
        decoder = SSEDecoder()
        try:
            async for chunk in response.content.iter_any():
                self._take(decoder.feed(chunk), decoder)
                if self.answered:
                    return
            self._take(decoder.flush(), decoder)
        finally:
            self._take([], decoder)

    def _take(self, events: list[str], decoder: SSEDecoder) -> None:
        for data in events:
            self.events += 1
            _deliver_json(data, self._see)
        if decoder.last_event_id is not None:
            self.last_event_id = decoder.last_event_id
        if decoder.retry is not None:
            self.retry = decoder.retry

    def _see(self, message: JSONValue) -> None:
        if (
            isinstance(message, Mapping)
            and "method" not in message
            and message.get("id") == self.request_id
            and ("result" in message or "error" in message)
        ):
            self.answered = True
        self.deliver(message)


def _deliver_json(text: str, deliver: Deliver) -> None:
    """Hand each JSON-RPC message in `text` (one message or a batch) to `deliver`; skip what is not JSON."""
    if not text.strip():
        return
    try:
        message = json.loads(text)
    except ValueError:
        logger.debug("the MCP server sent something that is not JSON: %r", text[:200])
        return
    for item in message if isinstance(message, list) else [message]:
        deliver(item)
