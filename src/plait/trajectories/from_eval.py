"""Evaluation results as trajectories: a ``results.jsonl`` record of ``plait eval`` becomes a `Trajectory`.

The record's ``trajectory`` (the session's memory messages, `AgentMessage` dicts) becomes
OpenAI chat messages. Native tool calls are taken as the agent made them. Text-protocol
trajectories — ReAct's ``Action:`` / ``Observation:`` turns, the InternLM2 plugin protocol —
become the same tool calls (`native_messages`): the thought is the assistant's content, the
call's arguments those the tool was called with, and the protocol's instructions are left out
of the system prompt (the trajectory's ``tools`` replace them). Memory messages become chat
messages through `FunctionCallAggregator`, as for a request; an assistant turn's reasoning is
kept as ``reasoning_content`` (never joined to the answer).

The trajectory's reward is the record's ``reward`` (a reward function's or an environment
agent's, `plait.trajectories.rewards`) when it has one, else the scorer's ``score``; a tool
result whose call failed (the tool raised, its arguments did not fit, its service did not
answer) is a `StepOutcome` ``"tool_error"``. A record of a case that ended with an error
gives no trajectory (it has no answer). ``tools`` and the system prompt come from the agent's
profile in ``summary.json`` (recorded when the evaluation ran, so no agent is needed here).
The record's ``tokens`` (each model call's exact tokens, when the model gave them:
`plait.trajectories.tokens`) become the assistant messages' `TurnTokens`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..agents.aggregator.function_call_aggregator import FunctionCallAggregator
from ..eval.results import SUMMARY, record_key
from ..exceptions import ParseError, UserError
from ..schema import ActionReturn, ActionStatusCode, AgentMessage
from ..untrusted import decode_arguments, loads
from .record import StepOutcome, Trajectory
from .tokens import turn_tokens_of

__all__ = ["eval_profile", "from_eval", "native_messages"]

_EXECUTOR = "ActionExecutor"


def _message(raw: object) -> AgentMessage | None:
    """A recorded memory message, tool results back as `ActionReturn` (None: not a message)."""
    if not isinstance(raw, Mapping) or "content" not in raw:
        return None
    try:
        message = AgentMessage(**{key: value for key, value in raw.items() if key in AgentMessage.model_fields})
    except (TypeError, ValueError):
        return None
    content = message.content
    if isinstance(content, Mapping) and {"result", "errmsg", "state"} <= set(content):
        fields = {key: content[key] for key in ActionReturn.__dataclass_fields__ if key in content}
        try:
            message.content = ActionReturn.from_dict(fields)
        except (TypeError, ValueError):
            pass
    return message


def _text_call(formatted: object) -> tuple[str, object, str] | None:
    """``(tool, parameters, thought)`` of a text-protocol turn that calls a tool (ReAct, InternLM2), else None."""
    if not isinstance(formatted, Mapping):
        return None
    action = formatted.get("action")
    if not isinstance(action, Mapping) or not isinstance(action.get("name"), str):
        return None
    thought = formatted.get("thought_process") or formatted.get("thought") or ""
    return action["name"], action.get("parameters", action.get("arguments")), str(thought)


def _arguments(parameters: object, result: AgentMessage | None) -> str:
    """A text-protocol call's arguments as JSON text: those the tool ran with, else what the model wrote."""
    ran = getattr(result.content, "args", None) if result is not None else None
    if isinstance(ran, Mapping):
        return json.dumps(ran, ensure_ascii=False, default=str)
    decoded = decode_arguments(parameters)
    return json.dumps(decoded if isinstance(decoded, dict) else {"input": decoded}, ensure_ascii=False)


def native_messages(trajectory: Sequence[object], name: str, tool_names: Mapping[str, str]) -> list[AgentMessage]:
    """A recorded trajectory with text-protocol tool calls rewritten as native ones.

    Args:
        trajectory: The session's memory messages, as ``results.jsonl`` holds them.
        name: The agent's name (its own messages are the assistant's).
        tool_names: Tool name -> its OpenAI name (``Toolkit.api`` -> ``Toolkit__api``).
    """
    messages = [m for m in (_message(raw) for raw in trajectory) if m is not None]
    out: list[AgentMessage] = []
    waiting: str | None = None  # the id of a text-protocol call whose result comes next
    for index, message in enumerate(messages):
        formatted = message.formatted
        call = _text_call(formatted) if message.sender == name else None
        if message.sender == name and isinstance(formatted, Mapping) and formatted.get("tool_calls"):
            calls = [
                {**c, "arguments": c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"])}
                for c in formatted["tool_calls"]
            ]
            out.append(message.model_copy(update={"formatted": {"tool_calls": calls}}))
        elif call is not None:
            tool, parameters, thought = call
            following = messages[index + 1] if index + 1 < len(messages) else None
            result = following if following is not None and following.sender == _EXECUTOR else None
            waiting = f"call_{index}"
            native = {"id": waiting, "name": tool_names.get(tool, tool), "arguments": _arguments(parameters, result)}
            out.append(AgentMessage(sender=name, content=thought, formatted={"tool_calls": [native]}))
        elif message.sender == _EXECUTOR and waiting is not None:
            extra = {**(message.extra_info or {}), "tool_call_id": waiting}
            out.append(message.model_copy(update={"extra_info": extra}))
            waiting = None
        else:
            out.append(message)
    return out


def _chat(record: Mapping[str, Any], profile: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[StepOutcome]]:
    """A record's trajectory as OpenAI chat messages, and the outcomes of its failed tool calls."""
    name = str(profile.get("name") or "")
    native = native_messages(record.get("trajectory") or [], name, profile.get("tool_names") or {})
    messages: list[dict[str, Any]] = []
    if profile.get("system"):
        messages.append({"role": "system", "content": profile["system"]})
    outcomes: list[StepOutcome] = []
    for source, message in zip(native, FunctionCallAggregator().turns(native, name), strict=True):
        if message.get("content") is None:  # an assistant turn that only calls tools
            message = {key: value for key, value in message.items() if key != "content"}
        reasoning = message.pop("reasoning", None)
        if isinstance(reasoning, Mapping) and isinstance(reasoning.get("text"), str):
            message["reasoning_content"] = reasoning["text"]
        if message["role"] == "tool":
            state = getattr(source.content, "state", ActionStatusCode.SUCCESS)
            if state != ActionStatusCode.SUCCESS:
                detail = getattr(source.content, "errmsg", None)
                outcomes.append(
                    StepOutcome(
                        message=len(messages), status="tool_error", detail=str(detail)[:200] if detail else None
                    )
                )
        messages.append(message)
    return messages, outcomes


def from_eval(record: Mapping[str, Any], profile: Mapping[str, Any]) -> Trajectory | None:
    """The trajectory of one ``results.jsonl`` record (None: the case ended with an error, or has no messages).

    Args:
        record: The record, as `plait.eval.results.read_results` gives it.
        profile: The agent's profile (``summary.json``'s ``agent``, `eval_profile`).
    """
    if record.get("error") or not record.get("trajectory"):
        return None
    messages, outcomes = _chat(record, profile)
    if not messages:
        return None
    reward = record.get("reward", record.get("score"))
    metadata: dict[str, Any] = {
        key: record[key]
        for key in ("id", "input", "expected", "passed", "score", "sample", "seed", "temperature")
        if key in record
    }
    if record.get("metadata"):
        metadata["case"] = record["metadata"]
    return Trajectory(
        id=record_key(record),
        messages=messages,
        tools=list(profile.get("tools") or []),
        reward=float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None,
        outcomes=outcomes,
        tokens=turn_tokens_of(record.get("tokens"), messages),
        source="eval",
        model=str(profile["model"]) if profile.get("model") else None,
        metadata=metadata,
    )


def eval_profile(out_dir: str) -> dict[str, Any]:
    """The agent's profile an evaluation in `out_dir` recorded (``summary.json``'s ``agent``).

    Raises:
        UserError: No readable summary, or one without a profile.
    """
    path = os.path.join(out_dir, SUMMARY)
    try:
        with open(path, encoding="utf-8") as fh:
            summary = loads(fh.read())
    except OSError as exc:
        raise UserError(f"no evaluation in {out_dir}: cannot read {SUMMARY} ({exc.strerror or exc})") from None
    except ParseError as exc:
        raise UserError(f"{path} is not a summary: {exc}") from None
    profile = summary.get("agent") if isinstance(summary, dict) else None
    if not isinstance(profile, dict):
        raise UserError(f"{path} has no agent profile; run plait eval again with this --out")
    return profile
