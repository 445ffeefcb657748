"""The chat pane's model: events an answer produces, and the transcript entries they build.

Whatever the agent type, an answer is a stream of events: `Text` (the cumulative text
of the model's current reply), `ToolCall`, `ToolResult`, `Notice` (a warning worth
showing), and finally `Finished`, `Failed` or `Approval` (the run waits for the user to
approve tool calls). `apply_event` folds them into a `ChatEntry`, a list of blocks
(`TextBlock`, `ToolBlock`, `NoticeBlock`, `ApprovalBlock`) that the page renders;
`InternLM2Reader` turns `Internlm2Agent.stream_chat` snapshots into events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Union

from ..agents.aggregator.default_aggregator import content_to_text
from ..schema import ActionReturn, ActionStatusCode, AgentStatusCode, PendingCall
from .settings import INTERPRETER_TOOL

if TYPE_CHECKING:
    from ..agents.internlm2_agent import AgentReturn

__all__ = [
    "Approval",
    "ApprovalBlock",
    "ChatEntry",
    "Event",
    "Failed",
    "Finished",
    "InternLM2Reader",
    "Notice",
    "NoticeBlock",
    "Text",
    "TextBlock",
    "ToolBlock",
    "ToolCall",
    "ToolResult",
    "apply_event",
    "tool_result",
]


@dataclass(frozen=True)
class Text:
    """The model's current reply so far (cumulative)."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """The model called a tool."""

    name: str
    arguments: object
    kind: str = "plugin"


@dataclass(frozen=True)
class ToolResult:
    """A tool's result: output items (``{'type': 'text'|'image', 'content': ...}``) or an error.

    `thought` is the complete text the model wrote before the call, when the source knows it
    only now (the InternLM2 agent); it replaces the streamed text shown before the call.
    """

    name: str
    items: tuple[Mapping[str, object], ...] = ()
    error: str | None = None
    thought: str | None = None


@dataclass(frozen=True)
class _Message:
    """A message for the user, shown as a `NoticeBlock` of the event's `level`."""

    message: str
    level: ClassVar[str] = "warning"


class Notice(_Message):
    """Something the user should know that does not end the answer."""


@dataclass(frozen=True)
class Finished:
    """The answer is complete; `answer` is its final text (None: keep what was streamed)."""

    answer: str | None = None


class Failed(_Message):
    """The answer stopped on an error."""

    level: ClassVar[str] = "error"


@dataclass(frozen=True)
class Approval:
    """The run paused: these tool calls wait for the user's decision (it ends the answer for now)."""

    calls: tuple[PendingCall, ...]


Event = Union[Text, ToolCall, ToolResult, Notice, Finished, Failed, Approval]


@dataclass
class TextBlock:
    """Text written by the user or the model (markdown)."""

    text: str


@dataclass
class ToolBlock:
    """One tool call and, once it is back, its result."""

    name: str
    arguments: object
    kind: str = "plugin"
    items: list[Mapping[str, object]] | None = None
    error: str | None = None

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
    """Tool calls waiting for the user, and what was decided so far (call id -> True, or False to refuse)."""

    calls: list[PendingCall]
    decisions: dict[str, bool] = field(default_factory=dict)

    @property
    def waiting(self) -> list[PendingCall]:
        """The calls not decided yet."""
        return [call for call in self.calls if call.id not in self.decisions]


Block = Union[TextBlock, ToolBlock, NoticeBlock, ApprovalBlock]


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


def tool_result(result: object, name: str = "") -> ToolResult:
    """A `ToolResult` event from what an executor returned (an `ActionReturn` or anything else)."""
    if isinstance(result, ActionReturn):
        items = tuple(dict(item) for item in result.result or ())
        error = None if result.state == ActionStatusCode.SUCCESS else content_to_text(result)
        return ToolResult(result.type or name, items, error, result.thought)
    return ToolResult(name, ({"type": "text", "content": content_to_text(result)},))


def _pending_tool(entry: ChatEntry, name: str) -> ToolBlock | None:
    pending = [b for b in entry.blocks if isinstance(b, ToolBlock) and not b.done]
    for block in pending:
        if block.name == name:
            return block
    return pending[0] if pending else None


def _set_thought(entry: ChatEntry, block: ToolBlock, thought: str) -> None:
    index = next(i for i, b in enumerate(entry.blocks) if b is block)
    before = entry.blocks[index - 1] if index else None
    if isinstance(before, TextBlock):
        before.text = thought
    else:
        entry.blocks.insert(index, TextBlock(thought))


def apply_event(entry: ChatEntry, event: Event) -> None:
    """Fold one event into an answer entry (see the module docstring)."""
    last = entry.blocks[-1] if entry.blocks else None
    if isinstance(event, Text):
        if isinstance(last, TextBlock):
            last.text = event.text
        elif event.text:
            entry.blocks.append(TextBlock(event.text))
    elif isinstance(event, ToolCall):
        entry.blocks.append(ToolBlock(event.name, event.arguments, event.kind))
    elif isinstance(event, ToolResult):
        block = _pending_tool(entry, event.name)
        if block is None:
            block = ToolBlock(event.name, None, tool_kind(event.name))
            entry.blocks.append(block)
        block.items, block.error = list(event.items), event.error
        if event.thought:
            _set_thought(entry, block, event.thought)
    elif isinstance(event, (Notice, Failed)):
        entry.blocks.append(NoticeBlock(event.message, level=event.level))
        entry.done = entry.done or isinstance(event, Failed)
    elif isinstance(event, Finished):
        if event.answer:
            if isinstance(last, TextBlock):
                last.text = event.answer
            else:
                entry.blocks.append(TextBlock(event.answer))
        entry.done = True
    elif isinstance(event, Approval):
        entry.blocks.append(ApprovalBlock(list(event.calls)))
        entry.done = True
    entry.version += 1


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

    def feed(self, snapshot: AgentReturn) -> list[Event]:
        """The events that `snapshot` adds to what was read before."""
        state = AgentStatusCode(snapshot.state)
        previous, self._state, self.final = self._state, state, snapshot
        events: list[Event] = []
        if state == AgentStatusCode.STREAM_ING:
            events.append(Text(content_to_text(snapshot.response)))
        elif state in _CALLS and previous != state:
            events.append(self._call(state, snapshot.response))
        elif state in _RETURNS:
            events += [tool_result(action) for action in snapshot.actions[self._seen :]]
            self._seen = len(snapshot.actions)
        elif state == AgentStatusCode.END:
            if snapshot.errmsg:
                events.append(Notice(str(snapshot.errmsg)))
            events.append(Finished(content_to_text(snapshot.response)))
        elif state < 0:
            events.append(Failed(f"the model server failed ({state.name}): {snapshot.errmsg or 'no details'}"))
        return events

    @staticmethod
    def _call(state: AgentStatusCode, action: object) -> ToolCall:
        if state == AgentStatusCode.CODE_END:
            code = action.get("parameters", {}).get("command", action) if isinstance(action, Mapping) else action
            return ToolCall(INTERPRETER_TOOL, {"command": content_to_text(code)}, "interpreter")
        if isinstance(action, Mapping):
            return ToolCall(str(action.get("name", "?")), action.get("parameters", {}))
        return ToolCall("?", content_to_text(action))
