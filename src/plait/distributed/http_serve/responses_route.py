"""``POST /v1/responses``: the served agent for clients of OpenAI's Responses API.

The route answers as ``/v1/chat/completions`` does (`openai_route`: sessions, client tools,
approvals, caps); this module only reads a Responses request into the chat request the agent is
asked with, and writes the answer as a ``response`` object, or streamed as the Responses API's
events (``response.created``, ``response.output_item.added``, ``response.output_text.delta``,
``response.function_call_arguments.delta``, ... ``response.completed``).

Read: ``input`` (a string, or items: messages with ``input_text`` / ``output_text`` parts,
``function_call`` and ``function_call_output`` items; ``reasoning`` items are dropped),
``instructions`` (a system message), function ``tools`` and ``tool_choice`` (the client's tools,
as on the chat route), ``stream``, ``temperature``, ``top_p``, ``max_output_tokens``,
``text.format`` (``json_schema`` / ``json_object``), ``metadata`` (``session_id``), ``user``,
``store`` (default true: the response is kept, ``GET`` / ``DELETE /v1/responses/{id}``) and
``previous_response_id`` (the request goes on from a stored response of the caller's; not with a
session): `response_store` keeps them. Accepted as no-ops: ``parallel_tool_calls``,
``truncation``, ``service_tier``, ``prompt_cache_key``, ``safety_identifier``,
``stream_options``. Refused with a 400 naming the field: ``conversation`` (send the conversation
in ``input``, ``previous_response_id`` or a session), ``reasoning``, ``include``, ``background``,
built-in tools (``web_search``...) and any field the API does not define. Errors name the
Responses fields (``input[2].call_id``).
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from aiohttp import web

from ...exceptions import PlaitError
from ...hooks.tool_log import ToolLog
from ...hooks.usage import Metered, UsageMeter
from ...memory.base_memory import MessageLike
from ...schema import PendingCall
from ...types import JSONValue
from ._calls import agent_chunks
from .openai_request import OpenAIRequest, OpenAIRequestError, check_openai_request
from .openai_route import _check_pause, _reply_text, _waiting
from .requests import ServerLimits

__all__ = ["ResponseAnswer", "check_responses_request"]

_COPIED = ("model", "stream", "temperature", "top_p", "metadata", "user", "parallel_tool_calls")
_IGNORED = frozenset({"truncation", "service_tier", "prompt_cache_key", "safety_identifier", "stream_options"})
_REFUSED = {
    "conversation": "conversations are not stored: send the conversation in 'input' (or a session)",
    "reasoning": "the served agent's reasoning is its model's own",
    "include": "the served agent adds nothing to its output",
    "background": "the served agent answers in the request",
    "max_tool_calls": "the served agent's tool budget is its own",
    "top_logprobs": "the served agent does not report log probabilities",
    "prompt": "the served agent has its own prompt",
}
_READ = ("input", "instructions", "tools", "tool_choice", "text", "max_output_tokens", "store", "previous_response_id")
_PARTS = {"input_text": "text", "output_text": "text"}


def check_responses_request(body: object, limits: ServerLimits) -> OpenAIRequest:
    """A Responses API body as the checked chat request (see the module docstring).

    Raises:
        OpenAIRequestError: Anything the route does not take, naming the Responses field.
    """
    if not isinstance(body, Mapping):
        raise OpenAIRequestError("the body must be a JSON object", None, "invalid_type")
    chat: dict[str, Any] = {field: body[field] for field in _COPIED if field in body}
    for field, value in body.items():
        if field in _REFUSED and value not in (None, [], False):
            raise OpenAIRequestError(f"'{field}' is not supported: {_REFUSED[field]}", field, "unsupported_parameter")
        if field not in (*_COPIED, *_IGNORED, *_REFUSED, *_READ):
            raise OpenAIRequestError(f"Unrecognized request argument supplied: {field}", field, "unknown_parameter")
    if body.get("max_output_tokens") is not None:
        chat["max_completion_tokens"] = body["max_output_tokens"]
    where: list[str] = []  # the Responses field of each chat message
    chat["messages"] = _messages(body.get("input"), body.get("instructions"), where)
    if body.get("tools") is not None:
        chat["tools"] = _tools(body["tools"])
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        choice = {"type": "function", "function": {"name": choice.get("name")}}
    if choice is not None:
        chat["tool_choice"] = choice
    text_format = _format(body.get("text"))
    if text_format is not None:
        chat["response_format"] = text_format
    try:
        request = check_openai_request(chat, limits)
    except OpenAIRequestError as exc:
        rename = partial(_responses_param, where=where)
        said = OpenAIRequest([], False, False, "", None, {}, rename=rename).said(str(exc))
        raise OpenAIRequestError(said, rename(exc.param), exc.code) from None
    store, previous = body.get("store", True), body.get("previous_response_id")
    if store is not None and not isinstance(store, bool):
        raise OpenAIRequestError("'store' must be a boolean", "store", "invalid_type")
    if previous is not None and not isinstance(previous, str):
        raise OpenAIRequestError("'previous_response_id' must be a string", "previous_response_id", "invalid_type")
    rename = partial(_responses_param, where=where)
    return dataclasses.replace(request, rename=rename, previous_response=previous, store=store is not False)


def _messages(items: object, instructions: object, where: list[str]) -> list[Any]:
    """The input as chat messages; `where` gets each one's Responses field."""
    messages: list[Any] = []
    if instructions is not None:
        messages.append({"role": "system", "content": instructions})
        where.append("instructions")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
        where.append("input")
        return messages
    if not isinstance(items, list) or not items:
        raise OpenAIRequestError("'input' must be a string or a non-empty list of items", "input", "invalid_type")
    calls: list[Any] | None = None  # the tool calls of the assistant message consecutive function_call items make
    for i, item in enumerate(items):
        at = f"input[{i}]"
        kind = item.get("type", "message") if isinstance(item, Mapping) else None
        if kind == "function_call" and isinstance(item, Mapping):
            function = {"name": item.get("name"), "arguments": item.get("arguments")}
            call = {"id": item.get("call_id"), "type": "function", "function": function}
            if calls is not None:
                calls.append(call)
                continue
            calls = [call]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            where.append(at)
            continue
        calls = None
        if kind == "message" and isinstance(item, Mapping):
            messages.append({"role": item.get("role"), "content": _content(item.get("content"))})
        elif kind == "function_call_output" and isinstance(item, Mapping):
            messages.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": _content(item.get("output"))}
            )
        elif kind == "reasoning":
            continue  # the model's own thoughts of an earlier turn: the agent keeps none
        else:
            raise OpenAIRequestError(f"'{at}.type' {kind!r} is not an input item the served agent takes", f"{at}.type")
        where.append(at)
    return messages


def _content(content: object) -> object:
    """Responses content parts (``input_text``, ``output_text``) as chat ``text`` parts; others as they are."""
    if not isinstance(content, list):
        return content
    return [
        {"type": "text", "text": part.get("text")} if isinstance(part, Mapping) and part.get("type") in _PARTS else part
        for part in content
    ]


def _tools(tools: object) -> object:
    """Responses function tools (``{"type": "function", "name", ...}``) as chat tools."""
    if not isinstance(tools, list):
        return tools
    chat = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, Mapping) else None
            raise OpenAIRequestError(
                f"'tools[{i}].type' {kind!r}: the served agent takes function tools only", f"tools[{i}].type"
            )
        function = {key: value for key, value in tool.items() if key != "type" and value is not None}
        chat.append({"type": "function", "function": function})
    return chat


def _format(text: object) -> object:
    """``text.format`` as a chat ``response_format`` (None for plain text)."""
    if text is None:
        return None
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if not isinstance(text, Mapping) or set(text) - {"format"}:
        raise OpenAIRequestError("'text' takes 'format' only", "text")
    if fmt is None or (isinstance(fmt, Mapping) and fmt.get("type") == "text"):
        return None
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        schema = {key: value for key, value in fmt.items() if key != "type"}
        return {"type": "json_schema", "json_schema": schema}
    return fmt


def _responses_param(param: str | None, where: Sequence[str]) -> str | None:
    """A chat field (``messages[3].tool_call_id``) as the Responses field it came from (``input[4].call_id``)."""
    if param is None or not param.startswith("messages["):
        names = {
            "max_completion_tokens": "max_output_tokens",
            "response_format": "text.format",
            "tool_choice.function.name": "tool_choice.name",
        }
        if param is not None and param.startswith("tools[") and ".function" in param:
            return param.replace(".function.", ".") if ".function." in param else param.replace(".function", "")
        return names.get(param or "", param) if param is not None else None
    index, _, rest = param[len("messages[") :].partition("]")
    field = where[int(index)] if index.isdigit() and int(index) < len(where) else "input"
    rest = rest.replace(".tool_call_id", ".call_id")
    return field + rest


def _response_usage(metered: Metered) -> dict[str, JSONValue] | None:
    if not metered.reported:
        return None
    return {
        "input_tokens": metered.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": metered.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": metered.total_tokens,
    }


class ResponseAnswer:
    """The ``response`` object of one request (its id and time shared by its events)."""

    def __init__(self, model: str) -> None:
        self.id = f"resp_{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model
        self.sequence = 0
        self.stored = False  # whether the response is kept (`response_store`)
        self.previous: str | None = None  # the stored response it continues
        self.final: dict[str, JSONValue] | None = None  # the finished response a stream ended with

    def response(
        self, status: str, output: list[JSONValue], usage: dict[str, JSONValue] | None = None
    ) -> dict[str, JSONValue]:
        """The ``response`` object (``status`` ``in_progress``, ``completed``, ``incomplete`` or ``failed``)."""
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": output,
            "usage": usage,
            "error": None,
            "incomplete_details": incomplete,
            "instructions": None,
            "metadata": {},
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "store": self.stored,
            "previous_response_id": self.previous,
            "text": {"format": {"type": "text"}},
        }

    def whole(self, reply: object, metered: Metered, tool_calls: list[dict[str, JSONValue]]) -> dict[str, JSONValue]:
        """The finished ``response``: a message with the reply's text, or the calls the run waits on."""
        waiting = _waiting(reply)
        output: list[JSONValue] = (
            [_call_item(call, "completed") for call in waiting] if waiting else [_message(_reply_text(reply))]
        )
        status = "incomplete" if metered.finish_reason == "length" and not waiting else "completed"
        return self.response(status, output, _response_usage(metered))

    def event(self, kind: str, **fields: JSONValue) -> bytes:
        """One SSE event: ``event: <type>`` and its JSON (with its ``type`` and ``sequence_number``)."""
        body = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return f"event: {kind}\ndata: {json.dumps(body, ensure_ascii=False)}\n\n".encode()

    async def stream(
        self,
        request: web.Request,
        call: Any,
        inputs: Sequence[MessageLike],
        kwargs: Mapping[str, object],
        observers: tuple[UsageMeter, ToolLog],
        with_usage: bool,
        ephemeral: bool,
    ) -> web.StreamResponse:
        """The Responses API's events as the agent's chunks arrive, ``response.completed`` last."""
        meter, tool_log = observers
        session = kwargs["session_id"]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        await response.write(self.event("response.created", response=self.response("in_progress", [])))
        await response.write(self.event("response.in_progress", response=self.response("in_progress", [])))
        item_id = f"msg_{uuid.uuid4().hex}"
        sent, opened, waiting = "", False, []
        try:
            async for chunk in agent_chunks(call, inputs, kwargs):
                tool_log.take(session)
                waiting = _waiting(chunk)
                if waiting:
                    _check_pause(chunk, ephemeral, session)
                    continue
                text = _reply_text(chunk)
                delta = text[len(sent) :] if text.startswith(sent) else f"\n\n{text}"
                if delta and not opened:
                    opened = True
                    item = {
                        "type": "message",
                        "id": item_id,
                        "status": "in_progress",
                        "role": "assistant",
                        "content": [],
                    }
                    await response.write(self.event("response.output_item.added", output_index=0, item=item))
                    part: dict[str, JSONValue] = {"type": "output_text", "text": "", "annotations": []}
                    await response.write(
                        self.event(
                            "response.content_part.added", item_id=item_id, output_index=0, content_index=0, part=part
                        )
                    )
                if delta:
                    await response.write(
                        self.event(
                            "response.output_text.delta",
                            item_id=item_id,
                            output_index=0,
                            content_index=0,
                            delta=delta,
                            logprobs=[],
                        )
                    )
                sent = sent + delta
        except PlaitError as exc:  # the status line is gone: say it in the stream
            meter.take(session)
            error = {"code": "server_error", "message": f"{type(exc).__name__}: {exc}"}
            failed = {**self.response("failed", []), "error": error}
            await response.write(self.event("response.failed", response=failed))
            await response.write_eof()
            return response
        output: list[JSONValue] = []
        if opened:
            await self._close_message(response, item_id, sent)
            output.append(_message(sent, item_id))
        for index, pending in enumerate(waiting, start=len(output)):
            await self._call_events(response, pending, index)
            output.append(_call_item(pending, "completed"))
        metered = meter.take(session)
        status = "incomplete" if metered.finish_reason == "length" and not waiting else "completed"
        final = self.response(status, output, _response_usage(metered))
        await response.write(self.event(f"response.{status}", response=final))
        self.final = final
        await response.write_eof()
        return response

    async def _close_message(self, response: web.StreamResponse, item_id: str, text: str) -> None:
        where: dict[str, JSONValue] = {"item_id": item_id, "output_index": 0, "content_index": 0}
        await response.write(self.event("response.output_text.done", **where, text=text, logprobs=[]))
        part: dict[str, JSONValue] = {"type": "output_text", "text": text, "annotations": []}
        await response.write(self.event("response.content_part.done", **where, part=part))
        await response.write(self.event("response.output_item.done", output_index=0, item=_message(text, item_id)))

    async def _call_events(self, response: web.StreamResponse, call: PendingCall, index: int) -> None:
        item = _call_item(call, "in_progress")
        await response.write(
            self.event("response.output_item.added", output_index=index, item={**item, "arguments": ""})
        )
        arguments = str(item["arguments"])
        where: dict[str, JSONValue] = {"item_id": item["id"], "output_index": index}
        await response.write(self.event("response.function_call_arguments.delta", **where, delta=arguments))
        await response.write(
            self.event("response.function_call_arguments.done", **where, name=call.name, arguments=arguments)
        )
        await response.write(
            self.event("response.output_item.done", output_index=index, item=_call_item(call, "completed"))
        )


def _message(text: str, item_id: str | None = None) -> dict[str, JSONValue]:
    part: dict[str, JSONValue] = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {
        "type": "message",
        "id": item_id or f"msg_{uuid.uuid4().hex}",
        "status": "completed",
        "role": "assistant",
        "content": [part],
    }


def _call_item(call: PendingCall, status: str) -> dict[str, JSONValue]:
    return {
        "type": "function_call",
        "id": f"fc_{call.id}",
        "call_id": call.id,
        "name": call.name,
        "arguments": json.dumps(call.arguments, ensure_ascii=False),
        "status": status,
    }
