"""An agent as a tool: what `AgentModule.as_tool` returns (and the MCP server serves).

The tool's parameters are one ``message`` string, or the fields of a typed input (a pydantic
model, a dataclass, a `TypedDict`). Its result is the sub-agent's answer: the reply text, or
its typed output as JSON when the agent has an ``output_type``.

The sub-agent runs in the caller's driver: the tool call's flow yields an `AgentCall`
effect, so the sub-agent's model and tool calls meet the caller's interceptors (replay,
tracing) and the caller's ``stream_events`` report ``SubAgentStarted``/``SubAgentEnded``.

It runs in its own session, scoped under the caller's, as `history` declares:

* ``"per_call"``: a fresh session per call, named by the model's id for the call,
  ``"<session>/<call id>"`` (``"<session>/<call id>/<n>"``, ``n`` = 2, 3, ..., when that one
  already holds a conversation; ``"<session>/<tool name>/<n>"`` for a call made outside a
  tool loop, which has no id), kept afterwards;
* ``"per_conversation"``: one session per caller session, ``"<session>/<tool name>"``, so the
  sub-agent remembers earlier calls of the same conversation;
* ``"caller"``: the caller's own session.

Either way its memory shows in the sub-agent's ``state_dict(<that session>)``.

Approval: when a tool of the sub-agent needs a person's approval, the sub-agent's run pauses
and stays paused in its session; called from a tool loop, this tool answers with the pause
(`plait.agents.run_state.sub_pause`), so the caller's run pauses too, listing the waiting
calls as ``"<call id>/<their id>"``. ``caller.resume({...})`` hands the decisions to the
paused run (`plait.agents.decisions.decide`) and runs this call again, which then goes on with
that run (nothing it did before the pause runs again) and answers with its reply. Called
outside a tool loop (the MCP server), nobody can approve: the paused run is dropped and the
caller is told so.
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
from ..schema import ActionReturn, ActionStatusCode, AgentMessage, AgentStatusCode, PendingCall
from ..types import JSONValue
from ..untrusted import as_text
from .run_state import SUB_PAUSED

__all__ = ["AgentTool", "History", "paused_return"]

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

    def session_for(self, session_id: Hashable | None, call_id: str | None = None) -> tuple[Hashable, bool]:
        """The sub-agent's session for a call (see the module docstring), and whether its paused run goes on there.

        A session whose paused run has every call decided is that call's, made again after
        the caller's resume: the run goes on there.
        """
        caller = 0 if session_id is None else session_id
        if self.history == "caller":
            return caller, self._goes_on(caller, call_id)
        if self.history == "per_conversation":
            session = f"{caller}/{self.name}"
            return session, self._goes_on(session, call_id)
        taken: set[Hashable] = self.session_state(caller).setdefault("running", set())
        stem = f"{caller}/{self.name}" if call_id is None else f"{caller}/{call_id}"
        n = 1 if call_id is None else 0
        while True:
            session = f"{stem}/{n}" if n else stem
            if session not in taken:
                if self._goes_on(session, call_id):
                    break
                if not any(self.agent.state_dict(session).values()):
                    break
            n = n + 1 if n else 2
        taken.add(session)
        return session, self._goes_on(session, call_id)

    def _goes_on(self, session: Hashable, call_id: str | None) -> bool:
        """Whether the sub-agent has a paused run in `session` whose calls are all decided (a call from a loop only)."""
        if call_id is None:
            return False
        run = self.agent.run_state(session)
        return run is not None and bool(run.pending) and not run.waiting

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

    def call_flow(
        self, inputs: object, name: str, session_id: Hashable | None, call_id: str | None = None
    ) -> Flow[ActionReturn]:
        """Parse the arguments, run the agent in its session as an `AgentCall`, answer with its reply.

        `call_id` is the model's id for the call (from a tool loop): it names a per-call
        session, and a pause of the agent is answered as one the caller can resume.
        """
        try:
            args = dict(self.parser.parse_inputs(inputs, "run"))
            message = self.message_for(args)
        except ParseError as exc:
            return self._failed({"inputs": inputs}, exc.err_msg, ActionStatusCode.ARGS_ERROR)
        except Exception as exc:
            return self._failed({"inputs": inputs}, describe_exception(exc), ActionStatusCode.ARGS_ERROR)
        session, goes_on = self.session_for(session_id, call_id)
        call = AgentCall(self.agent, () if goes_on else (message,), session, resume=goes_on, tool_call=call_id)
        try:
            reply: AgentMessage = yield call
        except Exception as exc:
            return self._failed(args, f"{self.name} failed: {describe_exception(exc)}", ActionStatusCode.API_ERROR)
        finally:
            self.session_state(0 if session_id is None else session_id).get("running", set()).discard(session)
        if reply.stream_state == AgentStatusCode.INTERRUPTED:
            if call_id is not None:  # the caller's loop pauses too and resumes this run
                return paused_return(args, self.name, session, reply)
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


def paused_return(args: dict[str, object], name: str, session: Hashable, reply: AgentMessage) -> ActionReturn:
    """A tool call's answer when the agent it ran paused: its session and waiting calls (`run_state.sub_pause`)."""
    calls = (
        [
            {"id": call.id, "name": call.name, "arguments": call.arguments}
            for call in reply.content
            if isinstance(call, PendingCall)
        ]
        if isinstance(reply.content, list)
        else []
    )
    paused = {"type": SUB_PAUSED, "content": {"session": session, "calls": calls}}
    return ActionReturn(args=args, type=name, result=[paused], state=ActionStatusCode.ING)
