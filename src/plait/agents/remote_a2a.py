"""A remote A2A 1.0 agent as a plait agent: `RemoteA2AAgent` (sync) and `AsyncRemoteA2AAgent`.

```python
remote = AsyncRemoteA2AAgent("http://127.0.0.1:9999", name="Weather")
reply = await remote("Weather in Rome?", session_id="u1")   # an AgentMessage, as from a local agent
pipeline = AsyncSequential(planner, remote)                  # a layer like any other
```

The remote agent is this agent's model: each turn sends the session's new user text (what
came after the last reply) as one A2A message, through the official ``a2a-sdk`` client
(``pip install 'plait[a2a]'``), and the remote's answer (its task's artifacts, else its
last message) is the reply. So everything an agent has holds: hooks, memory and
``state_dict``, `plait.replay` (a recorded run replays without the remote), `Sequential`
and other containers, and serving it or offering it as a tool.

Each session is one A2A context: the first turn starts one (the remote keeps the
conversation), later turns continue it; resetting the session starts a new one. The
context and a task waiting for input are the agent's extra state (in ``state_dict``). When
the remote asks for input (``TASK_STATE_INPUT_REQUIRED``: an approval, a question), its
question is the reply, and the session's next message answers that task. A failed, rejected
or canceled task, an unreachable remote or an A2A error raise `RemoteAgentError`.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Hashable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

from ..exceptions import RemoteAgentError, UserError
from ..llms.base_llm import AsyncBaseLLM, BaseLLM, ChatInput, LLMCore, StreamItem
from ..schema import ModelStatusCode
from ..types import SessionIds
from ..utils._aio import LoopThread
from .agent import _DEFAULT_MEMORY, Agent, AsyncAgent

__all__ = ["A2AModel", "AsyncA2AModel", "AsyncRemoteA2AAgent", "RemoteA2AAgent"]

_TERMINAL_FAILURES = ("TASK_STATE_FAILED", "TASK_STATE_REJECTED", "TASK_STATE_CANCELED", "TASK_STATE_AUTH_REQUIRED")
_POLL_S = 0.2


def _sdk() -> Any:
    try:
        import a2a.client
    except ImportError as exc:  # pragma: no cover - the test extra installs it
        raise UserError("RemoteA2AAgent needs the official A2A SDK: pip install 'plait[a2a]'") from exc
    return a2a.client


def _new_text(messages: ChatInput) -> str:
    """What the remote has not seen: the user (and system) text after the last assistant reply."""
    if isinstance(messages, str):
        return messages
    text: list[str] = []
    for message in messages:
        if message.get("role") == "assistant":
            text.clear()
        elif message.get("content"):
            text.append(str(message["content"]))
    return "\n".join(text)


def _starts(messages: ChatInput) -> bool:
    """Whether `messages` open a conversation (no reply yet): a new A2A context."""
    return isinstance(messages, str) or not any(m.get("role") == "assistant" for m in messages)


def _parts_text(parts: Sequence[Any]) -> str:
    from a2a.helpers.proto_helpers import get_data_parts

    texts = []
    for part in parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            texts.append(json.dumps(get_data_parts([part])[0], ensure_ascii=False))
        elif kind == "url":
            texts.append(part.url)
    return "\n".join(texts)


class _A2ACore(LLMCore):
    """The A2A exchange shared by `A2AModel` and `AsyncA2AModel` (one body for both modes).

    Args:
        url: The remote agent's base URL (its card is at ``/.well-known/agent-card.json``).
        token: A bearer token the remote needs (sent as ``Authorization``; never in a repr).
        timeout: Seconds one exchange may take (a remote still working then: `RemoteAgentError`).
    """

    native_response_format = True  # the remote decides its own output format

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 300.0) -> None:
        super().__init__(path=url)
        _sdk()  # missing: a clear error now, not at the first turn
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise UserError(f"url must be an http(s) URL of an A2A agent, got {url!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._token = token
        self._card: Any = None
        self.conversations: dict[Hashable, dict[str, str]] = {}
        """Per session: ``{"context_id": ..., "task_id": ...}`` (a task waiting for input)."""

    async def _exchange(self, messages: ChatInput, session: Hashable) -> str:
        from a2a.types.a2a_pb2 import Message, Part, Role

        state = self.conversations.get(session) if not _starts(messages) else None
        state = dict(state or {"context_id": uuid.uuid4().hex})
        message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=_new_text(messages))])
        message.context_id = state["context_id"]
        if state.get("task_id"):
            message.task_id = state.pop("task_id")
        try:
            answer = await asyncio.wait_for(self._send(message), self.timeout)
        except RemoteAgentError:
            raise
        except (Exception, asyncio.TimeoutError) as exc:  # the SDK's errors, the network's, a timeout
            raise RemoteAgentError(f"the A2A agent at {self.url} failed: {type(exc).__name__}: {exc}") from exc
        if answer.HasField("message"):
            self.conversations[session] = state
            return _parts_text(answer.message.parts)
        return self._answer(answer.task, state, session)

    async def _send(self, message: Any) -> Any:
        """The remote's answer to `message`: a `StreamResponse` holding a message or a task that stopped working."""
        import httpx
        from a2a.types.a2a_pb2 import GetTaskRequest, SendMessageRequest, TaskState

        sdk = _sdk()
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        async with httpx.AsyncClient(headers=headers, timeout=self.timeout) as http:
            if self._card is None:
                self._card = await sdk.A2ACardResolver(http, self.url).get_agent_card()
            client = sdk.ClientFactory(sdk.ClientConfig(streaming=False, httpx_client=http)).create(self._card)
            events = [event async for event in client.send_message(SendMessageRequest(message=message))]
            if not events:
                raise RemoteAgentError(f"the A2A agent at {self.url} sent no answer")
            event = events[-1]
            busy = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
            while event.HasField("task") and event.task.status.state in busy:  # answered before it finished
                await asyncio.sleep(_POLL_S)
                event.task.CopyFrom(await client.get_task(GetTaskRequest(id=event.task.id)))
            return event

    def _answer(self, task: Any, state: dict[str, str], session: Hashable) -> str:
        from a2a.types.a2a_pb2 import Role, TaskState

        name = TaskState.Name(task.status.state)
        state["context_id"] = task.context_id or state["context_id"]
        self.conversations[session] = state
        if name in _TERMINAL_FAILURES:
            why = _parts_text(task.status.message.parts) if task.HasField("status") else ""
            raise RemoteAgentError(f"the A2A agent at {self.url} ended the task {name}: {why}".rstrip(": "))
        if name == "TASK_STATE_INPUT_REQUIRED":
            state["task_id"] = task.id  # the session's next message answers it
            return _parts_text(task.status.message.parts)
        answer = "\n".join(_parts_text(artifact.parts) for artifact in task.artifacts)
        if not answer:  # no artifact: the agent's last message
            agents = [m for m in task.history if m.role == Role.ROLE_AGENT] or [task.status.message]
            answer = _parts_text(agents[-1].parts)
        return answer

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r})"


class A2AModel(_A2ACore, BaseLLM):
    """A remote A2A agent as a sync model (its exchanges run on a private loop thread)."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 300.0) -> None:
        super().__init__(url, token=token, timeout=timeout)
        self._io = LoopThread(name="plait-a2a")

    def chat(self, inputs: ChatInput, session_ids: SessionIds = None, **gen_params: object) -> str:
        """Send the conversation's new text to the remote agent; its answer."""
        return self._io.run(self._exchange(inputs, session_ids if session_ids is not None else 0))

    def stream_chat(self, inputs: ChatInput, session_ids: SessionIds = None, **gen_params: Any) -> Iterator[StreamItem]:
        """`chat`'s answer as one `END` item."""
        yield ModelStatusCode.END, self.chat(inputs, session_ids, **gen_params), None


class AsyncA2AModel(_A2ACore, AsyncBaseLLM):
    """A remote A2A agent as an async model."""

    async def chat(self, inputs: ChatInput, session_ids: SessionIds = None, **gen_params: object) -> str:
        """Send the conversation's new text to the remote agent; its answer."""
        return await self._exchange(inputs, session_ids if session_ids is not None else 0)

    async def stream_chat(
        self, inputs: ChatInput, session_ids: SessionIds = None, **gen_params: Any
    ) -> AsyncIterator[StreamItem]:
        """`chat`'s answer as one `END` item."""
        yield ModelStatusCode.END, await self.chat(inputs, session_ids, **gen_params), None


class _RemoteState:
    """The A2A conversation of each session as the agent's extra state (in ``state_dict``)."""

    llm: _A2ACore

    def get_extra_state(self, session_id: Hashable = 0) -> Any:
        """``{"context_id": ..., "task_id": ...}`` of the session's A2A conversation (None: none yet)."""
        state = self.llm.conversations.get(session_id)
        return dict(state) if state else None

    def set_extra_state(self, state: Any, session_id: Hashable = 0) -> None:
        """Continue the A2A conversation `get_extra_state` returned."""
        if isinstance(state, Mapping) and isinstance(state.get("context_id"), str):
            self.llm.conversations[session_id] = {k: str(v) for k, v in state.items() if k in ("context_id", "task_id")}

    def reset(self, session_id: Hashable = 0, keypath: str | None = None, recursive: bool = False) -> None:
        """Forget a session (its next turn starts a new A2A context)."""
        self.llm.conversations.pop(session_id, None)
        super().reset(session_id, keypath, recursive)  # type: ignore[misc]  # the agent class's

    def evict(self, session_id: Hashable = 0) -> bool:
        """Drop a session from this process (with its A2A conversation)."""
        dropped: bool = super().evict(session_id)  # type: ignore[misc]  # the agent class's
        if dropped:
            self.llm.conversations.pop(session_id, None)
        return dropped


class _RemoteAgent(_RemoteState):
    """The one constructor of `RemoteA2AAgent` and `AsyncRemoteA2AAgent` (their model class differs)."""

    _model: ClassVar[type[A2AModel] | type[AsyncA2AModel]]

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = 300.0,
        name: str | None = None,
        description: str | None = None,
        memory: Any = _DEFAULT_MEMORY,
        hooks: list[Any] | None = None,
    ) -> None:
        llm = self._model(url, token=token, timeout=timeout)
        super().__init__(  # type: ignore[call-arg]  # the agent class that follows this mixin
            llm, name=name or type(self).__name__, description=description, memory=memory, hooks=hooks
        )


class RemoteA2AAgent(_RemoteAgent, Agent):
    """A remote A2A agent as a sync plait agent (see the module's docs).

    Args:
        url: The remote agent's base URL.
        token: A bearer token the remote needs.
        timeout: Seconds one turn may take.
        name: The agent's name (default ``'RemoteA2AAgent'``).
        description: What it does (shown where it is a tool).
        memory: The session memory (None: none, and every turn a new A2A context).
        hooks: Agent hooks.
    """

    _model = A2AModel


class AsyncRemoteA2AAgent(_RemoteAgent, AsyncAgent):
    """A remote A2A agent as an async plait agent (the arguments of `RemoteA2AAgent`)."""

    _model = AsyncA2AModel
