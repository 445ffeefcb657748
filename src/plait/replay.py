"""Record a run of an agent tree, then replay it offline: same answers, no model, no tool side effects.

```python
from plait.replay import record, replay

with record(agent, "run.jsonl"):          # every model reply and tool result is logged
    agent("What is 37 * 91?", session_id="s1")

with replay(agent, "run.jsonl"):          # served from the log: no model runs, no tool runs
    agent("What is 37 * 91?", session_id="s1")    # the same reply, token for token
```

While the context is open, an interceptor (`plait.interceptors`) sits on every agent of the
tree: each `ModelCall` is sent to a stand-in of its model that records or replays, each
`ActionCall` (a tool API called by any executor of any paradigm) is recorded, or answered
from the log without running the tool. Nothing of the tree is modified. Model calls are
matched by their request (method, messages, generation parameters, tools), tool calls by
tool, API, arguments and session, so concurrent sessions and parallel tool calls replay
correctly whatever order they run in. A request the log does not hold raises
`ReplayMismatchError` naming the call: the run diverged from the recording, which makes a
recorded run a regression test for prompts, parsers and agent logic.

The log is JSON lines, written as the run goes (a crash keeps what happened before it).
Streaming calls are recorded chunk by chunk and replayed the same way.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import inspect
import json
import os
import threading
from collections.abc import AsyncIterator, Hashable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from .actions.builtin_actions import FinishAction, InvalidAction, NoAction
from .effects import ActionCall, Effect, Flow, ModelCall
from .exceptions import ReplayMismatchError, UserError
from .interceptors import Interceptor, intercept
from .llms.response import ModelResponse, ToolCall, ToolCallsSoFar, Usage
from .schema import ActionReturn, AgentStatusCode, ModelStatusCode, Reasoning
from .utils._aio import closing_stream
from .utils._json import json_default

__all__ = ["LOG_FORMAT", "LOG_VERSION", "RunLog", "record", "replay"]

R = TypeVar("R")
_BUILTIN_ACTIONS = (NoAction, FinishAction, InvalidAction)

LOG_FORMAT = "plait-run-log"
LOG_VERSION = 1
_LLM_METHODS = ("chat", "complete", "stream_chat")


# -- encoding ------------------------------------------------------------------------------


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=json_default)


def _key_default(value: object) -> object:
    try:
        return json_default(value)
    except TypeError:
        return f"<{type(value).__name__}>"  # stable across runs, unlike a repr with an address


def _key(*parts: object) -> str:
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=_key_default)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _status(value: int) -> int:
    for enum in (ModelStatusCode, AgentStatusCode):
        try:
            return enum(value)
        except ValueError:
            continue
    return value


def _encode_reply(value: object) -> object:
    """A model reply (text, `ModelResponse`, a stream item's extra, nested in dicts/lists) as JSON."""
    if isinstance(value, ModelResponse):
        return {"__model_response__": json.loads(_canonical(value))}
    if isinstance(value, Reasoning):  # a stream item's reasoning so far
        return {"__reasoning__": value.to_wire()}
    if isinstance(value, ToolCallsSoFar):  # a stream item's tool calls (and reasoning) so far
        calls = [[call.id, call.name, call.arguments] for call in value.tool_calls]
        return {"__tool_calls_so_far__": calls, "reasoning": _encode_reply(value.reasoning)}
    if isinstance(value, Mapping):
        return {str(k): _encode_reply(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode_reply(v) for v in value]
    return json.loads(_canonical(value))


def _decode_reply(value: object) -> object:
    if isinstance(value, Mapping):
        if "__model_response__" in value:
            data = dict(value["__model_response__"])
            calls = [ToolCall(**call) for call in data.get("tool_calls") or []]
            usage = Usage(**data["usage"]) if data.get("usage") else None
            reasoning = Reasoning.from_wire(data.get("reasoning"))
            return ModelResponse(
                data.get("content", ""), calls, data.get("finish_reason"), usage, data.get("raw"), reasoning
            )
        if "__reasoning__" in value:
            return Reasoning.from_wire(value["__reasoning__"])
        if "__tool_calls_so_far__" in value:
            so_far = tuple(ToolCall(*call) for call in value["__tool_calls_so_far__"])
            thinking = _decode_reply(value.get("reasoning"))
            return ToolCallsSoFar(so_far, thinking if isinstance(thinking, Reasoning) else None)
        return {k: _decode_reply(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode_reply(v) for v in value]
    return value


# -- the log ---------------------------------------------------------------------------------


class RunLog:
    """The entries of a recorded run, looked up by request key.

    Args:
        path: The JSON-lines file (`record` writes it; `replay` reads it).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._entries: dict[str, collections.deque[dict[str, Any]]] = collections.defaultdict(collections.deque)
        self._file: Any = None

    # writing
    def open_for_writing(self) -> None:
        """Start a new log file (replacing an old one)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w", encoding="utf-8")
        self._write({"format": LOG_FORMAT, "version": LOG_VERSION})

    def _write(self, entry: Mapping[str, Any]) -> None:
        with self._lock:
            self._file.write(_canonical(entry) + "\n")
            self._file.flush()

    def add(self, entry: dict[str, Any]) -> None:
        """Append one entry (``kind``, ``key``, what was asked, what came back)."""
        self._write(entry)

    def close(self) -> None:
        """Close the file being written."""
        if self._file is not None:
            self._file.close()
            self._file = None

    # reading
    def load(self) -> RunLog:
        """Read the file; returns self."""
        try:
            lines = self.path.read_text("utf-8").splitlines()
        except FileNotFoundError:
            raise UserError(f"no run log at {self.path}") from None
        header = json.loads(lines[0]) if lines else {}
        if header.get("format") != LOG_FORMAT or header.get("version") != LOG_VERSION:
            raise UserError(f"{self.path} is not a plait run log (version {LOG_VERSION})")
        for line in lines[1:]:
            if line.strip():
                entry = json.loads(line)
                self._entries[entry["key"]].append(entry)
        return self

    def take(self, key: str, describe: str) -> dict[str, Any]:
        """The next unused entry recorded for `key`.

        Raises:
            ReplayMismatchError: The log holds no (more) entry for this request.
        """
        with self._lock:
            entries = self._entries.get(key)
            if entries:
                return entries.popleft()
        raise ReplayMismatchError(f"the run diverged from the recording in {self.path}: {describe} was not recorded")

    def holds(self, key: str) -> bool:
        """Whether an unused entry is recorded for `key`."""
        with self._lock:
            return bool(self._entries.get(key))

    def unused(self) -> int:
        """How many recorded entries were not replayed."""
        with self._lock:
            return sum(len(entries) for entries in self._entries.values())


# -- model stand-ins -------------------------------------------------------------------------


def _request(method: str, inputs: object, kwargs: Mapping[str, object]) -> tuple[str, str]:
    params = {k: v for k, v in kwargs.items() if k != "session_ids"}
    last = inputs[-1] if isinstance(inputs, list) and inputs else inputs
    text = last.get("content") if isinstance(last, Mapping) else last
    return _key("llm", method, inputs, params), f"the model call {method}() whose last message is {str(text)[:160]!r}"


class _StandIn:
    """Looks like the object it replaces (attributes pass through); its calls are recorded or replayed."""

    def __init__(self, inner: Any, log: RunLog, recording: bool) -> None:
        self._inner = inner
        self._log = log
        self._recording = recording

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


class _ModelStandIn(_StandIn):
    """Stands in for a model."""

    def _reply(self, method: str, inputs: object, kwargs: Mapping[str, object], reply: object = None) -> object:
        key, describe = _request(method, inputs, kwargs)
        if self._recording:
            self._log.add({"kind": "llm", "key": key, "method": method, "reply": _encode_reply(reply)})
            return reply
        if method == "complete":  # a log written when agents asked such models with ``chat``: its text
            chat_key = _request("chat", inputs, kwargs)[0]
            if not self._log.holds(key) and self._log.holds(chat_key):
                text = _decode_reply(self._log.take(chat_key, describe)["reply"])
                return text if isinstance(text, ModelResponse) else ModelResponse(str(text))
        return _decode_reply(self._log.take(key, describe)["reply"])

    def _items(self, key: str, describe: str) -> list[tuple[int, str, object]]:
        entry = self._log.take(key, describe)
        return [(_status(status), text, _decode_reply(extra)) for status, text, extra in entry["items"]]

    def _record_items(self, key: str, items: list[tuple[int, str, object]]) -> None:
        encoded = [[int(status), text, _encode_reply(extra)] for status, text, extra in items]
        self._log.add({"kind": "llm", "key": key, "method": "stream_chat", "items": encoded})


class _SyncModel(_ModelStandIn):
    def chat(self, inputs: object, **kwargs: object) -> object:
        return self._reply("chat", inputs, kwargs, self._inner.chat(inputs, **kwargs) if self._recording else None)

    def complete(self, inputs: object, **kwargs: object) -> object:
        live = self._inner.complete(inputs, **kwargs) if self._recording else None
        return self._reply("complete", inputs, kwargs, live)

    def stream_chat(self, inputs: object, **kwargs: object) -> Iterator[object]:
        key, describe = _request("stream_chat", inputs, kwargs)
        if not self._recording:
            yield from self._items(key, describe)
            return
        items = []
        for item in self._inner.stream_chat(inputs, **kwargs):
            items.append(item)
            yield item
        self._record_items(key, items)


class _AsyncModel(_ModelStandIn):
    async def chat(self, inputs: Any, session_ids: object = None, **kwargs: object) -> object:
        live = await self._inner.chat(inputs, session_ids=session_ids, **kwargs) if self._recording else None
        return self._reply("chat", inputs, kwargs, live)

    async def complete(self, inputs: Any, session_ids: object = None, **kwargs: object) -> object:
        live = await self._inner.complete(inputs, session_ids=session_ids, **kwargs) if self._recording else None
        return self._reply("complete", inputs, kwargs, live)

    async def stream_chat(self, inputs: Any, session_ids: object = None, **kwargs: object) -> AsyncIterator[object]:
        key, describe = _request("stream_chat", inputs, kwargs)
        if not self._recording:
            for item in self._items(key, describe):
                yield item
            return
        items = []
        async with closing_stream(self._inner.stream_chat(inputs, session_ids=session_ids, **kwargs)) as stream:
            async for item in stream:
                items.append(item)
                yield item
        self._record_items(key, items)


# -- the interceptor -------------------------------------------------------------------------


def _tool_key(action: Any, inputs: object, name: str, session_id: Hashable | None) -> tuple[str, str]:
    key = _key("tool", action.name, name, inputs, session_id)
    return key, f"tool call {action.name}.{name}({_canonical(inputs)[:200]}) in session {session_id!r}"


def _is_async_model(llm: object) -> bool:
    return any(inspect.iscoroutinefunction(getattr(llm, m, None)) for m in ("chat", "complete"))


class _RunLogInterceptor(Interceptor):
    """Records model replies and tool results into a `RunLog`, or serves them from it."""

    effects = (ModelCall, ActionCall)

    def __init__(self, log: RunLog, recording: bool) -> None:
        self.log = log
        self.recording = recording
        self._models: dict[int, _ModelStandIn] = {}
        self._lock = threading.Lock()

    def _stand_in(self, llm: object) -> _ModelStandIn:
        with self._lock:
            stand_in = self._models.get(id(llm))
            if stand_in is None or stand_in._inner is not llm:
                stand_in = (_AsyncModel if _is_async_model(llm) else _SyncModel)(llm, self.log, self.recording)
                self._models[id(llm)] = stand_in
            return stand_in

    def around(self, effect: Effect[R]) -> Flow[R]:
        """Send model calls to a recording/replaying stand-in; record or replay tool calls."""
        if isinstance(effect, ModelCall):
            result: R = yield effect.replace(llm=self._stand_in(effect.llm))
            return result
        performed: R
        if not isinstance(effect, ActionCall) or isinstance(effect.action, _BUILTIN_ACTIONS):
            performed = yield effect  # built-in actions answer the model's mistakes: always live
            return performed
        action = effect.action
        key, describe = _tool_key(action, effect.inputs, effect.api, effect.session_id)
        if not self.recording:
            return cast(R, ActionReturn.from_dict(self.log.take(key, describe)["result"]))
        returned: R = yield effect
        self.log.add({"kind": "tool", "key": key, "tool": action.name, "api": effect.api, "result": returned})
        return returned


@contextlib.contextmanager
def record(agent: Any, path: str | os.PathLike[str]) -> Iterator[RunLog]:
    """Log every model reply and tool result of `agent`'s tree to `path` while the block runs."""
    log = RunLog(path)
    log.open_for_writing()
    try:
        with intercept(agent, _RunLogInterceptor(log, recording=True)):
            yield log
    finally:
        log.close()


@contextlib.contextmanager
def replay(agent: Any, path: str | os.PathLike[str]) -> Iterator[RunLog]:
    """Serve `agent`'s model replies and tool results from the log at `path` while the block runs.

    Raises:
        ReplayMismatchError: (inside the block) a call that was not recorded.
    """
    log = RunLog(path).load()
    with intercept(agent, _RunLogInterceptor(log, recording=False)):
        yield log
