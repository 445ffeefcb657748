"""An agent as a tool: what `AgentModule.as_tool` returns (and the MCP server serves).

The tool's parameters are one ``message`` string, or the fields of a typed input (a pydantic
model, a dataclass, a `TypedDict`). Its result is the sub-agent's answer: the reply text, or
its typed output as JSON when the agent has an ``output_type``.

The sub-agent runs in the caller's driver: the tool call's flow yields an `AgentCall`
effect, so the sub-agent's model and tool calls meet the caller's interceptors (replay,
tracing) and the caller's ``stream_events`` report ``SubAgentStarted``/``SubAgentEnded``.

It runs in its own session, scoped under the caller's, as `history` declares:

* ``"per_call"``: a fresh session per call, ``"<session>/<tool name>/<n>"`` (``n`` = 1, 2, ...:
  the first number whose session holds no state yet), kept afterwards;
* ``"per_conversation"``: one session per caller session, ``"<session>/<tool name>"``, so the
  sub-agent remembers earlier calls of the same conversation.

Either way its memory shows in the sub-agent's ``state_dict(<that session>)``.

A sub-agent whose tool needs a person's approval cannot be approved from inside the call:
its paused run is dropped (the sub-session is reset) and the calling model is told so.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from typing import Any, Literal, cast

from pydantic import TypeAdapter

from ..actions._json_schema import api_description
from ..actions.base_action import BaseAction, describe_exception
from ..effects import AgentCall, Flow
from ..exceptions import ParseError, UserError
from ..schema import ActionReturn, ActionStatusCode, AgentMessage, AgentStatusCode
from ..types import JSONValue
from ..untrusted import as_text

__all__ = ["AgentTool", "History"]

History = Literal["per_call", "per_conversation", "caller"]
"""Which session the sub-agent runs in (``"caller"``: the caller's own, as the MCP server does)."""

_HISTORIES: tuple[str, ...] = ("per_call", "per_conversation", "caller")


class AgentTool(BaseAction, register=False):
    """`agent` as a tool (see the module docstring; built by `AgentModule.as_tool`).

    Args:
        agent: A plait agent (sync or async; an async one needs an async caller).
        name: The tool name; defaults to the agent's name.
        description: What the tool does, for the model; defaults to the agent's description.
        input_type: The type of the tool's arguments (its fields are the parameters); None:
            one ``message`` string.
        history: ``"per_call"``, ``"per_conversation"`` or ``"caller"``.

    Raises:
        UserError: `history` is not one of those, or `input_type` has no object JSON Schema.
    """

    def __init__(
        self,
        agent: Any,
        name: str | None = None,
        description: str | None = None,
        input_type: Any = None,
        history: History = "per_call",
    ) -> None:
        if history not in _HISTORIES:
            raise UserError(f"history must be one of {', '.join(map(repr, _HISTORIES))}, not {history!r}")
        self.agent = agent
        self.history = history
        tool_name = name or str(getattr(agent, "name", "") or type(agent).__name__)
        text = description or str(getattr(agent, "description", "") or "")
        text = text or f"Send a message to the agent {tool_name}; get its answer."
        self.input_adapter: TypeAdapter[Any] | None = None
        spec: dict[str, Any]
        if input_type is None:
            spec = {
                "name": tool_name,
                "description": text,
                "parameters": [{"name": "message", "type": "STRING", "description": "What to tell the agent."}],
                "required": ["message"],
            }
        else:
            self.input_adapter = TypeAdapter(input_type)
            schema = cast("dict[str, JSONValue]", self.input_adapter.json_schema())
            if schema.get("type") != "object" or not isinstance(schema.get("properties"), Mapping):
                raise UserError(f"input_type {input_type!r} must have fields (a pydantic model, dataclass, TypedDict)")
            spec = api_description({"name": tool_name, "description": text, "inputSchema": schema})
        super().__init__(spec)

    def run(self, **arguments: Any) -> str:  # pragma: no cover - call_flow runs the agent; this names the API
        """Ask the agent (run through `call_flow`, never called directly)."""
        raise NotImplementedError

    def session_for(self, session_id: Hashable | None) -> Hashable:
        """The sub-agent's session for a call from the caller's `session_id` (see the module docstring)."""
        caller = 0 if session_id is None else session_id
        if self.history == "caller":
            return caller
        if self.history == "per_conversation":
            return f"{caller}/{self.name}"
        taken: set[Hashable] = self.session_state(caller).setdefault("running", set())
        n = 1
        while f"{caller}/{self.name}/{n}" in taken or any(self.agent.state_dict(f"{caller}/{self.name}/{n}").values()):
            n += 1
        session = f"{caller}/{self.name}/{n}"
        taken.add(session)
        return session

    def message_for(self, arguments: Mapping[str, Any]) -> str:
        """What the sub-agent is told: the ``message``, or the typed input validated, as JSON.

        Raises:
            ParseError: The arguments do not fit the input type.
        """
        if self.input_adapter is None:
            message = arguments.get("message")
            if not isinstance(message, str):
                raise ParseError(f"{self.name} takes one string argument 'message'")
            return message
        try:
            value = self.input_adapter.validate_python(dict(arguments))
        except Exception as exc:
            raise ParseError(f"the arguments do not fit {self.name}'s input: {describe_exception(exc)}") from exc
        return json.dumps(self.input_adapter.dump_python(value, mode="json"), ensure_ascii=False)

    def answer_of(self, reply: AgentMessage) -> str:
        """The result text: the typed output as JSON when the agent has one, else the reply's text."""
        spec = getattr(self.agent, "output_type", None)
        if spec is not None and reply.formatted is not None:
            return json.dumps(spec.adapter.dump_python(reply.formatted, mode="json"), ensure_ascii=False)
        return as_text(reply.content)

    def call_flow(self, inputs: object, name: str, session_id: Hashable | None) -> Flow[ActionReturn]:
        """Parse the arguments, run the agent in its session as an `AgentCall`, answer with its reply."""
        try:
            args = dict(self.parser.parse_inputs(inputs, "run"))
            message = self.message_for(args)
        except ParseError as exc:
            return self._failed({"inputs": inputs}, exc.err_msg, ActionStatusCode.ARGS_ERROR)
        except Exception as exc:
            return self._failed({"inputs": inputs}, describe_exception(exc), ActionStatusCode.ARGS_ERROR)
        session = self.session_for(session_id)
        try:
            reply: AgentMessage = yield AgentCall(self.agent, (message,), session)
        except Exception as exc:
            return self._failed(args, f"{self.name} failed: {describe_exception(exc)}", ActionStatusCode.API_ERROR)
        finally:
            self.session_state(0 if session_id is None else session_id).get("running", set()).discard(session)
        if reply.stream_state == AgentStatusCode.INTERRUPTED:
            self.agent.reset(session, recursive=True)  # nobody here can approve: drop the paused run
            text = (
                f"{self.name} paused for a person's approval of a tool call, which cannot be given inside a tool call"
            )
            return self._failed(args, text, ActionStatusCode.API_ERROR)
        return self.wrap_result(
            ActionReturn(result=[{"type": "text", "content": self.answer_of(reply)}]), args, self.name
        )

    def _failed(self, args: dict[str, object], message: str, state: int) -> ActionReturn:
        return ActionReturn(args=args, type=self.name, errmsg=message, state=state)
