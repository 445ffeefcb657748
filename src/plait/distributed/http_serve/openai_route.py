"""``POST /v1/chat/completions`` for a served agent: any OpenAI client can talk to it.

plait's own `GPTAPI`, the openai SDK or a chat UI point their base URL at the
`AgentAPIServer` and get the agent's answers (tools, memory and all) as chat completions,
streamed as ``chat.completion.chunk`` events when they ask for ``stream``.

Sessions:

* With a session (the ``X-Session-Id`` header, or the body's ``user`` field) the agent keeps
  the conversation itself: only the request's last message is passed to it.
* Without one the request is self-contained, as OpenAI clients expect: its earlier user and
  assistant messages are loaded into a fresh session, the last message is answered, and the
  session is dropped.

Of the request's generation fields only ``temperature``, ``top_p``, ``max_tokens`` and
``stop`` are passed on (checked, within the server's caps); other OpenAI fields are ignored.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from ...exceptions import PlaitError, UserError
from ...schema import AgentMessage
from ...types import JSONValue, SessionId
from ...untrusted import loads
from ._calls import agent_chunks, http_status
from .requests import ServerLimits, openai_overrides, session_of

__all__ = ["openai_routes"]


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # OpenAI content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


def _reply_text(message: object) -> str:
    from ...agents.aggregator.default_aggregator import content_to_text

    content = getattr(message, "content", message)
    return content if isinstance(content, str) else content_to_text(content)


def _error(status: int, message: str, kind: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": status}}, status=status)


class _Completion:
    """The chat-completion objects of one request (ids and timestamps shared by its chunks)."""

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model

    def whole(self, text: str) -> dict[str, JSONValue]:
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    def chunk(self, delta: Mapping[str, str], finish_reason: str | None = None) -> bytes:
        body = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish_reason}],
        }
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode()


def _history(messages: Sequence[Mapping[str, JSONValue]], agent_name: str) -> list[AgentMessage]:
    """The earlier user/assistant turns as memory messages (system and tool messages are the agent's own business)."""
    turns = []
    for message in messages:
        role = message.get("role")
        if role == "user":
            turns.append(AgentMessage(sender="user", content=_text(message.get("content"))))
        elif role == "assistant" and message.get("content"):
            turns.append(AgentMessage(sender=agent_name, content=_text(message.get("content"))))
    return turns


def openai_routes(
    get_agent: Callable[[], Any],
    limits: ServerLimits | None = None,
    scope: Callable[[web.Request, SessionId], SessionId] | None = None,
) -> list[web.RouteDef]:
    """The routes: ``POST /v1/chat/completions`` and ``GET /v1/models`` (the agent as one model).

    Args:
        get_agent: The served agent.
        limits: The server's caps on generation parameters.
        scope: A client's session id in its tenant's namespace (see `AccessControl.scope`).
    """
    caps = limits or ServerLimits()

    async def models(request: web.Request) -> web.Response:
        agent = get_agent()
        name = str(getattr(agent, "name", None) or type(agent).__name__)
        return web.json_response({"object": "list", "data": [{"id": name, "object": "model", "owned_by": "plait"}]})

    async def completions(request: web.Request) -> web.StreamResponse:
        agent = get_agent()
        try:
            body = loads(await request.read())
            messages = body.get("messages") if isinstance(body, dict) else None
            if not isinstance(messages, list) or not messages or not all(isinstance(m, Mapping) for m in messages):
                raise UserError("'messages' must be a non-empty list of chat messages")
            assert isinstance(body, dict)
            if not isinstance(body.get("stream", False), bool) or not isinstance(body.get("model", ""), str):
                raise UserError("'stream' must be true or false and 'model' a string")
            client_session = request.headers.get("X-Session-Id") or body.get("user")
            session = None if client_session is None else session_of(client_session)
            overrides = openai_overrides(body, caps)
        except (ValueError, UserError) as exc:  # ParseError is a ValueError
            return _error(400, str(exc), "invalid_request_error")
        name = str(getattr(agent, "name", None) or type(agent).__name__)
        completion = _Completion(str(body.get("model") or name))
        question = _text(messages[-1].get("content"))
        if session is not None and scope is not None:
            session = scope(request, session)
        if session is None:
            session = f"openai-{uuid.uuid4().hex}"
            if getattr(agent, "memory", None) is not None:
                agent.memory.create_instance(session).load(_history(messages[:-1], name))
            ephemeral = True
        else:
            ephemeral = False
        try:
            kwargs = {"session_id": session, **overrides}
            if body.get("stream"):
                return await _stream(request, agent, question, kwargs, completion)
            last = None
            async for chunk in agent_chunks(agent, [question], kwargs):
                last = chunk
            return web.json_response(completion.whole(_reply_text(last)))
        except PlaitError as exc:
            return _error(http_status(exc), str(exc), type(exc).__name__)
        finally:
            if ephemeral:
                agent.reset(session, recursive=True)

    return [web.post("/v1/chat/completions", completions), web.get("/v1/models", models)]


async def _stream(
    request: web.Request, agent: Any, question: str, kwargs: Mapping[str, object], completion: _Completion
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    await response.write(completion.chunk({"role": "assistant", "content": ""}))
    sent = ""
    try:
        async for chunk in agent_chunks(agent, [question], kwargs):
            text = _reply_text(chunk)
            # a text that does not extend the last is a new reply (after a tool round): what was sent stays
            delta = text[len(sent) :] if text.startswith(sent) else f"\n\n{text}"
            if delta:
                await response.write(completion.chunk({"content": delta}))
            sent = text
        finish = "stop"
    except PlaitError as exc:  # the status line is gone: say it in the stream
        await response.write(completion.chunk({"content": f"\n[error: {type(exc).__name__}: {exc}]"}))
        finish = "error"
    await response.write(completion.chunk({}, finish))
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response
