"""The two tool protocols of `LlamaCppModel` (private): how tools reach the model and calls come back.

* ``'json'`` — plait's own: the tools are described in the system prompt and the reply is
  decoded under a JSON schema, ``{"tool": NAME, "arguments": {...}}`` or ``{"answer": ...}``
  (`plait.llms._llama_tools.ToolPlan`). Works with any chat model; one call per reply.
* ``'template'`` — the model's own: its chat template (the GGUF's Jinja, rendered here in a
  sandbox) shows the tools, the calls and the tool results in the words it was trained on,
  and the reply is decoded under a grammar of the template's call syntax, Hermes/Qwen
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (several = parallel calls),
  with each call's JSON held to its tool's schema. Only for templates that have that syntax.

Both answer the same questions for the constrained tries of `LlamaCppModel` (the prompt,
the constraint, the parsed reply, the answer text while it streams), so the tries, retries
and fallbacks are written once.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping, Sequence
from typing import Protocol

from ..exceptions import UserError
from ..utils.names import did_you_mean
from ._llama_tools import InvalidToolReply, ToolPlan, answer_so_far, normalize_messages
from .base_llm import Prompt
from .response import ToolCall
from .text_tool_calls import find_tool_calls

__all__ = ["TOOL_PROTOCOLS", "JsonProtocol", "TemplateProtocol", "ToolProtocol", "check_tool_protocol"]

TOOL_PROTOCOLS = ("json", "template")
"""The names ``LlamaCppModel(tool_protocol=...)`` takes."""

MAX_PARALLEL_CALLS = 4
"""The most calls one reply may make under the template protocol (a small model repeats a call otherwise)."""


def check_tool_protocol(name: str | None) -> str | None:
    """`name` when it is a tool protocol (or None); a `UserError` naming the closest one otherwise."""
    if name is None or name in TOOL_PROTOCOLS:
        return name
    close = did_you_mean(str(name), TOOL_PROTOCOLS)
    hint = f"; {close}" if close else ""
    raise UserError(f"unknown tool_protocol {name!r}: one of {', '.join(map(repr, TOOL_PROTOCOLS))}{hint}")


class ToolProtocol(Protocol):
    """What the constrained tries of `LlamaCppModel` ask of a tool protocol."""

    name: str

    def prompt(self, plan: ToolPlan, messages: Sequence[object]) -> Prompt:
        """What the engine reads: chat turns, or a rendered prompt string."""

    def constraint(self, plan: ToolPlan) -> dict[str, object]:
        """The request fields that hold the reply to the protocol (``json_schema`` or ``grammar``)."""

    def parse(self, plan: ToolPlan, reply: str) -> list[ToolCall] | str:
        """The calls a reply makes, or its answer text; raises `InvalidToolReply`."""

    def answer_so_far(self, reply: str) -> str | None:
        """The answer text in a reply still being generated (None: not an answer, or not yet)."""


class JsonProtocol:
    """plait's own protocol: tools in the system prompt, the reply decoded under `ToolPlan.schema`."""

    name = "json"

    def prompt(self, plan: ToolPlan, messages: Sequence[object]) -> Prompt:
        return plan.inject(normalize_messages(messages))

    def constraint(self, plan: ToolPlan) -> dict[str, object]:
        return {"json_schema": plan.schema()}

    def parse(self, plan: ToolPlan, reply: str) -> list[ToolCall] | str:
        parsed = plan.parse(reply)
        return [parsed] if isinstance(parsed, ToolCall) else parsed

    def answer_so_far(self, reply: str) -> str | None:
        return answer_so_far(reply)


# -- the model's own template --------------------------------------------------------------

_TEXT_FORMATS = ("hermes", "fenced_json", "bare_json")
_CALL_TEXT = re.compile(r'\{\s*"name"\s*:\s*"[^"]*"\s*,\s*"(?:arguments|parameters)"\s*:')
"""A call's JSON anywhere in a text answer (what `find_tool_calls` leaves as prose)."""
_COMPACT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
"""llguidance's JSON layout for calls: ``{"name": "f", "arguments": {"x": 1}}``, no line breaks."""
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_ANSWER_START = "<{[`"
_ANSWER_REGEX = r"/[^\s<{\[`](.|\n)*/"
"""A text answer may not start with these: JSON or markup there is a call the model meant to make."""


def _tojson(value: object, indent: int | None = None, ensure_ascii: bool = False, **_: object) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent)


def _raise(message: str) -> None:
    raise UserError(f"the chat template refused the conversation: {message}")


def _template_messages(messages: Sequence[object]) -> list[dict[str, object]]:
    """OpenAI-style messages as chat templates expect them (call arguments as objects)."""
    out: list[dict[str, object]] = []
    for message in messages:
        if not isinstance(message, Mapping):
            raise UserError(f"a message must be a dict with 'role' and 'content', not {type(message).__name__}")
        role = str(message.get("role", "user"))
        turn: dict[str, object] = {"role": role if role in ("system", "user", "assistant", "tool") else "user"}
        turn["content"] = normalize_messages([{"role": "user", "content": message.get("content")}])[0]["content"]
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls:
            rendered = []
            for call in calls:
                name, arguments = _name_and_arguments(call)
                rendered.append({"type": "function", "function": {"name": name, "arguments": arguments}})
            turn["tool_calls"] = rendered
        if role == "tool" and message.get("tool_call_id"):
            turn["tool_call_id"] = message["tool_call_id"]
        out.append(turn)
    return out


def _name_and_arguments(call: object) -> tuple[str, object]:
    if isinstance(call, ToolCall):
        name, raw = call.name, call.arguments
    elif isinstance(call, Mapping):
        function = call.get("function") or call
        function = function if isinstance(function, Mapping) else {}
        name, raw = str(function.get("name", "")), function.get("arguments") or "{}"
    else:
        raise UserError(f"a tool call must be a dict or ToolCall, not {type(call).__name__}")
    try:
        return name, json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return name, raw


class TemplateProtocol:
    """The model's own protocol: its chat template renders the tools; calls are decoded as it writes them.

    Args:
        template: The chat template's Jinja source (the GGUF's ``tokenizer.chat_template``).
        bos_token: The model's beginning-of-text token, for templates that write it.
        eos_token: The model's end-of-text token.

    Raises:
        UserError: The template has no tool-call syntax this protocol knows (Hermes/Qwen
            ``<tool_call>``), or is not valid Jinja.
    """

    name = "template"

    def __init__(self, template: str, bos_token: str = "", eos_token: str = "") -> None:
        if "<tool_call>" not in template or "tools" not in template:
            raise UserError(
                "tool_protocol='template' needs a chat template that renders tools and writes "
                "<tool_call> (Qwen2.5, Hermes); this model's does not: use tool_protocol='json'"
            )
        from jinja2 import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        environment.filters["tojson"] = _tojson
        environment.globals["raise_exception"] = _raise
        environment.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
        try:
            self._template = environment.from_string(template)
        except TemplateError as exc:
            raise UserError(f"the model's chat template is not valid Jinja: {exc}") from exc
        self._tokens = {"bos_token": bos_token, "eos_token": eos_token}

    def prompt(self, plan: ToolPlan, messages: Sequence[object]) -> Prompt:
        """The conversation rendered by the template, ready for the reply.

        Every offered tool is shown while a call may be made; for an answer (``tool_choice='none'``)
        none is: a small model shown tools writes a call as text instead of answering.
        """
        shown = plan.functions if plan.allowed else {}
        tools = [{"type": "function", "function": function} for function in shown.values()] or None
        return str(
            self._template.render(
                messages=_template_messages(messages), tools=tools, add_generation_prompt=True, **self._tokens
            )
        )

    def constraint(self, plan: ToolPlan) -> dict[str, object]:
        """An llguidance grammar: up to `MAX_PARALLEL_CALLS` calls, or (when allowed) an answer."""
        options = plan.call_options("name")
        starts = []
        lines = ["%llguidance {}"]
        if options:
            call = options[0] if len(options) == 1 else {"oneOf": options}
            call = {**call, "x-guidance": _COMPACT}  # written as the template shows calls: one line
            lines.append(f'calls: call ("\\n" call){{0,{MAX_PARALLEL_CALLS - 1}}}')
            lines.append(f'call: "<tool_call>\\n" %json {json.dumps(call)} "\\n</tool_call>"')
            starts.append("calls")
        if not plan.required:
            if plan.answer_schema is None:
                lines.append(f"answer: {_ANSWER_REGEX}")
            else:
                lines.append(f"answer: %json {json.dumps(plan.answer_schema)}")
            starts.append("answer")
        lines.insert(1, "start: " + " | ".join(starts))
        return {"grammar": "\n".join(lines) + "\n"}

    def parse(self, plan: ToolPlan, reply: str) -> list[ToolCall] | str:
        """The calls in `reply` (identical ones once), or its answer; raises `InvalidToolReply`."""
        if not reply.lstrip().startswith("<tool_call>"):
            if plan.required:
                raise InvalidToolReply("no <tool_call>")
            if plan.answer_schema is not None:
                return json.dumps(_json_or_raise(reply), ensure_ascii=False)  # the output type validates it
            return self._answer(plan, reply)
        calls: list[ToolCall] = []
        seen: set[str] = set()
        for body in _CALL.findall(reply):
            data = _json_or_raise(body)
            if not isinstance(data, dict):
                raise InvalidToolReply("a <tool_call> that is not a JSON object")
            key = json.dumps(data, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            calls.append(plan.call(data.get("name"), data.get("arguments", {})))
        if not calls or not reply.rstrip().endswith("</tool_call>"):
            raise InvalidToolReply("a <tool_call> that does not end")
        return calls

    @staticmethod
    def _answer(plan: ToolPlan, reply: str) -> list[ToolCall] | str:
        """A text answer, or the calls it writes as text (fenced or bare JSON) when a call may be made.

        The grammar keeps an answer from starting as JSON or markup, but a small model that
        means to call writes the call further in (``Here is the call: ```json {...}```"``,
        ``({"name": ...``). Where calls are allowed they are taken as calls; an answer that
        still holds one is invalid (the constrained tries go on).
        """
        found = find_tool_calls(reply, plan.allowed or list(plan.functions), formats=_TEXT_FORMATS)
        if found.calls and plan.allowed and not found.problems:
            return [plan.call(call.name, json.loads(call.arguments)) for call in found.calls]
        if found.found or _CALL_TEXT.search(reply):
            raise InvalidToolReply("a tool call written into the answer")
        return reply

    def answer_so_far(self, reply: str) -> str | None:
        return reply if reply and reply[0] not in _ANSWER_START and not reply[0].isspace() else None


def _json_or_raise(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidToolReply(f"not complete JSON ({exc.msg})") from None
