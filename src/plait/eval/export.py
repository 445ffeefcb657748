"""``plait export``: an evaluation's trajectories as fine-tuning data.

Two formats, one line per exported case:

* ``openai`` (default): OpenAI's fine-tuning chat format, ``{"messages": [...], "tools": [...]}``:
  ``system`` / ``user`` / ``assistant`` messages, the assistant's tool calls as ``tool_calls``
  (``type: function``, ``arguments`` a JSON string) answered by ``tool`` messages with their
  ``tool_call_id``; ``tools`` are the JSON Schemas of the agent's tools, from ``summary.json``
  (recorded when the evaluation ran, so no agent is needed here);
* ``sharegpt`` (LLaMA-Factory / XTuner style): ``{"conversations": [{"from", "value"}], "system",
  "tools"}`` with ``human`` / ``gpt`` / ``function_call`` / ``observation`` turns and ``tools``
  as a JSON string.

Neither format has a reasoning field (OpenAI's fine-tuning schema allows no other message key),
so an assistant turn's reasoning (`AgentMessage.reasoning`, kept in ``results.jsonl``) is left
out of both, and never joined to the answer.

Native tool calls are taken as the agent made them. Text-protocol trajectories — ReAct's
``Action:`` / ``Observation:`` turns, the InternLM2 plugin protocol — become the same tool
calls (`native_messages`): the thought is the assistant's content, the call's arguments those
the tool was called with, and the protocol's instructions are left out of the system prompt
(the ``tools`` list replaces them). Memory messages become chat messages through
`FunctionCallAggregator`, as for a request. Cases that ended with an error are left out
(their trajectory has no answer); with ``only_passed`` so are the failed ones. Each case is
written once: a case with several lines in ``results.jsonl`` is exported from its last one
(`plait.eval.results`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..agents.aggregator.function_call_aggregator import FunctionCallAggregator
from ..exceptions import ParseError, UserError
from ..schema import ActionReturn, AgentMessage
from ..untrusted import decode_arguments, loads
from .results import RESULTS, SUMMARY, read_results

__all__ = ["ExportFormat", "export", "native_messages", "to_openai", "to_sharegpt"]

ExportFormat = Literal["openai", "sharegpt"]

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


def to_openai(record: Mapping[str, Any], profile: Mapping[str, Any]) -> dict[str, Any]:
    """One case in OpenAI's fine-tuning chat format (``messages``, and ``tools`` when the agent has any)."""
    name = str(profile.get("name") or "")
    native = native_messages(record.get("trajectory") or [], name, profile.get("tool_names") or {})
    messages: list[dict[str, Any]] = []
    if profile.get("system"):
        messages.append({"role": "system", "content": profile["system"]})
    for message in FunctionCallAggregator().turns(native, name):
        if message.get("content") is None:  # an assistant turn that only calls tools
            message = {key: value for key, value in message.items() if key != "content"}
        message.pop("reasoning", None)  # no field for it in the format (see the module docstring)
        messages.append(message)
    line: dict[str, Any] = {"messages": messages}
    if profile.get("tools"):
        line["tools"] = profile["tools"]
    return line


_SHAREGPT_ROLES = {"user": "human", "assistant": "gpt", "tool": "observation"}


def to_sharegpt(record: Mapping[str, Any], profile: Mapping[str, Any]) -> dict[str, Any]:
    """One case in the ShareGPT format (see the module docstring); made from its OpenAI form."""
    chat = to_openai(record, profile)
    turns: list[dict[str, str]] = []
    system = ""
    for message in chat["messages"]:
        role = message["role"]
        if role == "system":
            system = str(message.get("content") or "")
        elif role == "assistant" and message.get("tool_calls"):
            calls = [
                {"name": c["function"]["name"], "arguments": decode_arguments(c["function"]["arguments"])}
                for c in message["tool_calls"]
            ]
            value = calls[0] if len(calls) == 1 else calls
            turns.append({"from": "function_call", "value": json.dumps(value, ensure_ascii=False)})
        elif role == "tool" and turns and turns[-1]["from"] == "observation":  # results of one turn's calls, together
            turns[-1]["value"] += "\n" + str(message.get("content") or "")
        else:
            turns.append({"from": _SHAREGPT_ROLES.get(role, "human"), "value": str(message.get("content") or "")})
    functions = [tool["function"] for tool in chat.get("tools", [])]
    return {"conversations": turns, "system": system, "tools": json.dumps(functions, ensure_ascii=False)}


def _profile(out_dir: str) -> dict[str, Any]:
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


def export(
    out_dir: str | os.PathLike[str],
    path: str | os.PathLike[str],
    fmt: ExportFormat = "openai",
    only_passed: bool = False,
) -> int:
    """Write the evaluation in `out_dir` as fine-tuning data to `path`; how many cases were written.

    Raises:
        UserError: `out_dir` holds no evaluation, or the format is unknown.
    """
    convert = {"openai": to_openai, "sharegpt": to_sharegpt}.get(fmt)
    if convert is None:
        raise UserError(f"unknown export format {fmt!r}: use openai or sharegpt")
    folder = os.fspath(out_dir)
    if not os.path.exists(os.path.join(folder, RESULTS)):
        raise UserError(f"no evaluation in {folder}: it has no {RESULTS}")
    profile = _profile(folder)
    records, _, _ = read_results(os.path.join(folder, RESULTS))  # read only: a run may still be appending
    written = 0
    with open(path, "w", encoding="utf-8") as fh:
        for record in records:
            if record.get("error") or not record.get("trajectory") or (only_passed and not record.get("passed")):
                continue
            fh.write(json.dumps(convert(record, profile), ensure_ascii=False) + "\n")
            written += 1
    return written
