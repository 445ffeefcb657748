"""Anthropic Messages API wire decisions, as pure functions (no SDK import, no IO).

* `build_request`: OpenAI-style messages and plait parameters -> ``messages.create`` kwargs
  (system messages moved to ``system``, consecutive same-role turns merged, OpenAI tool
  calls and results turned into ``tool_use`` / ``tool_result`` blocks, stop words ->
  ``stop_sequences``, OpenAI tool schemas -> ``input_schema`` tools).
* `parse_message`: a ``Message`` (SDK object or dict) -> `ModelResponse`.

Extended thinking: a reply's ``thinking`` blocks become the response's `Reasoning` (text and
``signature``; a ``redacted_thinking`` block's ``data`` as ``redacted``). An assistant turn that
called tools sends them back unchanged, first in its content, as the API requires within a
tool loop; reasoning without a Claude signature (another model's) is not sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..exceptions import UserError
from ..outputs import response_schema
from ..schema import Reasoning
from ._decoded import count, json_array, json_object
from ._openai_protocol import ToolChoice, ToolSpec, normalize_tool
from .base_llm import LAGENT_DROPPED
from .response import ModelResponse, ToolCall, Usage

if TYPE_CHECKING:
    from .base_llm import GenParams

__all__ = ["OUTPUT_TOOL", "build_request", "convert_tool", "convert_tool_choice", "parse_message"]

# sampling fields the SDK no longer types: sent in the JSON body when set
_SAMPLING = ("temperature", "top_p", "top_k")
_DROPPED = frozenset(
    {
        "repetition_penalty",
        "session_ids",
        "max_new_tokens",
        "stop_words",
        "response_format",
        *_SAMPLING,
        *LAGENT_DROPPED,
    }
)

OUTPUT_TOOL = "plait_output"
"""The tool a ``response_format`` becomes: Claude answers by calling it, its input is the JSON answer."""
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


def convert_tool(tool: ToolSpec) -> dict[str, object]:
    """An OpenAI tool schema (or bare function schema) as an Anthropic tool."""
    function = normalize_tool(tool).get("function")
    if not isinstance(function, Mapping) or "name" not in function:
        raise UserError(f"only function tools can be sent to Claude, not {tool!r}")
    out = {
        "name": function["name"],
        "input_schema": dict(function.get("parameters") or {"type": "object", "properties": {}}),
    }
    if function.get("description"):
        out["description"] = function["description"]
    return out


def convert_tool_choice(choice: ToolChoice) -> dict[str, object] | None:
    """OpenAI ``tool_choice`` (``'auto'``, ``'required'``, ``'none'``, a name or a function dict) for Claude."""
    if choice is None:
        return None
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    if isinstance(choice, str):
        return {"type": "tool", "name": choice}
    if isinstance(choice, Mapping):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else choice.get("name")
        if name:
            return {"type": "tool", "name": name}
    raise UserError(f"unsupported tool_choice {choice!r}")


def _blocks(content: object) -> list[dict[str, object]]:
    if isinstance(content, list):
        return [dict(block) for block in content]
    text = "" if content is None else str(content)
    return [{"type": "text", "text": text}] if text else []


def _tool_use(call: Mapping[str, object]) -> dict[str, object]:
    """An OpenAI tool call of an assistant message as a ``tool_use`` block."""
    function = json_object(call.get("function", {}))
    arguments = function.get("arguments") or "{}"
    tool_input = json.loads(arguments) if isinstance(arguments, str) else dict(json_object(arguments))
    return {"type": "tool_use", "id": call.get("id", ""), "name": function.get("name", ""), "input": tool_input}


def _thinking_blocks(message: Mapping[str, object]) -> list[dict[str, object]]:
    """The signed ``thinking`` (and ``redacted_thinking``) blocks of a turn's reasoning, as Claude wrote them."""
    reasoning = Reasoning.from_wire(message.get("reasoning"))
    blocks: list[dict[str, object]] = []
    if reasoning is not None and reasoning.signature is not None:
        blocks.append({"type": "thinking", "thinking": reasoning.text, "signature": reasoning.signature})
    if reasoning is not None and reasoning.redacted is not None:
        blocks.append({"type": "redacted_thinking", "data": reasoning.redacted})
    return blocks


def _turn(message: Mapping[str, object]) -> dict[str, object]:
    """One OpenAI-style message as a Claude turn (role user or assistant)."""
    role = message.get("role")
    if role == "tool":
        result = {
            "type": "tool_result",
            "tool_use_id": message.get("tool_call_id", ""),
            "content": _blocks(message.get("content")),
        }
        return {"role": "user", "content": [result]}
    if role == "assistant" and message.get("tool_calls"):
        blocks = _thinking_blocks(message) + _blocks(message.get("content"))
        blocks += [_tool_use(json_object(call)) for call in json_array(message["tool_calls"])]
        return {"role": "assistant", "content": blocks}
    if role not in ("user", "assistant"):
        raise UserError(f"Claude takes user and assistant turns; map role {role!r} with the meta template")
    content = message.get("content")
    return {
        "role": role,
        "content": content if isinstance(content, list) else ("" if content is None else str(content)),
    }


def _merge(turns: list[dict[str, object]]) -> list[dict[str, object]]:
    """Merge consecutive turns of one role (the API wants them alternating)."""
    merged: list[dict[str, object]] = []
    for turn in turns:
        if merged and merged[-1]["role"] == turn["role"]:
            last = merged[-1]
            if isinstance(last["content"], str) and isinstance(turn["content"], str):
                last["content"] = f"{last['content']}\n{turn['content']}"
            else:
                last["content"] = _blocks(last["content"]) + _blocks(turn["content"])
        else:
            merged.append(dict(turn))
    return merged


def build_request(
    model: str,
    messages: Sequence[Mapping[str, object]],
    params: GenParams,
    tools: Sequence[ToolSpec] | None = None,
    tool_choice: ToolChoice = None,
) -> dict[str, object]:
    """Keyword arguments for ``client.messages.create`` / ``messages.stream``.

    Every ``system`` message goes to ``system`` (joined by blank lines); ``name`` keys are
    dropped. ``max_new_tokens`` -> ``max_tokens``; ``temperature``/``top_p``/``top_k`` are
    sent when not None (in ``extra_body``, as the SDK no longer types them); other
    parameters (``metadata``, ``thinking``...) are passed to the SDK as they are.
    """
    system = [str(m.get("content") or "") for m in messages if m.get("role") == "system"]
    turns = _merge([_turn(m) for m in messages if m.get("role") != "system"])
    request: dict[str, object] = {
        "model": model,
        "max_tokens": int(params.get("max_new_tokens") or 512),
        "messages": turns,
    }
    if any(system):
        request["system"] = "\n\n".join(s for s in system if s)
    stop = [s for s in params.get("stop_words") or () if s]
    if stop:
        request["stop_sequences"] = stop
    sampling = {k: params[k] for k in _SAMPLING if params.get(k) is not None}
    extra = dict(params.get("extra_body") or {})
    if sampling or extra:
        request["extra_body"] = {**sampling, **extra}
    for key, value in params.items():
        if key not in _DROPPED and key != "extra_body" and value is not None:
            request[key] = value
    converted = [convert_tool(t) for t in tools or ()]
    choice = convert_tool_choice(tool_choice) if converted else None
    schema = response_schema(params.get("response_format"))
    if schema is not None:  # the answer is a call of the output tool, its input the JSON
        if schema.get("type") != "object":
            schema = {"type": "object", "properties": {}, "additionalProperties": True}
        if choice is not None and choice.get("type") == "none":
            converted = []  # no tool may run: the answer it is
        answer: dict[str, object] = {
            "name": OUTPUT_TOOL,
            "description": "Give your final answer.",
            "input_schema": schema,
        }
        forced: dict[str, object] = {"type": "any"}  # a real tool, or the answer
        if choice is not None and choice.get("type") == "tool":
            forced = choice
        choice = forced if converted else {"type": "tool", "name": OUTPUT_TOOL}
        converted.append(answer)
    if converted:
        request["tools"] = converted
        if choice is not None:
            request["tool_choice"] = choice
    return request


def _get(obj: object, name: str, default: object = None) -> object:
    """Field `name` of a decoded JSON object, or attribute `name` of an SDK object."""
    return obj.get(name, default) if isinstance(obj, Mapping) else getattr(obj, name, default)


def parse_message(message: object) -> ModelResponse:
    """A Claude ``Message`` (SDK object or decoded JSON) as a `ModelResponse`."""
    text: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[str] = []
    signature: str | None = None
    redacted: str | None = None
    for block in json_array(_get(message, "content")):
        kind = _get(block, "type")
        if kind == "thinking":
            thinking.append(str(_get(block, "thinking") or ""))
            sign = _get(block, "signature")
            signature = sign if isinstance(sign, str) else signature
        elif kind == "redacted_thinking":
            data = _get(block, "data")
            redacted = data if isinstance(data, str) else redacted
        elif kind == "text":
            text.append(str(_get(block, "text") or ""))
        elif kind == "tool_use":
            arguments = json.dumps(_get(block, "input") or {}, ensure_ascii=False)
            if _get(block, "name") == OUTPUT_TOOL:  # a typed answer (see build_request)
                text.append(arguments)
                continue
            calls.append(ToolCall(str(_get(block, "id")), str(_get(block, "name")), arguments))
    usage = _get(message, "usage")
    counts = None
    if usage is not None:
        prompt, completion = count(_get(usage, "input_tokens")), count(_get(usage, "output_tokens"))
        counts = Usage(prompt, completion, prompt + completion)
    reason = _get(message, "stop_reason")
    finish = _STOP_REASONS.get(reason, reason) if isinstance(reason, str) else None
    reasoning = Reasoning("\n\n".join(thinking), signature, redacted) if thinking or redacted else None
    return ModelResponse("".join(text), calls, finish, counts, message, reasoning)
