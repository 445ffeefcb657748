"""Which trajectory an exchange belongs to: sessions, prefix matching and branches (sans-IO).

`TrajectoryBook` takes each recorded exchange (the request's messages, the model's reply,
its tokens) and files it:

* **Grouping.** With a session id (the ``X-Session-Id`` header), only that session's
  trajectories are candidates; without one, only trajectories recorded without one.
* **Continuing.** A request whose messages extend a trajectory's whole conversation (its
  messages and the reply recorded last) continues it: the new messages and the reply are
  appended.
* **Branching.** A request that shares a prefix with a trajectory's conversation, including
  at least one assistant turn, and then diverges (an edited turn, a resampled reply, a
  conversation picked up again from an earlier point) starts a new trajectory that stores only
  what follows the shared prefix. It names where the prefix lives in its metadata:
  ``metadata.parent`` (the id of the trajectory holding the shared turns) and
  ``metadata.branch_at`` (how many of the parent's conversation's messages it shares). The
  whole conversation is the parent's whole conversation cut at ``branch_at``, followed by the
  branch's own messages (`conversation` rebuilds it). Requests that share only a system
  prompt or a first user message are separate trajectories: nothing a model said is shared.
* **Ending.** A trajectory ends when it has been idle for a while, when the proxy stops, or
  on an explicit flush; `TrajectoryBook.ended` hands it out once, to be written. A request
  that continues an ended (already written) trajectory starts a branch at its end
  (``branch_at`` = its length), so a written line is never rewritten.

Messages are compared by what a trainer sees (role, text, tool calls, tool call id, name),
so that a client sending a reply back with fields added or dropped (``refusal: null``,
``content: null``) still continues its trajectory.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .record import Trajectory, TurnTokens

__all__ = ["TrajectoryBook", "conversation", "message_key"]


def _text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: the text parts, in order
        parts = [part.get("text") for part in content if isinstance(part, Mapping)]
        return "".join(part for part in parts if isinstance(part, str))
    return json.dumps(content, sort_keys=True, default=str)


def message_key(message: Mapping[str, Any]) -> bytes:
    """A digest of what a trainer sees of `message` (equal for the same turn sent back with other fields)."""
    calls = []
    listed = message.get("tool_calls")
    for call in listed if isinstance(listed, list) else ():
        if isinstance(call, Mapping):
            function = call.get("function")
            named = function if isinstance(function, Mapping) else {}
            calls.append([call.get("id"), named.get("name"), named.get("arguments")])
    seen = [
        message.get("role"),
        _text(message.get("content")),
        calls,
        message.get("tool_call_id"),
        message.get("name"),
    ]
    return hashlib.blake2b(json.dumps(seen, sort_keys=True, default=str).encode(), digest_size=16).digest()


@dataclass
class _Node:
    """One trajectory the book knows: its own messages, where it branched from, whether it was written."""

    id: str
    scope: str  # tenant and session: only trajectories of one scope are matched together
    messages: list[dict[str, Any]]
    keys: list[bytes]  # the WHOLE conversation's message keys (the parent's prefix included)
    parent: str | None = None
    branch_at: int = 0
    tools: list[dict[str, Any]] = field(default_factory=list)
    tokens: list[TurnTokens] = field(default_factory=list)
    model: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    used: float = 0.0
    written: bool = False

    def trajectory(self) -> Trajectory:
        metadata = dict(self.metadata)
        if self.parent is not None:
            metadata.update(parent=self.parent, branch_at=self.branch_at)
        return Trajectory(
            id=self.id,
            messages=self.messages,
            tools=self.tools,
            tokens=self.tokens,
            source="proxy",
            model=self.model,
            metadata=metadata,
        )


def _common(a: Sequence[bytes], b: Sequence[bytes]) -> int:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))


class TrajectoryBook:
    """The trajectories a recording proxy is building (see the module docstring).

    Args:
        idle_s: A trajectory unused this long has ended (`ended` hands it out).
        remember: Trajectories kept for matching after they were written (the oldest are forgotten).
        clock: Seconds, monotonic (a test's own clock).
    """

    def __init__(self, idle_s: float = 300.0, remember: int = 10_000, clock: Callable[[], float] = time.monotonic):
        self.idle_s = idle_s
        self.remember = remember
        self.clock = clock
        self._nodes: OrderedDict[str, _Node] = OrderedDict()
        # Every trajectory a request can continue or branch from shares its first two messages
        # (a reply and the request before it, at least): only those of one bucket are compared.
        self._buckets: dict[tuple[str, bytes, bytes], list[str]] = {}
        self._serial = itertools.count(1)
        self._prefix = uuid.uuid4().hex[:8]
        self.changes = 0
        """How many exchanges were filed (a checkpoint of the open trajectories is stale when it grew)."""

    def __len__(self) -> int:
        return len(self._nodes)

    def __repr__(self) -> str:
        open_count = sum(not node.written for node in self._nodes.values())
        return f"TrajectoryBook(open={open_count}, known={len(self._nodes)})"

    def record(
        self,
        messages: Sequence[Mapping[str, Any]],
        reply: Mapping[str, Any],
        *,
        tokens: TurnTokens | None = None,
        tools: Iterable[Mapping[str, Any]] = (),
        model: str | None = None,
        session: str | None = None,
        tenant: str = "",
    ) -> str:
        """File one exchange; the id of the trajectory it went to.

        Args:
            messages: The request's messages (OpenAI chat messages).
            reply: The assistant message the model answered with.
            tokens: The reply's exact tokens (its ``message`` index is set here), if known.
            tools: The tools the request offered.
            model: The model the request named.
            session: The client's session id, if it sent one.
            tenant: The token's tenant (trajectories of different tenants never match).
        """
        request = [dict(message) for message in messages]
        keys = [message_key(message) for message in request]
        whole = [*request, dict(reply)]
        scope = f"{tenant}\x00{session}" if session is not None else f"{tenant}\x00"
        node, shared = self._best(scope, keys)
        now = self.clock()
        if node is not None and shared == len(node.keys) and not node.written:  # continues it
            added = whole[len(node.keys) :]
            node.messages.extend(added)
            node.keys.extend(message_key(message) for message in added)
            self._add_tokens(node, tokens, len(node.messages) - 1)
            node.used = now
            self.changes += 1
            node.tools = [dict(tool) for tool in tools] or node.tools
            self._nodes.move_to_end(node.id)
            return node.id
        parent, branch_at = None, 0
        if node is not None and any(m.get("role") == "assistant" for m in whole[:shared]):
            while node.parent is not None and node.branch_at >= shared:  # up to the one holding the shared turns
                above = self._nodes.get(node.parent)
                if above is None:  # forgotten: this one's conversation holds the same prefix
                    break
                node = above
            parent, branch_at = node.id, shared
        metadata: dict[str, Any] = {}
        if session is not None:
            metadata["session"] = session
        child = _Node(
            id=f"{self._prefix}-{next(self._serial)}",
            scope=scope,
            messages=whole[branch_at:],
            keys=[*keys, message_key(reply)],
            parent=parent,
            branch_at=branch_at,
            tools=[dict(tool) for tool in tools],
            model=model,
            metadata=metadata,
            used=now,
        )
        self._add_tokens(child, tokens, len(child.messages) - 1)
        self._nodes[child.id] = child
        self.changes += 1
        self._buckets.setdefault(self._bucket(child), []).append(child.id)
        self._forget()
        return child.id

    @staticmethod
    def _bucket(node: _Node) -> tuple[str, bytes, bytes]:
        return node.scope, node.keys[0], node.keys[1] if len(node.keys) > 1 else b""

    @staticmethod
    def _add_tokens(node: _Node, tokens: TurnTokens | None, index: int) -> None:
        if tokens is not None:
            node.tokens.append(tokens.model_copy(update={"message": index}))

    def _best(self, scope: str, keys: Sequence[bytes]) -> tuple[_Node | None, int]:
        """The trajectory of `scope` sharing the longest prefix with `keys` (a whole one first), and its length."""
        best: _Node | None = None
        best_shared = 0
        best_whole = False
        if len(keys) < 2:
            return None, 0
        for node_id in reversed(self._buckets.get((scope, keys[0], keys[1]), ())):  # the most recent first
            node = self._nodes[node_id]
            shared = _common(keys, node.keys)
            whole = shared == len(node.keys)
            if (whole, shared) > (best_whole, best_shared):
                best, best_shared, best_whole = node, shared, whole
        return best, best_shared

    def open(self) -> list[Trajectory]:
        """The trajectories not handed out by `ended` yet, as they stand (for a checkpoint)."""
        return [node.trajectory() for node in self._nodes.values() if not node.written]

    def ended(self, *, all_open: bool = False) -> list[Trajectory]:
        """The trajectories that ended since the last call (idle for `idle_s`, or every open one), each once."""
        now = self.clock()
        done = []
        for node in self._nodes.values():
            if not node.written and (all_open or now - node.used >= self.idle_s):
                node.written = True
                done.append(node.trajectory())
        self._forget()
        return done

    def _forget(self) -> None:
        """Forget the oldest written trajectories beyond `remember` (open ones are kept)."""
        excess = len(self._nodes) - self.remember
        if excess <= 0:
            return
        for node_id in [node.id for node in self._nodes.values() if node.written][:excess]:
            node = self._nodes.pop(node_id)
            bucket = self._buckets[self._bucket(node)]
            bucket.remove(node_id)
            if not bucket:
                del self._buckets[self._bucket(node)]


def conversation(trajectory: Trajectory, by_id: Mapping[str, Trajectory]) -> list[dict[str, Any]]:
    """The whole conversation of `trajectory`: its parent's cut at ``branch_at``, then its own messages.

    Args:
        trajectory: A trajectory, a branch (``metadata.parent``) or not.
        by_id: The trajectories of its file, by id (`read_trajectories`).

    Raises:
        KeyError: A parent that is not in `by_id`.
        ValueError: A parent chain that loops.
    """
    parts: list[list[dict[str, Any]]] = []
    seen: set[str] = set()
    current = trajectory
    cut: int | None = None  # how much of `current`'s whole conversation is used
    while True:
        if current.id in seen:
            raise ValueError(f"trajectory {current.id} is its own ancestor")
        seen.add(current.id)
        start = _start(current)
        parts.append(current.messages if cut is None else current.messages[: max(0, cut - start)])
        parent = current.metadata.get("parent")
        if parent is None:
            break
        cut = start if cut is None else min(cut, start)
        current = by_id[str(parent)]
    return [message for part in reversed(parts) for message in part]


def _start(trajectory: Trajectory) -> int:
    """Where a trajectory's own messages start in its whole conversation."""
    return int(trajectory.metadata.get("branch_at", 0)) if trajectory.metadata.get("parent") is not None else 0
