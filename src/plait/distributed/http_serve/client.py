"""Clients of an `AgentAPIServer`, and servers started in a subprocess (Lagent's names and signatures).

```python
with HTTPAgentServer("0", {"type": "plait.agents.AsyncAgent", "llm": {...}}, port=8090) as agent:
    reply = agent("hello", session_id="u1")     # an AgentMessage, as from a local agent
    agent.state_dict("u1")                       # {'memory': [...]}
```

One pooled aiohttp session per client (the sync client runs it on a private loop thread).
A server that answers with an error, or cannot be reached, raises `RemoteAgentError`.
A server that needs a token gets it from ``token=`` or ``$PLAIT_SERVER_TOKEN``; a server
started here receives its config on stdin and its token in its environment, never on its
command line.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import urllib.response
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import NoReturn

import aiohttp

from ...exceptions import RemoteAgentError
from ...llms._sse import SSEDecoder
from ...memory.base_memory import MessageLike
from ...schema import AgentMessage, AgentStatusCode, PendingCall
from ...types import JSONValue, SessionId
from ...utils._aio import LoopThread
from ...utils._json import json_default
from ...utils._session_pool import SessionPool
from .access import TOKEN_ENV
from .requests import ServerLimits

__all__ = ["AsyncHTTPAgentClient", "AsyncHTTPAgentServer", "HTTPAgentClient", "HTTPAgentServer"]


def _json(value: object) -> str:
    def default(item: object) -> object:
        if isinstance(item, type):  # a class in a config dict travels as its dotted path
            return f"{item.__module__}.{item.__qualname__}"
        return json_default(item)

    return json.dumps(value, ensure_ascii=False, default=default)


def _message(item: MessageLike) -> object:
    return item.model_dump() if isinstance(item, AgentMessage) else item


def _state(body: str | bytes, url: str) -> dict[str, JSONValue]:
    """A served agent's state, decoded (the server sends `state_dict` as one JSON object)."""
    state = json.loads(body)
    if not isinstance(state, dict):
        raise RemoteAgentError(f"the agent at {url} sent a state that is not a JSON object: {state!r:.200}")
    return state


def _raise_for(status: int, text: str, url: str) -> NoReturn:
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        error = None
    detail = f"{error.get('type')}: {error.get('message')}" if isinstance(error, Mapping) else text[:300]
    raise RemoteAgentError(f"the agent at {url} answered HTTP {status}: {detail}", status, error)


class _ClientCore:
    """Request building and answer decoding shared by the sync and async clients.

    Args:
        host: The server's address.
        port: The server's port.
        timeout: Seconds a call may take (None: no limit).
        token: The server's bearer token (default: ``$PLAIT_SERVER_TOKEN``, if set).
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 8090, timeout: float | None = None, *, token: str | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.url = f"http://{host}:{port}"
        self._token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        self._headers = {"Content-Type": "application/json"}
        if self._token:
            self._headers["Authorization"] = f"Bearer {self._token}"
        # one client address's share of a server's connections: more calls wait here for a free one, not for a 429
        self._pool = SessionPool(max_connections=ServerLimits().max_connections_per_client)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r}, token={'***' if self._token else None})"

    def _open(self, path: str, timeout: float | None) -> urllib.response.addinfourl:
        """A blocking GET of `path` with this client's headers."""
        request = urllib.request.Request(self.url + path, headers=self._headers)
        response: urllib.response.addinfourl = urllib.request.urlopen(request, timeout=timeout)
        return response

    @property
    def is_alive(self) -> bool:
        """Whether the server answers its health check (a short blocking request)."""
        try:
            with self._open("/health_check", 5) as response:
                return bool(response.status == 200 and json.loads(response.read()).get("status") == "ok")
        except (OSError, ValueError, urllib.error.URLError):
            return False

    async def _request(self, method: str, path: str, body: object = None) -> str:
        session = await self._pool.get()
        url = self.url + path
        try:
            async with session.request(
                method,
                url,
                data=None if body is None else _json(body),
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            ) as response:
                text = await response.text()
                if response.status != 200:
                    _raise_for(response.status, text, url)
                return text
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise RemoteAgentError(f"could not reach the agent at {url}: {exc or type(exc).__name__}") from exc

    @staticmethod
    def _body(
        messages: tuple[MessageLike, ...], session_id: SessionId, kwargs: Mapping[str, object]
    ) -> dict[str, object]:
        return {"message": [_message(m) for m in messages], "session_id": session_id, **kwargs}

    async def _acall(
        self, messages: tuple[MessageLike, ...], session_id: SessionId, kwargs: Mapping[str, object]
    ) -> AgentMessage:
        text = await self._request("POST", "/chat_completion", self._body(messages, session_id, kwargs))
        return self._chunk(text, self.url + "/chat_completion")

    async def _aresume(
        self, decisions: Mapping[str, bool | str | Mapping[str, object]], session_id: SessionId
    ) -> AgentMessage:
        text = await self._request("POST", "/resume", {"decisions": dict(decisions), "session_id": session_id})
        return self._chunk(text, self.url + "/resume")

    async def _astate_dict(self, session_id: SessionId) -> dict[str, JSONValue]:
        return _state(await self._request("GET", f"/memory/{session_id}"), self.url)

    async def _astream(
        self, messages: tuple[MessageLike, ...], session_id: SessionId, kwargs: Mapping[str, object]
    ) -> AsyncIterator[AgentMessage]:
        session = await self._pool.get()
        url = self.url + "/chat_completion"
        body = {**self._body(messages, session_id, kwargs), "stream": True}
        try:
            async with session.post(
                url, data=_json(body), headers=self._headers, timeout=aiohttp.ClientTimeout(total=self.timeout)
            ) as response:
                if response.status != 200:
                    _raise_for(response.status, await response.text(), url)
                decoder = SSEDecoder()
                async for chunk in response.content.iter_any():
                    for data in decoder.feed(chunk):
                        yield self._chunk(data, url)
                for data in decoder.flush():
                    yield self._chunk(data, url)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise RemoteAgentError(f"could not reach the agent at {url}: {exc or type(exc).__name__}") from exc

    @staticmethod
    def _chunk(data: str, url: str) -> AgentMessage:
        item = json.loads(data)
        if "error" in item and "content" not in item:
            _raise_for(500, data, url)
        message = AgentMessage(**item)
        if message.stream_state == AgentStatusCode.INTERRUPTED and isinstance(message.content, list):
            message.content = [PendingCall(**call) if isinstance(call, dict) else call for call in message.content]
        return message


class HTTPAgentClient(_ClientCore):
    """Calls an agent served by `AgentAPIServer`, synchronously.

    Args:
        host: The server's address.
        port: Its port.
        timeout: Seconds a call may take (None: no limit).
        token: The server's bearer token (default: ``$PLAIT_SERVER_TOKEN``, if set).
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 8090, timeout: float | None = None, *, token: str | None = None
    ) -> None:
        super().__init__(host, port, timeout, token=token)
        self._io = LoopThread(name="plait-agent-client")
        self._finalizer = weakref.finalize(self, self._io.close, self._pool.aclose)  # also at interpreter exit

    def __call__(self, *message: MessageLike, session_id: SessionId = 0, **kwargs: object) -> AgentMessage:
        """The agent's reply to `message` in `session_id` (as a local agent call)."""
        return self._io.run(self._acall(message, session_id, kwargs))

    def stream(self, *message: MessageLike, session_id: SessionId = 0, **kwargs: object) -> Iterator[AgentMessage]:
        """The reply as the agent streams it (a streaming agent's chunks; else one message)."""
        return self._io.iterate(self._astream(message, session_id, kwargs))

    def resume(
        self, decisions: Mapping[str, bool | str | Mapping[str, object]], session_id: SessionId = 0
    ) -> AgentMessage:
        """Take the session's run paused for approval up again (see `Agent.resume`)."""
        return self._io.run(self._aresume(decisions, session_id))

    def state_dict(self, session_id: SessionId = 0) -> dict[str, JSONValue]:
        """The served agent's `state_dict` of a session."""
        return self._io.run(self._astate_dict(session_id))

    def close(self) -> None:
        """Close the connection pool and the client's loop thread (a later call opens them again)."""
        self._io.close(self._pool.aclose)


class AsyncHTTPAgentClient(_ClientCore):
    """The async twin of `HTTPAgentClient`: ``await client(...)``, ``async for chunk in client.stream(...)``."""

    async def __call__(self, *message: MessageLike, session_id: SessionId = 0, **kwargs: object) -> AgentMessage:
        """The agent's reply to `message` in `session_id`."""
        return await self._acall(message, session_id, kwargs)

    def stream(self, *message: MessageLike, session_id: SessionId = 0, **kwargs: object) -> AsyncIterator[AgentMessage]:
        """The reply as the agent streams it."""
        return self._astream(message, session_id, kwargs)

    async def resume(
        self, decisions: Mapping[str, bool | str | Mapping[str, object]], session_id: SessionId = 0
    ) -> AgentMessage:
        """Take the session's run paused for approval up again (see `AsyncAgent.resume`)."""
        return await self._aresume(decisions, session_id)

    def state_dict(self, session_id: SessionId = 0) -> dict[str, JSONValue]:
        """The served agent's `state_dict` of a session (synchronous, as Lagent's: a short blocking request).

        Inside a coroutine, ``await client.astate_dict(...)`` does not block the event loop.
        """
        path = f"/memory/{urllib.parse.quote(str(session_id), safe='')}"
        url = self.url + path
        try:
            with self._open(path, self.timeout) as response:
                return _state(response.read(), url)
        except urllib.error.HTTPError as exc:
            _raise_for(exc.code, exc.read().decode("utf-8", "replace"), url)
        except (OSError, ValueError) as exc:
            raise RemoteAgentError(f"could not reach the agent at {url}: {exc or type(exc).__name__}") from exc

    async def astate_dict(self, session_id: SessionId = 0) -> dict[str, JSONValue]:
        """The served agent's `state_dict` of a session, awaited."""
        return await self._astate_dict(session_id)

    async def close(self) -> None:
        """Close this loop's connection pool."""
        await self._pool.aclose()


class _ServedProcess(_ClientCore):
    """An `AgentAPIServer` in a child process (``CUDA_VISIBLE_DEVICES=gpu_id``), waited for with a deadline.

    Mixed in before the sync or async client class, whose constructor ``super()`` reaches.

    Args:
        gpu_id: ``CUDA_VISIBLE_DEVICES`` for the server process.
        config: The agent as a JSON-able config dict (classes are sent as dotted paths).
        host: The address to serve on.
        port: The port to serve on.
        timeout: Seconds a call may take.
        start_timeout: Seconds the server may take to answer its health check.
        token: A bearer token the server requires (passed in its environment; default:
            ``$PLAIT_SERVER_TOKEN``, which the server inherits).

    Raises:
        RemoteAgentError: The server exited or did not come up in time (with its output).
    """

    def __init__(
        self,
        gpu_id: str | int = "0",
        config: Mapping[str, object] | None = None,
        host: str = "127.0.0.1",
        port: int = 8090,
        timeout: float | None = None,
        start_timeout: float = 120.0,
        *,
        token: str | None = None,
    ) -> None:
        super().__init__(host, port, timeout, token=token)
        self._start_process(gpu_id, config or {}, start_timeout)

    def _start_process(self, gpu_id: str | int, config: Mapping[str, object], start_timeout: float) -> None:
        self.gpu_id = gpu_id
        self.config = config
        command = [sys.executable, "-m", "plait.distributed.http_serve.app"]
        command += [
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--config",
            "-",
        ]  # the config (keys and all) on stdin
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu_id))
        if self._token:
            env[TOKEN_ENV] = self._token
        self.output: collections.deque[str] = collections.deque(maxlen=50)
        self.process: subprocess.Popen[str] | None = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # a server that died at once says why in its output
            self.process.stdin.write(_json(config))
            self.process.stdin.close()
        threading.Thread(target=self._drain, args=(self.process,), daemon=True).start()
        deadline = time.monotonic() + start_timeout
        while not self.is_alive:
            if self.process.poll() is not None:
                self._stop_process()
                tail = "".join(self.output).strip()
                raise RemoteAgentError(f"the agent server exited with status {self.process_status}:\n{tail[-2000:]}")
            if time.monotonic() > deadline:
                self._stop_process()
                raise RemoteAgentError(f"the agent server did not answer at {self.url} within {start_timeout} s")
            time.sleep(0.1)

    def _drain(self, process: subprocess.Popen[str]) -> None:
        if process.stdout is not None:
            for line in process.stdout:
                self.output.append(line)

    def _stop_process(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        self.process_status = process.poll()
        if self.process_status is None:
            process.terminate()
            try:
                self.process_status = process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                self.process_status = process.wait()
        if process.stdout is not None:
            process.stdout.close()


class HTTPAgentServer(_ServedProcess, HTTPAgentClient):
    """Starts `AgentAPIServer` for `config` in a subprocess and is a (sync) client of it (see `_ServedProcess`)."""

    def shutdown(self) -> None:
        """Stop the server process and close the client."""
        self._stop_process()
        self.close()

    def __enter__(self) -> HTTPAgentServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()


class AsyncHTTPAgentServer(_ServedProcess, AsyncHTTPAgentClient):
    """`HTTPAgentServer` with the async client's calls (starting it still waits for the server)."""

    def shutdown(self) -> None:
        """Stop the server process."""
        self._stop_process()

    async def __aenter__(self) -> AsyncHTTPAgentServer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
        await asyncio.to_thread(self.shutdown)
