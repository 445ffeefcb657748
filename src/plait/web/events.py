"""The chat pane's model: the events an answer produces, and the transcript entries they build.

An answer is the agent's typed stream events (`plait.events`: `TextDelta`, `ReasoningDelta`,
`ToolCallStarted`, `ToolResult`, `ApprovalNeeded`, `Final`), plus two of the page's own:
`Notice` (a warning worth showing) and `Failed` (the answer stopped on an error).
`apply_event` folds them into a `ChatEntry`, a list of blocks (`TextBlock`, `ThinkingBlock`,
`ToolBlock`, `NoticeBlock`, `ApprovalBlock`) that the page renders. `InternLM2Reader` turns
the snapshots of `Internlm2Agent.stream_chat` (an API of its own) into the same events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Union

from ..agents.aggregator.default_aggregator import content_to_text
from ..events import (
    ApprovalNeeded,
    Final,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallStarted,
    ToolResult,
    tool_result_event,
)
from ..schema import ActionReturn, AgentMessage, AgentStatusCode, PendingCall
from .settings import INTERPRETER_TOOL

if TYPE_CHECKING:
    from ..agents.internlm2_agent import AgentReturn

__all__ = [
    "ApprovalBlock",
    "ChatEntry",
    "Event",
    "Failed",
    "InternLM2Reader",
    "Notice",
    "NoticeBlock",
    "TextBlock",
    "ThinkingBlock",
    "ToolBlock",
    "apply_event",
]


@dataclass(frozen=True)
class _Message:
    """A message for the user, shown as a `NoticeBlock` of the event's `level`."""

    message: str
    level: ClassVar[str] = "warning"


class Notice(_Message):
    """Something the user should know that does not end the answer."""


class Failed(_Message):
    """The answer stopped on an error."""

    level: ClassVar[str] = "error"


Event = Union[StreamEvent, Notice, Failed]


@dataclass
class TextBlock:
    """Text written by the user or the model (markdown)."""

    text: str


@dataclass
class ThinkingBlock:
    """The model's reasoning (shown collapsed under "Thinking"; it streams while the model thinks)."""

    text: str


@dataclass
class ToolBlock:
    """One tool call and, once it is back, its result."""

    name: str
    arguments: object
    kind: str = "plugin"
    items: list[Mapping[str, object]] | None = None
    error: str | None = None
    id: str = ""

    @property
    def done(self) -> bool:
        """Whether the result is back."""
        return self.items is not None or self.error is not None


@dataclass
class NoticeBlock:
    """A warning (``level='warning'``) or an error (``level='error'``)."""

    message: str
    level: str = "warning"


@dataclass
class ApprovalBlock:
    """Tool calls waiting for the user, and what was decided so far.

    A decision is True (run it) or False (refuse it); for a call that asks a question
    (`PendingCall.question`), the answer: ``{'action': 'accept', 'content': {...}}``,
    ``'decline'`` or ``'cancel'``.
    """

    calls: list[PendingCall]
    decisions: dict[str, object] = field(default_factory=dict)

    @property
    def waiting(self) -> list[PendingCall]:
        """The calls not decided yet."""
        return [call for call in self.calls if call.id not in self.decisions]


Block = Union[TextBlock, ThinkingBlock, ToolBlock, NoticeBlock, ApprovalBlock]


@dataclass
class ChatEntry:
    """One message of the transcript: the user's, or an answer being built from events.

    Attributes:
        role: ``'user'`` or ``'assistant'``.
        blocks: What is shown, in order.
        files: Names of the files uploaded with a user message.
        done: Whether the answer is complete (always True for user messages).
        version: Bumped on every change, so a view can tell which entries changed.
    """

    role: str
    blocks: list[Block] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    done: bool = False
    version: int = 0


def tool_kind(name: str) -> str:
    """``'interpreter'`` for the code interpreter, else ``'plugin'``."""
    return "interpreter" if name == INTERPRETER_TOOL else "plugin"


def _pending_tool(entry: ChatEntry, event: ToolResult) -> ToolBlock | None:
    """The running tool block a result belongs to: by call id, else by name, else the first running one."""
    pending = [b for b in entry.blocks if isinstance(b, ToolBlock) and not b.done]
    for block in pending:
        if event.id and block.id == event.id:
            return block
    for block in pending:
        if block.name == event.name:
            return block
    return pending[0] if pending else None


def _set_thought(entry: ChatEntry, block: ToolBlock, thought: str) -> None:
    index = next(i for i, b in enumerate(entry.blocks) if b is block)
    before = entry.blocks[index - 1] if index else None
    if isinstance(before, TextBlock):
        before.text = thought
    else:
        entry.blocks.insert(index, TextBlock(thought))


def _result(entry: ChatEntry, event: ToolResult) -> None:
    block = _pending_tool(entry, event)
    if block is None:
        block = ToolBlock(event.name, None, tool_kind(event.name), id=event.id)
        entry.blocks.append(block)
    action = event.result
    if event.status == "ok":
        items: list[Mapping[str, object]] = [dict(item) for item in action.result or ()] if action else []
        block.items = items or [{"type": "text", "content": event.output}]
    else:
        block.items, block.error = [], event.output
    if action is not None and action.thought:
        _set_thought(entry, block, action.thought)


def apply_event(entry: ChatEntry, event: Event) -> None:
    """Fold one event into an answer entry (see the module docstring)."""
    last = entry.blocks[-1] if entry.blocks else None
    if isinstance(event, TextDelta):
        if isinstance(last, TextBlock):
            last.text = event.text
        elif event.text:
            entry.blocks.append(TextBlock(event.text))
    elif isinstance(event, ReasoningDelta):
        if isinstance(last, ThinkingBlock):
            last.text = event.text
        elif event.text:
            entry.blocks.append(ThinkingBlock(event.text))
    elif isinstance(event, ToolCallStarted):
        entry.blocks.append(ToolBlock(event.name, event.arguments, tool_kind(event.name), id=event.id))
    elif isinstance(event, ToolResult):
        _result(entry, event)
    elif isinstance(event, (Notice, Failed)):
        entry.blocks.append(NoticeBlock(event.message, level=event.level))
        entry.done = entry.done or isinstance(event, Failed)
    elif isinstance(event, ApprovalNeeded):
        entry.blocks.append(ApprovalBlock(list(event.calls)))
    elif isinstance(event, Final):
        answer = "" if event.paused else content_to_text(event.message.content)
        texts = [block for block in entry.blocks if isinstance(block, TextBlock)]
        if answer and texts and texts[-1] is last:
            last.text = answer  # the parsed answer (a ReAct reply streamed with its Thought: lines)
        elif answer and not (texts and texts[-1].text == answer):
            entry.blocks.append(TextBlock(answer))
        entry.done = True
    entry.version += 1


AGENT = "Internlm2Agent"
"""The agent name the InternLM2 agent's events carry."""

_CALLS = {AgentStatusCode.PLUGIN_END, AgentStatusCode.CODE_END}
_RETURNS = {AgentStatusCode.PLUGIN_RETURN, AgentStatusCode.CODE_RETURN}


class InternLM2Reader:
    """Turns the `AgentReturn` snapshots of `Internlm2Agent.stream_chat` into events.

    Attributes:
        final: The last snapshot read (its ``inner_steps`` continue the conversation).
    """

    def __init__(self) -> None:
        self.final: AgentReturn | None = None
        self._state: AgentStatusCode | None = None
        self._seen = 0
        self._text = ""

    def feed(self, snapshot: AgentReturn) -> list[Event]:
        """The events that `snapshot` adds to what was read before."""
        state = AgentStatusCode(snapshot.state)
        previous, self._state, self.final = self._state, state, snapshot
        events: list[Event] = []
        if state == AgentStatusCode.STREAM_ING:
            text = content_to_text(snapshot.response)
            delta = text[len(self._text) :] if text.startswith(self._text) else text
            self._text = text
            events.append(TextDelta(AGENT, delta, text))
        elif state in _CALLS and previous != state:
            self._text = ""
            events.append(self._call(state, snapshot.response))
        elif state in _RETURNS:
            events += [_returned(action) for action in snapshot.actions[self._seen :]]
            self._seen = len(snapshot.actions)
        elif state == AgentStatusCode.END:
            if snapshot.errmsg:
                events.append(Notice(str(snapshot.errmsg)))
            events.append(Final(AGENT, AgentMessage(sender=AGENT, content=content_to_text(snapshot.response))))
        elif state < 0:
            events.append(Failed(f"the model server failed ({state.name}): {snapshot.errmsg or 'no details'}"))
        return events

    @staticmethod
    def _call(state: AgentStatusCode, action: object) -> ToolCallStarted:
        if state == AgentStatusCode.CODE_END:
            code = action.get("parameters", {}).get("command", action) if isinstance(action, Mapping) else action
            return ToolCallStarted(AGENT, "", INTERPRETER_TOOL, {"command": content_to_text(code)})
        if isinstance(action, Mapping):
            return ToolCallStarted(AGENT, "", str(action.get("name", "?")), action.get("parameters", {}))
        return ToolCallStarted(AGENT, "", "?", content_to_text(action))


def _returned(action: object) -> ToolResult:
    """The `ToolResult` event of an action the InternLM2 agent ran."""
    name = action.type or "" if isinstance(action, ActionReturn) else ""
    return tool_result_event(AGENT, "", name, action)
