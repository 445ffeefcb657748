"""Message rendering and schema-constrained tool calling for `LlamaCppModel` (private).

Small local models do not produce valid free-text tool calls, so `LlamaCppModel.complete`
constrains the reply to a JSON schema built here::

    {"oneOf": [{"tool": "<name>", "arguments": {...tool parameters...}}, ..., {"answer": "<text>"}]}

and checks the result with `validate` (a small JSON-schema subset: the grammar already
enforces structure; validation catches replies cut off or produced under a loosened schema).
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Mapping, Sequence

from ..exceptions import UserError
from ._decoded import json_array, json_object
from ._openai_protocol import ToolChoice, ToolSpec
from .response import ModelResponse, ToolCall
from .templates import Dialog, MetaTemplate, _TemplateParser

__all__ = [
    "PLAIN_ANSWER",
    "InvalidToolReply",
    "ToolPlan",
    "answer_so_far",
    "is_json_debris",
    "normalize_messages",
    "validate",
]

_CHAT_ROLES = frozenset({"system", "user", "assistant"})


def _text(content: object) -> str:
    """Message content as text (OpenAI content-part lists are joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                parts.append(str(part.get("text", "")))
            else:
                parts.append(str(part))
        return "".join(parts)
    return str(content)


def _call_json(call: Mapping[str, object] | ToolCall) -> tuple[str, str]:
    """`(name, '{"tool": ..., "arguments": ...}')` for an OpenAI tool call (or `ToolCall`)."""
    raw: object
    if isinstance(call, ToolCall):
        name, raw = call.name, call.arguments
    else:
        function = json_object(call.get("function") or call)
        name, raw = str(function.get("name", "")), function.get("arguments") or "{}"
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        args = raw
    return name, json.dumps({"tool": name, "arguments": args}, ensure_ascii=False)


def normalize_messages(messages: Sequence[object]) -> list[dict[str, str]]:
    """OpenAI-style messages as plain ``{role, content}`` turns a GGUF chat template renders.

    Assistant tool calls become the JSON the model is asked to write (so history looks
    like its own output); tool results and roles a chat template does not know
    (``tool``, ``environment``, ``function``...) become user turns.
    """
    out: list[dict[str, str]] = []
    call_names: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, Mapping):
            raise UserError(f"a message must be a dict with 'role' and 'content', not {type(message).__name__}")
        role = str(message.get("role", "user"))
        content = _text(message.get("content"))
        if role == "assistant" and message.get("tool_calls"):
            rendered = []
            for call in message["tool_calls"]:
                name, text = _call_json(call)
                call_id = call.id if isinstance(call, ToolCall) else call.get("id")
                if call_id:
                    call_names[str(call_id)] = name
                rendered.append(text)
            content = "\n".join([content, *rendered]) if content else "\n".join(rendered)
        elif role == "tool":
            name = message.get("name") or call_names.get(str(message.get("tool_call_id")), "the tool")
            content = f"Result of {name}:\n{content}"
            role = "user"
        elif role not in _CHAT_ROLES:
            role = "user"
        out.append({"role": role, "content": content})
    return out


class _ChatTemplate(_TemplateParser):
    """`template_parser` of `LlamaCppModel`: messages stay messages (the GGUF's template renders them)."""

    def __init__(self, meta_template: MetaTemplate | None = None) -> None:
        super().__init__(meta_template)

    def __call__(self, dialog: Dialog) -> list[dict[str, str]]:
        """`dialog` as plain ``{role, content}`` turns (see `normalize_messages`)."""
        return normalize_messages(dialog)


# -- schema-constrained tool calls --------------------------------------------------------


class InvalidToolReply(ValueError):
    """A constrained reply that is not a valid tool call or answer (`reason` says why)."""


def _function(tool: ToolSpec) -> dict[str, object]:
    """The ``{name, description, parameters}`` of an OpenAI tool dict or a bare function dict."""
    if not isinstance(tool, Mapping):
        raise UserError(f"a tool must be a dict (OpenAI tool or function schema), not {type(tool).__name__}")
    function = tool.get("function", tool) if tool.get("type", "function") == "function" else tool
    if not isinstance(function, Mapping) or not function.get("name"):
        raise UserError(f"tool {tool!r} has no function name")
    return dict(function)


def _arguments_schema(function: Mapping[str, object]) -> dict[str, object]:
    schema = copy.deepcopy(dict(json_object(function.get("parameters") or {"type": "object", "properties": {}})))
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
        # Small models invent keys; the tool cannot take them.
        schema.setdefault("additionalProperties", False)
    return schema


def _chosen_name(tool_choice: ToolChoice) -> str | None:
    if isinstance(tool_choice, Mapping):
        function = tool_choice.get("function", tool_choice)
        return str(function["name"]) if isinstance(function, Mapping) and "name" in function else None
    if isinstance(tool_choice, str) and tool_choice not in ("auto", "required", "none"):
        return tool_choice
    return None


class ToolPlan:
    """The constrained-decoding plan of one `complete` call with tools.

    Args:
        tools: OpenAI tool dicts (``{"type": "function", "function": {...}}``) or function dicts.
        tool_choice: ``None``/``'auto'`` (call a tool or answer), ``'required'`` (call some tool),
            ``'none'`` (answer in text: the reply is constrained to ``{"answer": ...}``, so a
            model that saw tool calls in the history cannot imitate one), or a function name /
            ``{"type": "function", "function": {"name": ...}}`` (call that tool).
        answer_schema: The JSON Schema an answer must match (an agent's output type; see
            `plait.outputs`): the answer is then ``{"answer": <that JSON>}`` and comes back as
            its JSON text. None: the answer is text.
    """

    def __init__(
        self,
        tools: Sequence[ToolSpec],
        tool_choice: ToolChoice = None,
        answer_schema: Mapping[str, object] | None = None,
    ) -> None:
        self.answer_schema = answer_schema
        functions = [_function(tool) for tool in tools]
        self.functions = {str(f["name"]): f for f in functions}
        self.schemas = {str(f["name"]): _arguments_schema(f) for f in functions}
        self.descriptions = {str(f["name"]): str(f.get("description") or "") for f in functions}
        chosen = _chosen_name(tool_choice)
        if chosen is not None and chosen not in self.schemas:
            raise UserError(f"tool_choice names {chosen!r}, which is not among the tools {sorted(self.schemas)}")
        self.allowed = [chosen] if chosen else [] if tool_choice == "none" else list(self.schemas)
        self.required = chosen is not None or tool_choice == "required"
        self.loose = False  # set when the engine cannot compile a tool's parameter schema

    def call_options(self, name_key: str) -> list[dict[str, object]]:
        """One JSON schema per allowed tool: ``{name_key: <its name>, "arguments": <its parameters>}``."""
        return [
            {
                "type": "object",
                "properties": {
                    name_key: {"const": name},
                    "arguments": {"type": "object"} if self.loose else self.schemas[name],
                },
                "required": [name_key, "arguments"],
                "additionalProperties": False,
            }
            for name in self.allowed
        ]

    def schema(self) -> dict[str, object]:
        """The JSON schema the reply is constrained to."""
        options = self.call_options("tool")
        if not self.required:
            options.append(
                {
                    "type": "object",
                    "properties": {"answer": self._answer_schema()},
                    "required": ["answer"],
                    "additionalProperties": False,
                }
            )
        return options[0] if len(options) == 1 else {"oneOf": options}

    def is_debris(self, reply: ModelResponse) -> bool:
        """Whether `reply` is a text answer that is a broken piece of JSON (`is_json_debris`)."""
        return self.answer_schema is None and not reply.tool_calls and is_json_debris(reply.content)

    @staticmethod
    def ask_for_words(turns: list[dict[str, str]]) -> list[dict[str, str]]:
        """`turns` and a request for the answer in plain words (`PLAIN_ANSWER`), after JSON debris."""
        return [*turns, {"role": "user", "content": PLAIN_ANSWER}]

    def _answer_schema(self) -> Mapping[str, object]:
        return {"type": "string"} if self.answer_schema is None else self.answer_schema

    def instructions(self) -> str:
        """The system-prompt text that tells the model the tools and the reply format."""
        if not self.allowed:
            return f"Answer the user now, without tools. {self._answer_line('Reply with exactly one JSON object')}"
        lines = ["You can use these tools:"]
        for name in self.allowed:
            params = json.dumps(self.schemas[name], ensure_ascii=False)
            description = f": {self.descriptions[name]}" if self.descriptions[name] else ""
            lines.append(f"- {name}{description}\n  arguments (JSON schema): {params}")
        lines.append("Reply with exactly one JSON object and nothing else.")
        lines.append('To call a tool: {"tool": "<tool name>", "arguments": {<arguments>}}')
        if self.required:
            lines.append("You must call a tool now.")
        else:
            lines.append(self._answer_line("To answer without a tool"))
        return "\n".join(lines)

    def inject(self, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        """`messages` with the tool instructions added to (or as) the system message."""
        text = self.instructions()
        if messages and messages[0]["role"] == "system":
            first = {"role": "system", "content": f"{messages[0]['content']}\n\n{text}".lstrip()}
            return [first, *messages[1:]]
        return [{"role": "system", "content": text}, *messages]

    def _answer_line(self, lead: str) -> str:
        if self.answer_schema is None:
            return f'{lead}: {{"answer": "<your reply>"}}'
        schema = json.dumps(self.answer_schema, ensure_ascii=False, separators=(",", ":"))
        return f'{lead}: {{"answer": <JSON that matches this schema>}}, the schema: {schema}'

    def call(self, name: object, arguments: object) -> ToolCall:
        """A call of an allowed tool with arguments that fit its schema; raises `InvalidToolReply`."""
        if name not in self.allowed:
            raise InvalidToolReply(f"unknown tool {name!r}")
        problem = validate(arguments, self.schemas[str(name)])
        if problem:
            raise InvalidToolReply(f"arguments of {name}: {problem}")
        return ToolCall(
            id=f"call_{uuid.uuid4().hex[:24]}", name=str(name), arguments=json.dumps(arguments, ensure_ascii=False)
        )

    def parse(self, reply: str) -> ToolCall | str:
        """The `ToolCall` or answer text in a constrained reply; raises `InvalidToolReply`."""
        try:
            data = json.loads(reply)
        except json.JSONDecodeError as exc:
            raise InvalidToolReply(f"not complete JSON ({exc.msg})") from None
        if not isinstance(data, dict):
            raise InvalidToolReply("not a JSON object")
        if "tool" in data:
            return self.call(data.get("tool"), data.get("arguments", {}))
        if not self.required and "answer" in data:
            if self.answer_schema is not None:
                return json.dumps(data["answer"], ensure_ascii=False)  # the output type validates it
            if isinstance(data["answer"], str):
                return str(data["answer"])
        raise InvalidToolReply("neither a tool call nor an answer")


_ANSWER_OPENING = re.compile(r'\s*\{\s*"answer"\s*:\s*"')
_ESCAPE = re.compile(r'\\(?:u[0-9a-fA-F]{4}\\u[0-9a-fA-F]{4}|u[0-9a-fA-F]{4}|["\\/bfnrt])')


def answer_so_far(reply: str) -> str | None:
    """The answer text in a constrained reply that is still being generated.

    ``'{"answer": "Hel'`` gives ``'Hel'``; a reply that is not (yet) an answer gives None.
    JSON escapes are decoded; one still incomplete at the end is left out until it is whole.
    """
    opening = _ANSWER_OPENING.match(reply)
    if opening is None:
        return None
    parts: list[str] = []
    index = opening.end()
    while index < len(reply):
        char = reply[index]
        if char == '"':
            break
        if char != "\\":
            parts.append(char)
            index += 1
            continue
        escape = _ESCAPE.match(reply, index)
        if escape is None:
            break  # incomplete (or invalid) escape: wait for more text
        decoded = json.loads(f'"{escape.group()}"')
        if "\ud800" <= decoded[-1] <= "\udfff":
            break  # half a surrogate pair: the other half is still to come
        parts.append(decoded)
        index = escape.end()
    return "".join(parts)


# -- a small JSON-schema validator ---------------------------------------------------------

_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}


def _type_ok(value: object, expected: object) -> bool:
    names = expected if isinstance(expected, list) else [expected]
    for name in names:
        kind = _TYPES.get(name) if isinstance(name, str) else None
        if kind is None:
            return True  # a type this validator does not know: accept
        if isinstance(value, bool) and name in ("integer", "number"):
            continue
        if isinstance(value, kind):
            return True
    return False


def _validate_object(value: Mapping[str, object], schema: Mapping[str, object], where: str) -> str | None:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        properties = {}
    for key in json_array(schema.get("required")):
        if key not in value:
            return f"{where}: missing required key {key!r}"
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            problem = validate(item, properties[key], f"{where}.{key}")
        elif extra is False:
            problem = f"{where}: unexpected key {key!r}"
        elif isinstance(extra, Mapping):
            problem = validate(item, extra, f"{where}.{key}")
        else:
            problem = None
        if problem:
            return problem
    return None


def validate(value: object, schema: object, where: str = "$") -> str | None:
    """The first way `value` breaks `schema` (``None`` when it fits).

    Covers ``type``, ``enum``, ``const``, ``properties``/``required``/``additionalProperties``,
    ``items``, ``anyOf``/``oneOf``/``allOf``; other keywords are accepted as is.
    """
    if not isinstance(schema, Mapping):
        return None
    if "type" in schema and not _type_ok(value, schema["type"]):
        return f"{where}: expected {schema['type']}, got {type(value).__name__}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: {value!r} is not one of {schema['enum']}"
    if "const" in schema and value != schema["const"]:
        return f"{where}: expected {schema['const']!r}"
    for key in ("anyOf", "oneOf"):
        if key in schema and all(validate(value, option, where) for option in schema[key]):
            return f"{where}: matches none of {key}"
    for option in schema.get("allOf") or ():
        problem = validate(value, option, where)
        if problem:
            return problem
    if isinstance(value, dict):
        return _validate_object(value, schema, where)
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            problem = validate(item, schema["items"], f"{where}[{index}]")
            if problem:
                return problem
    return None


PLAIN_ANSWER = "Now answer my question in one or two plain sentences, using the results above. Do not write JSON."
"""Asked of the model when its constrained answer was a piece of JSON (`is_json_debris`)."""


def is_json_debris(answer: str) -> bool:
    """Whether a text answer is a broken piece of JSON (``{``, ``[{"city": "Par``), not an answer.

    Small models asked to answer after a JSON tool result start writing JSON inside the
    answer string, and the string's grammar ends it at their first unescaped quote: what is
    left is a fragment. A complete JSON value (``18``, ``true``, an object) is left alone.
    """
    text = answer.strip()
    if not text or text[0] not in "{[":
        return False
    try:
        json.loads(text)
    except ValueError:
        return True
    return False
