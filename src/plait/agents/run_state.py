"""`RunState`: where a tool loop stands between two effects, as plain JSON.

A run of a tool-using agent (`plait.agents.tool_loop`) keeps everything it needs to go
on in one `RunState` instead of generator locals: how many model calls it made, whether
the final answer was asked for, the step records, the tool calls decided but not yet
answered, and whatever its paradigm keeps between turns (a scratchpad, a plan and its
evidence, the next input). The agent holds the state of each session's unfinished run and
shows it in `state_dict` under ``'extra_state'`` — so a run paused for approval, or cut
off by a crash, can be saved with the session and taken up again.

The JSON form is versioned (``{'version': 1, ...}``); `RunState.from_dict` refuses other
versions instead of guessing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from typing_extensions import NotRequired, TypedDict

from ..exceptions import StateDictError
from ..schema import ActionReturn, ActionStatusCode, AgentMessage, dataclass2dict
from ..untrusted import decode_arguments
from ..utils._json import key_json

__all__ = [
    "RUN_STATE_VERSION",
    "SUB_PAUSED",
    "PlannedCall",
    "RunState",
    "call_key",
    "decode_result",
    "encode_result",
    "sub_pause",
]

RUN_STATE_VERSION = 1

SUB_PAUSED = "sub_agent_paused"
"""The result item of a tool call whose sub-agent paused for approval (see `sub_pause`)."""


class PlannedCall(TypedDict):
    """A tool call a model asked for, as JSON.

    Attributes:
        name: The tool (or ``Toolkit.api``) to call.
        arguments: What the model wrote for it: a JSON object, text, or None.
        id: The model's id for the call (native tool calling), when it gave one.
        kind: Which executor runs it, for agents with more than one (``'plugin'``,
            ``'interpreter'``).
    """

    name: str
    arguments: Any
    id: NotRequired[str]
    kind: NotRequired[str]


@dataclass
class RunState:
    """The state of one tool-loop run between effects.

    Attributes:
        protocol: The paradigm that owns the run (its protocol's name), checked on resume.
        turns: Model calls made so far (the budget counts these).
        forced: Whether the final answer has been asked for (the last call of the budget).
        steps: The step records of this run, in the paradigm's layout.
        pending: Tool calls decided but not answered yet (run first on resume).
        outcomes: For each pending call, what became of it: None (not run yet),
            ``{'result': ...}`` (it ran: its result as JSON, `encode_result`),
            ``{'refused': text}`` (a person refused it; `text` is what the model is told),
            ``{'output': text}`` (the caller answered it with a `ToolOutput`: `text` is its result) or
            ``{'paused': {'session': ..., 'calls': [...]}}`` (a sub-agent it called paused
            for approval in that session: `sub_pause`; the call runs again to go on with it).
        waiting: The ids of the pending calls that wait for a person's decision: while
            there are any, the run is paused (``AgentStatusCode.INTERRUPTED``). A call of
            a paused sub-agent waits as ``'<this run's call id>/<its call id>'``.
        turn_start: The session's memory length when the paused call began (what a failed
            resume rolls back to).
        messages: Named message lists the paradigm keeps between turns (the next input,
            the last reply).
        scratch: Other JSON values the paradigm keeps (a scratchpad, a plan, evidence).
        ran: The results of the calls this run made, by `call_key` (what an identical call
            made again is answered with, under ``repeat_calls='reuse'``).
    """

    protocol: str
    turns: int = 0
    forced: bool = False
    steps: list[dict[str, Any]] = field(default_factory=list)
    pending: list[PlannedCall] = field(default_factory=list)
    outcomes: list[dict[str, Any] | None] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    turn_start: int | None = None
    messages: dict[str, list[AgentMessage]] = field(default_factory=dict)
    scratch: dict[str, Any] = field(default_factory=dict)
    ran: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (messages as `AgentMessage.model_dump()` dicts)."""
        return {
            "version": RUN_STATE_VERSION,
            "protocol": self.protocol,
            "turns": self.turns,
            "forced": self.forced,
            "steps": [dict(step) for step in self.steps],
            "pending": [dict(call) for call in self.pending],
            "outcomes": [None if outcome is None else dict(outcome) for outcome in self.outcomes],
            "waiting": list(self.waiting),
            "turn_start": self.turn_start,
            "messages": {name: [m.model_dump() for m in items] for name, items in self.messages.items()},
            "scratch": dict(self.scratch),
            **({"ran": {key: encode_result(result) for key, result in self.ran.items()}} if self.ran else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunState:
        """Rebuild a state from `to_dict` output.

        Raises:
            StateDictError: Another version, or a malformed state.
        """
        if not isinstance(data, Mapping) or data.get("version") != RUN_STATE_VERSION:
            version = data.get("version") if isinstance(data, Mapping) else None
            raise StateDictError(f"run state version {version!r} is not supported (this plait reads 1)", [], [])
        try:
            messages = {
                str(name): [AgentMessage.model_validate(m) for m in items]
                for name, items in dict(data.get("messages") or {}).items()
            }
            return cls(
                protocol=str(data["protocol"]),
                turns=int(data.get("turns", 0)),
                forced=bool(data.get("forced", False)),
                steps=[dict(step) for step in data.get("steps") or []],
                pending=[_planned(call) for call in data.get("pending") or []],
                outcomes=[None if outcome is None else dict(outcome) for outcome in data.get("outcomes") or []],
                waiting=[str(call_id) for call_id in data.get("waiting") or []],
                turn_start=None if data.get("turn_start") is None else int(data["turn_start"]),
                messages=messages,
                scratch=dict(data.get("scratch") or {}),
                ran={str(key): decode_result(result) for key, result in dict(data.get("ran") or {}).items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StateDictError(f"malformed run state: {exc}", [], []) from None


def call_key(call: PlannedCall) -> str:
    """What makes two calls the same call: the tool and its arguments (JSON objects compared by value)."""
    arguments = decode_arguments(call.get("arguments"))
    if isinstance(arguments, dict):
        try:
            return f"{call['name']}\n{orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()}"
        except (TypeError, ValueError):  # what orjson refuses (integers past 64 bits, lone surrogates)
            try:
                return f"{call['name']}\n{key_json(arguments)}"
            except (TypeError, ValueError):
                pass
    return f"{call['name']}\n{arguments}"


def _planned(call: Mapping[str, Any]) -> PlannedCall:
    planned = PlannedCall(name=str(call["name"]), arguments=call.get("arguments"))
    if call.get("id") is not None:
        planned["id"] = str(call["id"])
    if call.get("kind") is not None:
        planned["kind"] = str(call["kind"])
    return planned


def encode_result(result: object) -> dict[str, Any]:
    """A tool call's result (an executor's `AgentMessage`, an `ActionReturn`, text) as JSON."""
    if isinstance(result, AgentMessage):
        data = result.model_dump()
        if isinstance(result.content, ActionReturn):
            data["content"] = dataclass2dict(result.content)
            return {"message": data, "action_return": True}
        return {"message": data}
    if isinstance(result, ActionReturn):
        return {"action_return": dataclass2dict(result)}
    return {"value": result}


def decode_result(data: Mapping[str, Any]) -> object:
    """The result `encode_result` wrote."""
    if "message" in data:
        message = dict(data["message"])
        if data.get("action_return"):
            message["content"] = ActionReturn.from_dict(message["content"])
        return AgentMessage.model_validate(message)
    if "action_return" in data:
        return ActionReturn.from_dict(data["action_return"])
    return data.get("value")


def sub_pause(result: object) -> dict[str, Any] | None:
    """What a tool result says of a sub-agent that paused for approval, or None (any other result).

    An agent called as a tool (`plait.agents.agent_tool.AgentTool`) from a tool loop answers
    a pause of its own run with an ``ActionStatusCode.ING`` return holding one `SUB_PAUSED`
    item: ``{'session': <the sub-agent's session>, 'calls': [{'id', 'name', 'arguments'}]}``
    (the calls that wait). The calling loop pauses too, and waits for those calls.
    """
    content = result.content if isinstance(result, AgentMessage) else result
    if not isinstance(content, ActionReturn) or content.state != ActionStatusCode.ING or not content.result:
        return None
    item = content.result[0]
    info = item.get("content") if item.get("type") == SUB_PAUSED else None
    return info if isinstance(info, dict) and isinstance(info.get("calls"), list) else None
