r"""Incremental Server-Sent Events decoder (sans-IO: bytes in, event data out).

Follows the WHATWG event-stream rules that matter for chat streaming: lines end with
``\n``, ``\r\n`` or ``\r``; ``data:`` lines accumulate (joined by ``\n``); a blank line
dispatches the event; lines starting with ``:`` are comments. ``id`` and ``retry`` are
kept for a client that reconnects (`SSEDecoder.last_event_id`, `SSEDecoder.retry`); other
fields are ignored.
"""

from __future__ import annotations

__all__ = ["SSEDecoder"]


class SSEDecoder:
    r"""Feed raw bytes as they arrive; get back the ``data`` payload of each complete event.

    Example:
        ```python
        decoder = SSEDecoder()
        decoder.feed(b'data: {"a"')   # []
        decoder.feed(b': 1}\n\n')     # ['{"a": 1}']
        ```
    """

    __slots__ = ("_buffer", "_data", "_has_data", "_id", "last_event_id", "retry")

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []
        self._has_data = False
        self._id: str | None = None
        self.last_event_id: str | None = None
        """The ``id`` of the last event dispatched (kept across events, as WHATWG's "last event ID")."""
        self.retry: int | None = None
        """The last ``retry`` hint: milliseconds to wait before reconnecting."""

    def feed(self, chunk: bytes) -> list[str]:
        """Decode `chunk`; return the data of every event it completed (possibly none)."""
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            # A trailing lone \r may be the first half of \r\n: keep it for the next chunk.
            keep_cr = buffer.endswith(b"\r")
            if keep_cr:
                buffer = buffer[:-1]
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if keep_cr:
                buffer += b"\r"
        lines = buffer.split(b"\n")
        self._buffer = lines.pop()
        events: list[str] = []
        for raw in lines:
            self._line(raw, events)
        return events

    def flush(self) -> list[str]:
        """End of stream: dispatch a last event that lacked its closing blank line."""
        events: list[str] = []
        if self._buffer:
            self._line(self._buffer.rstrip(b"\r"), events)
            self._buffer = b""
        self._line(b"", events)
        return events

    def _line(self, raw: bytes, events: list[str]) -> None:
        if not raw:
            if self._id is not None:
                self.last_event_id = self._id
            if self._has_data:
                events.append("\n".join(self._data))
                self._data = []
                self._has_data = False
            return
        if raw.startswith(b":"):
            return
        field, sep, value = raw.partition(b":")
        if sep and value.startswith(b" "):
            value = value[1:]
        if field != b"data":
            if field == b"id" and b"\0" not in value:
                self._id = value.decode("utf-8", errors="replace")
            elif field == b"retry" and value.isdigit():
                self.retry = int(value)
            return
        self._data.append(value.decode("utf-8", errors="replace"))
        self._has_data = True
