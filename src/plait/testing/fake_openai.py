"""A real OpenAI-compatible HTTP server on 127.0.0.1, for tests and benchmarks.

`FakeOpenAIServer` serves ``POST /v1/chat/completions`` (JSON or SSE streaming, with
usage) and ``GET /v1/models`` from a background thread. What it answers comes from a
script (a list of replies, used in order), a handler function of the request body, or
by default an echo of the last message. Replies can be text, tool calls, or faults.

Example:
    ```python
    from plait.testing.fake_openai import FakeOpenAIServer, HTTPFault, Reply

    with FakeOpenAIServer([HTTPFault(500), Reply('hello')]) as server:
        llm = GPTAPI('any-model', api_base=server.base_url, key=None)
        assert llm.chat([{'role': 'user', 'content': 'hi'}]) == 'hello'
        assert len(server.requests) == 2
    ```

Reply kinds: a str (text), `Reply` (text and/or tool calls), `HTTPFault` (an error status
with an optional ``Retry-After``), `Hang` (no answer for a while), `Truncated` (the
connection drops mid-response), `PingDrip` (keep-alives that never turn into an answer),
`InvalidJSON`, `RawSSE` (an SSE transcript sent verbatim) and a plain dict (sent as the
JSON body).
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, Union

from aiohttp import web

from ..exceptions import ScriptError
from ..llms._decoded import json_object
from ..types import JSONValue
from ._server import BackgroundServer

__all__ = [
    "FakeOpenAIServer",
    "HTTPFault",
    "Hang",
    "InvalidJSON",
    "PingDrip",
    "RawSSE",
    "Reply",
    "Truncated",
]


class _NamedCall(Protocol):
    """A tool call given as an object: a plait `ToolCall`, or anything with the same attributes."""

    @property
    def name(self) -> str:
        """The tool name."""

    @property
    def arguments(self) -> object:
        """The arguments: JSON text, or a value to encode."""


_ToolCallSpec = Union[tuple[str, object], Mapping[str, object], _NamedCall]
"""One tool call of a `Reply`: a ``(name, arguments)`` pair, an OpenAI ``tool_calls`` item,
a ``{'name':..., 'arguments':...}`` dict, or a `_NamedCall` such as a plait `ToolCall`."""


@dataclass
class Reply:
    """A successful reply.

    Args:
        content: The reply text.
        tool_calls: Tool calls: ``(name, arguments)`` pairs (arguments a dict or JSON text),
            OpenAI ``tool_calls`` items, or ``{'name':..., 'arguments':...}`` dicts.
        finish_reason: Defaults to ``'tool_calls'`` when there are calls, else ``'stop'``.
        usage: Override the token counts (``prompt_tokens``, ``completion_tokens``).
        delay: Seconds to wait before answering (on top of the server's latency).
        hold: Streaming only: ``(pieces, gate)`` stops the stream after its first `pieces` content
            pieces until `gate` (a `threading.Event`) is set (at most a minute), so a test can see a
            half-streamed answer however slow the machine is.
    """

    content: str = ""
    tool_calls: Sequence[_ToolCallSpec] = ()
    finish_reason: str | None = None
    usage: Mapping[str, int] | None = None
    delay: float = 0.0
    hold: tuple[int, threading.Event] | None = None


@dataclass
class HTTPFault:
    """An error status with a JSON error body (or `body` as given) and optional ``Retry-After``."""

    status: int = 500
    body: str | Mapping[str, JSONValue] | None = None
    retry_after: float | str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Hang:
    """Answer nothing for `seconds` (longer than the client's timeout to test timeouts), then 504."""

    seconds: float = 30.0


@dataclass
class Truncated:
    """Send part of a reply, then drop the connection (streaming: no ``[DONE]``)."""

    content: str = "partial answer that never"


@dataclass
class PingDrip:
    """Keep the connection busy without answering: a keep-alive every `interval` seconds for `seconds`.

    A stream gets `content` first (a reply that stalls part-way; nothing when empty), then an
    SSE comment (``: ping``) each interval; a non-streaming request gets a newline (JSON
    whitespace) each interval. After `seconds` the response ends with no answer.
    """

    interval: float = 0.5
    seconds: float = 60.0
    content: str = ""


@dataclass
class InvalidJSON:
    """Answer 200 with a body (or an SSE data line when streaming) that is not JSON."""

    text: str = '{"choices": [ not json'


@dataclass
class RawSSE:
    """Send `text` verbatim as an SSE stream (a recorded transcript)."""

    text: str


ReplyLike = Union[str, Reply, HTTPFault, Hang, Truncated, PingDrip, InvalidJSON, RawSSE, Mapping[str, JSONValue]]
Handler = Callable[[dict[str, JSONValue]], Union[ReplyLike, Awaitable[ReplyLike]]]


def _count_tokens(text: str) -> int:
    return len(text.split())


def _messages(body: Mapping[str, object]) -> list[object]:
    messages = body.get("messages")
    return messages if isinstance(messages, list) else []


def _prompt_tokens(body: Mapping[str, object]) -> int:
    total = 0
    for message in _messages(body):
        content = message.get("content") if isinstance(message, Mapping) else None
        total += _count_tokens(content) if isinstance(content, str) else 0
    return total


@dataclass
class _Call:
    """One tool call of a reply: its id and its ``function`` object (``arguments`` as JSON text)."""

    id: object
    function: dict[str, object]

    @property
    def arguments(self) -> str:
        return str(self.function["arguments"])

    def record(self) -> dict[str, object]:
        """The item of a message's ``tool_calls``."""
        return {"id": self.id, "type": "function", "function": self.function}


def _tool_call(spec: _ToolCallSpec, index: int) -> _Call:
    call_id: object = f"call_{index}"
    if isinstance(spec, tuple):
        name, arguments = spec
        function: dict[str, object] = {"name": name, "arguments": arguments}
    elif isinstance(spec, Mapping) and "function" in spec:
        function, call_id = dict(json_object(spec["function"])), spec.get("id", call_id)
    elif isinstance(spec, Mapping):
        function = {"name": spec["name"], "arguments": spec.get("arguments", "{}")}
        call_id = spec.get("id", call_id)
    else:  # plait ToolCall or anything with the same attributes
        function = {"name": spec.name, "arguments": spec.arguments}
        call_id = getattr(spec, "id", call_id)
    if not isinstance(function["arguments"], str):
        function["arguments"] = json.dumps(function["arguments"], ensure_ascii=False)
    return _Call(call_id, function)


def _split(text: str, size: int) -> list[str]:
    if size > 0:
        return [text[i : i + size] for i in range(0, len(text), size)]
    pieces: list[str] = []
    start = 0
    for i, ch in enumerate(text):  # word-like pieces: each keeps its trailing space
        if ch == " " and i + 1 < len(text) and text[i + 1] != " ":
            pieces.append(text[start : i + 1])
            start = i + 1
    if start < len(text):
        pieces.append(text[start:])
    return pieces


class _Render:
    """Builds the JSON and SSE bodies of a `Reply` for one request."""

    def __init__(self, body: Mapping[str, object], model: str, seq: int) -> None:
        self.body = body
        self.model = str(body.get("model") or model)
        self.id = f"chatcmpl-fake{seq}"
        self.created = int(time.time())

    def usage(self, reply: Reply, calls: list[_Call]) -> dict[str, int]:
        prompt = _prompt_tokens(self.body)
        completion = _count_tokens(reply.content) + sum(_count_tokens(c.arguments) + 1 for c in calls)
        usage = {"prompt_tokens": prompt, "completion_tokens": completion}
        usage.update(reply.usage or {})
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return usage

    def completion(self, reply: Reply) -> dict[str, object]:
        calls = [_tool_call(spec, i) for i, spec in enumerate(reply.tool_calls)]
        message: dict[str, object] = {
            "role": "assistant",
            "content": reply.content if (reply.content or not calls) else None,
        }
        if calls:
            message["tool_calls"] = [call.record() for call in calls]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": reply.finish_reason or ("tool_calls" if calls else "stop"),
                }
            ],
            "usage": self.usage(reply, calls),
        }

    def chunk(
        self, delta: Mapping[str, object] | None, finish: str | None = None, usage: Mapping[str, int] | None = None
    ) -> bytes:
        data: dict[str, object] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            data["usage"] = usage
        return b"data: " + json.dumps(data, ensure_ascii=False).encode() + b"\n\n"

    def stream(self, reply: Reply, chunk_size: int) -> list[bytes]:
        calls = [_tool_call(spec, i) for i, spec in enumerate(reply.tool_calls)]
        out = [self.chunk({"role": "assistant", "content": ""})]
        out += [self.chunk({"content": piece}) for piece in _split(reply.content, chunk_size)]
        for index, call in enumerate(calls):
            head = {"index": index, "id": call.id, "type": "function"}
            head["function"] = {"name": call.function["name"], "arguments": ""}
            out.append(self.chunk({"tool_calls": [head]}))
            for piece in _split(call.arguments, chunk_size or 8):
                out.append(self.chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        out.append(self.chunk({}, reply.finish_reason or ("tool_calls" if calls else "stop")))
        options = self.body.get("stream_options") or {}
        if isinstance(options, Mapping) and options.get("include_usage"):
            out.append(self.chunk(None, usage=self.usage(reply, calls)))
        out.append(b"data: [DONE]\n\n")
        return out


def _echo(body: Mapping[str, object]) -> Reply:
    messages = _messages(body) or [{}]
    content = messages[-1].get("content") if isinstance(messages[-1], Mapping) else None
    return Reply(content=content if isinstance(content, str) else "ok")


class FakeOpenAIServer(BackgroundServer):
    """An OpenAI-compatible server on ``127.0.0.1`` (a free port), run on a background thread.

    Args:
        script: Replies used in order, one per chat request. When it runs out the server
            answers HTTP 500 and records the error in `errors` (`assert_done` raises).
        handler: ``fn(request_body) -> reply`` (may be async), used when there is no
            script (or after it runs out, if given).
        latency: Seconds every chat request waits before answering.
        model: The model listed by ``/v1/models``.
        chunk_size: Characters per streamed content piece (0: word by word).
        chunk_delay: Seconds between streamed chunks (0: the stream is written at once).
        exhausted_keys: API keys answered with a 429 ``insufficient_quota`` error.
        max_model_len: The context size the model's ``/v1/models`` entry reports, as vLLM's
            ``max_model_len`` field; None (the default): not reported. Sent as given, so a
            test may send a value no server should (a negative or huge number, a string...).

    Attributes:
        requests: Every chat request body received, in order.
        bodies: The same requests' bodies as received (bytes), for tests of what went on the wire.
        headers: The headers of each of those requests.
        model_listings: The headers of every ``GET /v1/models`` request, in order.
        errors: Problems the server hit (script exhausted, handler raised).
    """

    thread_name = "fake-openai"
    shutdown_timeout = 0.5
    backlog = 4096

    def __init__(
        self,
        script: Iterable[ReplyLike] | None = None,
        *,
        handler: Handler | None = None,
        latency: float = 0.0,
        model: str = "fake-model",
        chunk_size: int = 0,
        chunk_delay: float = 0.0,
        exhausted_keys: Iterable[str] = (),
        max_model_len: JSONValue = None,
    ) -> None:
        super().__init__()
        self.script: collections.deque[ReplyLike] = collections.deque(script or ())
        self.scripted = script is not None
        self.handler = handler
        self.latency = latency
        self.model = model
        self.chunk_size = chunk_size
        self.chunk_delay = chunk_delay
        self.exhausted_keys = set(exhausted_keys)
        self.max_model_len = max_model_len
        self.requests: list[dict[str, JSONValue]] = []
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.model_listings: list[dict[str, str]] = []
        self._seq = 0

    # -- lifecycle --

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (what `GPTAPI`'s ``api_base`` takes)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def url(self) -> str:
        """The full chat-completions URL."""
        return self.base_url + "/chat/completions"

    def _make_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        return app

    # -- script --

    def push(self, *replies: ReplyLike) -> None:
        """Append replies to the script."""
        self.scripted = True
        self.script.extend(replies)

    @property
    def remaining(self) -> int:
        """Replies left in the script."""
        return len(self.script)

    def assert_done(self) -> None:
        """Raise `ScriptError` if replies are left over or the server hit errors."""
        if self.errors:
            raise ScriptError("FakeOpenAIServer errors: " + "; ".join(self.errors))
        if self.script:
            raise ScriptError(f"FakeOpenAIServer: {len(self.script)} scripted replies were never requested")

    async def _next_reply(self, body: dict[str, JSONValue]) -> ReplyLike:
        if self.script:
            return self.script.popleft()
        if self.handler is not None:
            reply = self.handler(body)
            return await reply if isinstance(reply, Awaitable) else reply
        if self.scripted:
            message = f"script exhausted at request {len(self.requests)}"
            self.errors.append(message)
            return HTTPFault(500, {"error": {"message": f"FakeOpenAIServer {message}", "type": "script_exhausted"}})
        return _echo(body)

    # -- handlers --

    async def _models(self, request: web.Request) -> web.Response:
        self.model_listings.append(dict(request.headers))
        entry: dict[str, JSONValue] = {"id": self.model, "object": "model", "created": 0, "owned_by": "plait"}
        if self.max_model_len is not None:
            entry["max_model_len"] = self.max_model_len
        return web.json_response({"object": "list", "data": [entry]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return _error(400, f"request body is not JSON: {raw[:200]!r}")
        self._seq += 1
        self.requests.append(body)
        self.bodies.append(raw)
        self.headers.append(dict(request.headers))
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer ") and auth[7:] in self.exhausted_keys:
            return _error(429, "You exceeded your current quota.", code="insufficient_quota")
        if self.latency:
            await asyncio.sleep(self.latency)
        try:
            reply = await self._next_reply(body)
        except Exception as exc:
            self.errors.append(f"handler raised {exc!r}")
            return _error(500, f"handler raised {exc!r}")
        return await self._answer(request, body, reply)

    async def _answer(self, request: web.Request, body: dict[str, JSONValue], reply: ReplyLike) -> web.StreamResponse:
        stream = bool(body.get("stream"))
        if isinstance(reply, str):
            reply = Reply(content=reply)
        if isinstance(reply, HTTPFault):
            return _fault(reply)
        if isinstance(reply, Hang):
            await asyncio.sleep(reply.seconds)
            return _error(504, "the fake server hung on purpose")
        if isinstance(reply, InvalidJSON):
            if stream:
                return await self._send_stream(request, [b"data: " + reply.text.encode() + b"\n\n"])
            return web.Response(body=reply.text.encode(), content_type="application/json")
        if isinstance(reply, RawSSE):
            return await self._send_stream(request, [reply.text.encode()])
        if isinstance(reply, Truncated):
            return await self._truncate(request, body, reply, stream)
        if isinstance(reply, PingDrip):
            return await self._drip(request, body, reply, stream)
        if isinstance(reply, Mapping):
            return web.json_response(dict(reply))
        if reply.delay:
            await asyncio.sleep(reply.delay)
        render = _Render(body, self.model, self._seq)
        if stream:
            chunks = render.stream(reply, self.chunk_size)
            if reply.hold is None:
                return await self._send_stream(request, chunks)
            pieces, gate = reply.hold
            return await self._send_stream(request, chunks, gate=(1 + pieces, gate))
        return web.Response(body=json.dumps(render.completion(reply)).encode(), content_type="application/json")

    async def _send_stream(
        self, request: web.Request, chunks: list[bytes], gate: tuple[int, threading.Event] | None = None
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        if gate is not None:
            at, event = gate
            await resp.write(b"".join(chunks[:at]))
            await asyncio.to_thread(event.wait, 60)
            chunks = chunks[at:]
        if self.chunk_delay:
            for chunk in chunks:
                await resp.write(chunk)
                await asyncio.sleep(self.chunk_delay)
        else:
            await resp.write(b"".join(chunks))
        await resp.write_eof()
        return resp

    async def _truncate(
        self, request: web.Request, body: dict[str, JSONValue], reply: Truncated, stream: bool
    ) -> web.StreamResponse:
        render = _Render(body, self.model, self._seq)
        if stream:
            chunks = render.stream(Reply(content=reply.content), self.chunk_size)
            data = b"".join(chunks[: max(2, len(chunks) // 2)])
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        else:
            full = json.dumps(render.completion(Reply(content=reply.content))).encode()
            data = full[: len(full) // 2]
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            resp.content_length = len(full)
        await resp.prepare(request)
        await resp.write(data)
        transport = request.transport
        if transport is not None:
            transport.close()  # drop the connection mid-body
        raise asyncio.CancelledError  # end the handler without finishing the response

    async def _drip(
        self, request: web.Request, body: dict[str, JSONValue], reply: PingDrip, stream: bool
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream" if stream else "application/json"})
        await resp.prepare(request)
        if stream and reply.content:
            render = _Render(body, self.model, self._seq)
            head = [render.chunk({"role": "assistant", "content": ""})]
            await resp.write(
                b"".join(head + [render.chunk({"content": p}) for p in _split(reply.content, self.chunk_size)])
            )
        keep_alive = b": ping\n\n" if stream else b"\n"
        loop = asyncio.get_running_loop()
        end = loop.time() + reply.seconds
        try:
            while loop.time() < end:
                await resp.write(keep_alive)
                await asyncio.sleep(reply.interval)
            await resp.write_eof()
        except ConnectionError:  # the client gave up (what a drip is for)
            pass
        return resp


def _error(status: int, message: str, *, code: str | None = None) -> web.Response:
    error = {"message": message, "type": code or "fake_error", "code": code}
    return web.json_response({"error": error}, status=status)


def _fault(fault: HTTPFault) -> web.Response:
    headers = dict(fault.headers)
    if fault.retry_after is not None:
        headers["Retry-After"] = str(fault.retry_after)
    if fault.body is None:
        body = json.dumps({"error": {"message": f"fake HTTP {fault.status}", "type": "fake_fault", "code": None}})
    elif isinstance(fault.body, str):
        body = fault.body
    else:
        body = json.dumps(dict(fault.body))
    return web.Response(status=fault.status, text=body, content_type="application/json", headers=headers)
