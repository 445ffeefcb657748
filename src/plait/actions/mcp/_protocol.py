"""What both ends of an MCP connection agree on: versions, JSON-RPC framing, content items (private).

The client (`plait.actions.mcp._session`) and the server (`plait.actions.mcp.server`)
share these, so the two sides never disagree on a code or a shape:

* `PROTOCOL_VERSIONS`: the revisions plait speaks, newest first;
* the JSON-RPC 2.0 error codes, message builders (`request_message`, `notification_message`,
  `result_message`, `error_message`) and `answerable_id` (the id an answer can carry);
* `result_items` (an MCP ``tools/call`` result -> plait result items, for the client) and
  `content_items` (plait result items -> MCP content, for the server: text, inline media,
  ``resource_link`` for other files).
"""

from __future__ import annotations

import base64
import json
import mimetypes
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

from ...types import JSONValue

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "PROTOCOL_VERSIONS",
    "REQUEST_CANCELLED",
    "SERVER_BUSY",
    "answerable_id",
    "content_items",
    "error_message",
    "notification_message",
    "request_message",
    "result_items",
    "result_message",
]

#: MCP protocol revisions plait speaks, newest first (a client requests the first; a server offers it).
PROTOCOL_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
REQUEST_CANCELLED: Final = -32800
"""The answer that ends a cancelled request's HTTP response (LSP's RequestCancelled, as the official SDK sends)."""
SERVER_BUSY: Final = -32000
"""A server error of JSON-RPC's implementation-defined range: no room for another MCP session."""

MAX_MEDIA_BYTES: Final = 20 * 1024 * 1024
"""The largest file a server sends inline as image/audio content (larger ones are named, not sent)."""


def request_message(
    request_id: int | str, method: str, params: Mapping[str, JSONValue] | None = None
) -> dict[str, JSONValue]:
    """A JSON-RPC request object."""
    message: dict[str, JSONValue] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message


def notification_message(method: str, params: Mapping[str, JSONValue] | None = None) -> dict[str, JSONValue]:
    """A JSON-RPC notification object (no id: no answer expected)."""
    message: dict[str, JSONValue] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message


def result_message(request_id: JSONValue, result: JSONValue) -> dict[str, JSONValue]:
    """A JSON-RPC success response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def answerable_id(message: object) -> int | str | None:
    """The id of `message` if an answer can carry it (a string or an integer, as MCP allows), else None."""
    found = message.get("id") if isinstance(message, Mapping) else None
    return found if isinstance(found, (int, str)) and not isinstance(found, bool) else None


def error_message(request_id: JSONValue, code: int, message: str, data: JSONValue = None) -> dict[str, JSONValue]:
    """A JSON-RPC error response (``id`` is None when the request's could not be read)."""
    error: dict[str, JSONValue] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


# -- content: MCP -> plait (client side) ------------------------------------------------------


def result_items(result: Mapping[str, JSONValue], save: Callable[[str, str], str]) -> list[dict[str, JSONValue]]:
    """`ActionReturn` result items for a ``tools/call`` result (or any list of MCP content parts).

    Args:
        result: The raw result (``content`` parts, maybe ``structuredContent``).
        save: ``save(base64_data, mime_type) -> path`` for images, audio and binary resources.
    """
    items: list[dict[str, JSONValue]] = []
    content = result.get("content")
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text":
            items.append({"type": "text", "content": str(part.get("text", ""))})
        elif kind in ("image", "audio"):
            items.append({"type": kind, "content": save(str(part.get("data", "")), str(part.get("mimeType", "")))})
        elif kind == "resource" and isinstance(resource := part.get("resource"), Mapping):
            if isinstance(text := resource.get("text"), str):
                items.append({"type": "text", "content": text})
            elif isinstance(blob := resource.get("blob"), str):
                path = save(blob, str(resource.get("mimeType", "")))
                items.append({"type": "file", "content": path})
        elif kind == "resource_link":
            label = part.get("title") or part.get("name") or "resource"
            items.append({"type": "text", "content": f"[{label}]({part.get('uri', '')})"})
        else:
            items.append({"type": "text", "content": json.dumps(dict(part), ensure_ascii=False)})
    structured = result.get("structuredContent")
    if not items and structured is not None:
        items.append({"type": "text", "content": json.dumps(structured, ensure_ascii=False)})
    return items


# -- content: plait -> MCP (server side) ------------------------------------------------------


def _media(kind: str, path: str) -> dict[str, JSONValue] | None:
    """An image/audio content part for the file at `path` (None: not a readable file of a sane size)."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > MAX_MEDIA_BYTES:
            return None
        with open(path, "rb") as handle:
            data = base64.b64encode(handle.read()).decode("ascii")
    except OSError:
        return None
    mime = mimetypes.guess_type(path)[0] or ("image/png" if kind == "image" else "application/octet-stream")
    return {"type": kind, "data": data, "mimeType": mime}


def _resource_link(kind: str, path: str) -> dict[str, JSONValue] | None:
    """A ``resource_link`` part naming the file at `path` by its ``file://`` URI (None: no such file)."""
    try:
        if not os.path.isfile(path):
            return None
        resolved = Path(path).resolve()
        size = resolved.stat().st_size
    except (OSError, ValueError):  # a path with a NUL byte, a file gone meanwhile
        return None
    mime = mimetypes.guess_type(resolved.name)[0] or "application/octet-stream"
    return {"type": "resource_link", "uri": resolved.as_uri(), "name": resolved.name, "mimeType": mime, "size": size}


def content_items(
    items: Sequence[Mapping[str, object]] | None, version: str = PROTOCOL_VERSIONS[0]
) -> list[dict[str, JSONValue]]:
    """MCP content parts for plait result items.

    Text is text; an image or audio item whose content is a file path becomes inline
    base64 content; any other file (a ``file`` or ``video`` item, or media too large to
    send inline) becomes a ``resource_link`` to its ``file://`` URI when the client speaks
    2025-06-18 or later. Anything else (paths that cannot be read, links for older clients)
    is a text part naming it, as `ActionReturn.format_result` writes it.

    Args:
        items: The result items.
        version: The protocol revision agreed with the client.
    """
    links = version >= "2025-06-18"  # the revision that added resource links to tool results
    parts: list[dict[str, JSONValue]] = []
    for item in items or ():
        kind = str(item.get("type", "text"))
        content = item.get("content", "")
        if kind == "text":
            text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
            parts.append({"type": "text", "text": text})
            continue
        part = _media(kind, content) if kind in ("image", "audio") and isinstance(content, str) else None
        if part is None and links and isinstance(content, str):
            part = _resource_link(kind, content)
        parts.append(part or {"type": "text", "text": f"[{kind}]({content})"})
    return parts
