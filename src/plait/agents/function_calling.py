"""`FunctionCallingAgent`: an agent that uses the model's native tool calling.

Each turn sends the conversation plus the tools' JSON Schemas (``llm.complete(messages,
tools=...)``). When the model asks for tools, every call in the turn is dispatched through
the executor (concurrently for the async agent), the results go back to the model as
``tool`` messages, and the loop continues until the model answers in text. The last
of the `max_turn` model calls is made with ``tool_choice='none'``, so a final answer always
arrives (`plait.agents.tool_loop`). The whole trajectory (tool calls and results) is kept in the
session's memory, so it is part of `state_dict` and of the next turn's context.

A call may add tools the agent does not run (``external_tools=[OpenAI function tools]``, and
``external_tools_only=True`` to offer only those): a call to one pauses the run for its caller
to answer with ``resume({call_id: ToolOutput(text)})`` (`plait.agents.external_tools`).

Works with any model that has ``complete(messages, tools=..., tool_choice=...)`` returning a
`ModelResponse`: `GPTAPI` against OpenAI-compatible servers, and the embedded
`LlamaCppModel`, which constrains decoding to the tools' schemas.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, ClassVar

from ..effects import Call, Effect, Flow, ToolCall
from ..exceptions import UserError
from ..llms.response import ModelResponse, ToolCallsSoFar, reasoning_so_far
from ..llms.text_tool_calls import check_formats
from ..memory.base_memory import Memory
from ..schema import AgentMessage, AgentStatusCode, FunctionCall, Reasoning
from ..untrusted import decode_arguments
from ._reply_info import reply_info
from ._text_calls import OBSERVER, HeldMarkup, offered_tools, read_reply
from .agent import Agent, AsyncAgent, AsyncStreamingAgent, StreamingAgent
from .aggregator.function_call_aggregator import FunctionCallAggregator
from .external_tools import EXTERNAL_ONLY_KEY, EXTERNAL_TOOLS_KEY, check_external_tools, external_names
from .handoff import HANDED_ON, Handoff, HandoffTool, as_handoffs, handing_on, own_view, taken
from .routing import ROUTED, ToolRouter
from .run_state import PlannedCall, RunState
from .tool_agent import ToolLoopCore
from .tool_loop import EXTERNAL, Act, Ask, Decision, Done, LoopProtocol, build_executor, check_budget

__all__ = [
    "AsyncFunctionCallingAgent",
    "AsyncStreamingFunctionCallingAgent",
    "FunctionCallingAgent",
    "FunctionCallingProtocol",
    "StreamingFunctionCallingAgent",
]


class FunctionCallingCore(ToolLoopCore):
    """Answers with the help of tools called through the model's native function calling.

    `FunctionCallingAgent` and its async / streaming siblings call it in their mode.

    Args:
        llm: A model with ``complete(messages, tools=...)`` (config dicts accepted).
        actions: Tools (instances, classes, config dicts or plain functions) or a ready
            `ActionExecutor`.
        template: The system instruction.
        max_turn: Model calls per run; the last one is made with ``tool_choice='none'``
            so a final answer always arrives.
        tool_choice: Passed to the model on tool rounds (``'auto'``, ``'required'``...); a call's
            ``tool_choice=`` keyword overrides it. ``'routed'`` (or a `ToolRouter`) decides per
            question (`plait.agents.routing`): the Calculator for arithmetic, no tool for small talk,
            a tool for a question in its own words, and the tools again for a part no call covered.
        reset_tool_choice: What a forcing choice (``'required'``, one function) becomes once a
            tool has run, so the model can answer: ``'auto'`` (default), ``'none'`` (answer
            now), or None to keep forcing.
        text_call_formats: The markup read as tool calls in a reply that has no native ones
            (a server without a tool parser for the model): names from
            `plait.llms.text_tool_calls.FORMATS`; None (default) reads them all, ``()`` none.
            The markup is never shown nor answered: calls to offered tools run, anything
            else is told to the model (`plait.agents._text_calls`).
        handoffs: Agents (or `plait.agents.handoff.Handoff`s) this agent may hand the
            conversation to: the model sees a ``transfer_to_<name>`` tool for each, and the
            target answers the turn (and, sticky, the later ones) with the history its handoff
            declares (`plait.agents.handoff`). They become sub-agents (``to_<name>``).
        **kwargs: Other `Agent` arguments (``memory``, ``name``, ``hooks``...).

    Example:
        ```python
        agent = FunctionCallingAgent(GPTAPI('qwen2.5', api_base='http://127.0.0.1:8000/v1'), [Calculator()])
        agent('What is 37 * 91?').content
        ```
    """

    _executor_cls: ClassVar[str] = "ActionExecutor"
    takes_external_tools: ClassVar[bool] = True
    """Whether a call takes ``external_tools=`` (tools its caller runs; `plait.agents.external_tools`)."""

    def __init__(
        self,
        llm: object = None,
        actions: object = None,
        template: object = None,
        max_turn: int = 5,
        tool_choice: Any = "auto",
        *,
        reset_tool_choice: Any = "auto",
        text_call_formats: Sequence[str] | None = None,
        handoffs: Iterable[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("aggregator", FunctionCallAggregator())
        super().__init__(llm=llm, template=template, **kwargs)
        self.executor = build_executor(actions, self._executor_cls)
        self.handoffs: list[Handoff] = as_handoffs(handoffs)
        for handoff in self.handoffs:
            self.add_agent(handoff.tool_name.removeprefix("transfer_"), handoff.agent)
            self.executor.add_action(HandoffTool(handoff, self))
        self.max_turn = check_budget(max_turn)
        self.tool_choice = tool_choice
        self.reset_tool_choice = reset_tool_choice
        self.text_call_formats = None if text_call_formats is None else check_formats(text_call_formats)

    def get_prompt(self, session_id: Hashable = 0) -> list[dict[str, object]]:
        """The messages the LLM would receive for this session now (handoff targets' replies as its own turns)."""
        if not self.handoffs or self._memory is None:
            return super().get_prompt(session_id)
        view = Memory()
        view.memory = own_view(self, self._memory.get_memory(session_id))
        return self.aggregator.aggregate(view, self.name, self.output_format, self.template)

    def loop_protocol(self, inputs: Sequence[AgentMessage] = ()) -> FunctionCallingProtocol:
        """This agent's paradigm on the tool loop (for a new run on `inputs`, or a paused one to resume)."""
        return FunctionCallingProtocol(self, inputs)

    def answer_params(self, kwargs: Mapping[str, object]) -> Mapping[str, object]:
        """The call's keywords for the model: without the external tools (the run offers them), with the output type."""
        if EXTERNAL_TOOLS_KEY in kwargs or EXTERNAL_ONLY_KEY in kwargs:
            kwargs = {k: v for k, v in kwargs.items() if k not in (EXTERNAL_TOOLS_KEY, EXTERNAL_ONLY_KEY)}
        return super().answer_params(kwargs)

    def _turn(
        self, session_id: Hashable, params: Mapping[str, object], prompt: list[dict[str, object]] | None = None
    ) -> Effect[Any]:
        """One model turn on `prompt` (the session's): streamed when this agent and its model can, else ``complete``.

        Streaming needs a model whose ``stream_chat`` takes ``tools=`` (``llm.stream_tools``);
        the chunks pass through to the caller and the final one carries the `ModelResponse`. A
        non-streaming agent's ``complete`` call carries the same chunk mapping, so that
        ``stream_events`` can stream it too.
        When tools are offered, tool-call markup in the text is held back from the chunks (`HeldMarkup`).
        """
        prompt = self.get_prompt(session_id) if prompt is None else prompt
        if not getattr(self.llm, "stream_tools", False):
            return self.model_call("complete", prompt, session_id, params)
        offered = offered_tools(params.get("tools"))
        formats = self.text_call_formats
        held = HeldMarkup(offered, formats) if offered and (formats is None or formats) else None
        # also for `complete`: stream events may stream it (plait.events)
        each = partial(self._turn_chunk, held=held, last=[None])
        return self.model_call("stream_chat" if self._stream_forward else "complete", prompt, session_id, params, each)

    def _chat_flow(
        self, prompt: list[dict[str, object]], session_id: Hashable, params: Mapping[str, object]
    ) -> Flow[AgentMessage]:
        """A turn without tools on `prompt` (an output type's correction), as the tool turns are made."""
        response = _as_response((yield self._turn(session_id, params, prompt)))
        return self.make_response(response.content, extra_info=reply_info(response), reasoning=response.reasoning)

    def _turn_chunk(
        self, item: Any, held: HeldMarkup | None = None, last: list[object] | None = None
    ) -> AgentMessage | None:
        """A turn's stream item as this agent's chunk (None: nothing new to show); the END item's carries the reply.

        An item that only says more of a tool call being written (`ToolCallsSoFar`) gives no
        chunk: a Lagent stream shows text, and stream events read the calls from the item
        (`plait.events.ToolCallDelta`). `last` holds the turn's last chunk's text and reasoning.
        """
        status, text, extra = item
        if status != AgentStatusCode.END:
            shown = held.visible(text) if held is not None and isinstance(text, str) else text
            reasoning = reasoning_so_far(extra)  # the reasoning so far
            if last is not None:
                if isinstance(extra, ToolCallsSoFar) and last[0] == (shown, reasoning):
                    return None
                last[0] = (shown, reasoning)
            return self.make_response(shown, AgentStatusCode.STREAM_ING, reasoning=reasoning)
        if isinstance(extra, Reasoning):  # a plain stream's end: its text and the reasoning
            extra = ModelResponse(content=text, reasoning=extra)
        response = extra if isinstance(extra, ModelResponse) else (extra or {}).get("response")
        final = response if isinstance(response, ModelResponse) else ModelResponse(content=text)
        return AgentMessage(sender=self.name, content=text, extra_info={"response": final})


class FunctionCallingProtocol(LoopProtocol[FunctionCallingCore]):
    """Native tool calling on the tool loop: every call of a turn runs, the last call has ``tool_choice='none'``.

    The model's tool-call turn and each result go into the agent's memory (the
    `FunctionCallAggregator` writes them as ``tool_calls`` / ``tool`` messages).
    """

    name = "function_calling"

    def __init__(self, agent: FunctionCallingCore, inputs: Sequence[AgentMessage] = ()) -> None:
        super().__init__(agent)
        self._tools: list[dict[str, object]] | None = None
        self._before_turn: int | None = None  # the memory length before the last reply with calls
        self._router: ToolRouter | None = None
        self._question = "\n".join(m.content for m in inputs if isinstance(m.content, str))

    def begin(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> None:
        """The call's external tools and a routed tool choice go into the state.

        External tools are checked once; a routed choice (``'routed'``, a `ToolRouter`) is
        decided once, from the question.

        Raises:
            ExternalToolError: ``external_tools`` are not OpenAI function tools, or take an own tool's name.
        """
        handed = handing_on(self.agent, session_id) if self.agent.handoffs else None
        if handed is not None:  # the session is with a sticky handoff's target: this turn goes straight on
            state.pending = [handed]
        only = kwargs.get(EXTERNAL_ONLY_KEY, False)
        if not isinstance(only, bool):
            raise UserError(f"{EXTERNAL_ONLY_KEY} must be True or False, got {only!r}")
        if kwargs.get(EXTERNAL_TOOLS_KEY) is not None:
            own = () if only else [str(t["function"]["name"]) for t in self.agent.executor.openai_tools()]
            state.scratch[EXTERNAL_TOOLS_KEY] = check_external_tools(kwargs[EXTERNAL_TOOLS_KEY], own)
            state.scratch[EXTERNAL_ONLY_KEY] = only
        choice = kwargs.get("tool_choice", self.agent.tool_choice)
        if choice == ROUTED or isinstance(choice, ToolRouter):
            self._router = choice if isinstance(choice, ToolRouter) else ToolRouter()
            tools = self.agent.executor.openai_tools()
            state.scratch["tool_choice"] = self._router(self._question, list(self.agent.executor.keys()), tools)

    def _params(self, state: RunState, kwargs: Mapping[str, object], tool_choice: Any) -> dict[str, object]:
        kwargs = self.agent.answer_params(kwargs)  # a text reply is the answer: ask for the output type
        if self._tools is None:
            external = list(state.scratch.get(EXTERNAL_TOOLS_KEY) or [])
            own = [] if state.scratch.get(EXTERNAL_ONLY_KEY) else self.agent.executor.openai_tools()
            self._tools = [*own, *external]
        if not self._tools:
            return {k: v for k, v in kwargs.items() if k != "tool_choice"}
        return {**kwargs, "tools": self._tools, "tool_choice": tool_choice}

    def ask(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> Ask:
        """The conversation with the tools' schemas and the tool choice (the call's, else the agent's).

        A choice that forces a tool call (``'required'``, or one function) holds until a tool
        has run; later rounds ask with the agent's ``reset_tool_choice`` (``'auto'``, as the
        OpenAI Agents SDK does), or the model could never answer. A routed run requires the
        tools once more when its router finds a part of the question no call covered yet
        (`ToolRouter.again`; once per round of new calls).
        """
        choice = state.scratch.get("tool_choice") or kwargs.get("tool_choice", self.agent.tool_choice)
        reset = self.agent.reset_tool_choice
        if state.turns and reset is not None and (choice == "required" or isinstance(choice, Mapping)):
            choice = reset
        if state.turns and self._router is not None and self._missed(state):
            choice = "required"
        return Ask(self.agent._turn(session_id, self._params(state, kwargs, choice)))

    def _missed(self, state: RunState) -> bool:
        """Whether the router asks for the tools again (at most once after each round of new calls)."""
        called = state.scratch.get("called") or []
        if state.scratch.get("again_after", -1) >= len(called) or self._router is None:
            return False
        if not self._router.again(self._question, called, self.agent.executor.openai_tools()):
            return False
        state.scratch["again_after"] = len(called)
        return True

    def final(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> Ask:
        """The same request with ``tool_choice='none'`` (whatever the call asked): the model must answer in text."""
        return Ask(self.agent._turn(session_id, self._params(state, kwargs, "none")))

    def on_reply(self, state: RunState, reply: Any, session_id: Hashable) -> Decision:
        """Text ends the run (with the usage); tool calls run, native or written in the text (`read_reply`).

        Markup in the text that names no offered tool, or whose arguments are not a JSON
        object, never runs and is never the answer: the model is told what was wrong (after
        the results of the turn's other calls) and asked again.
        """
        read = read_reply(_as_response(reply), offered_tools(self._tools), self.agent.text_call_formats, state.turns)
        response = read.response
        if state.forced or not (response.tool_calls or read.problems):
            return Done(
                self.agent.make_response(
                    response.content, extra_info=reply_info(response), reasoning=response.reasoning
                )
            )
        calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls]
        turn = AgentMessage(
            sender=self.agent.name,
            content=response.content,
            formatted={"tool_calls": calls} if calls else None,
            reasoning=response.reasoning,
        )
        memory = self.agent._memory
        self._before_turn = memory.length(session_id) if memory is not None else None
        self.agent.update_memory(turn, session_id)
        if not calls:  # only markup that could not be used
            self._observe(read.problems, session_id)
            return None
        if read.problems:
            state.scratch[_PROBLEMS] = list(read.problems)
        external = external_names(state.scratch.get(EXTERNAL_TOOLS_KEY))
        planned = [PlannedCall(name=c.name, arguments=c.arguments, id=c.id) for c in response.tool_calls]
        for call in planned:
            if call["name"] in external:  # the caller runs it: the run waits for its output
                call["kind"] = EXTERNAL
        return Act(planned)

    def _observe(self, problems: Sequence[str], session_id: Hashable) -> None:
        """Tell the model what was wrong with the calls it wrote in its text (a user turn)."""
        if problems:
            self.agent.update_memory(AgentMessage(sender=OBSERVER, content="\n".join(problems)), session_id)

    def withdraw(self, state: RunState, session_id: Hashable) -> bool:
        """Take the last reply (all its calls made before) out of memory: the answer is asked on what ran.

        Measured (bench/models.py): shown its repeated call with the earlier result and `REUSED`,
        Qwen2.5-Coder-1.5B answered with the note itself or a refusal; without it, with the answer.
        """
        memory = self.agent._memory
        if memory is None or self._before_turn is None:
            return False
        memory.truncate(session_id, self._before_turn)
        self._before_turn = None
        return True

    def reported(self, call: PlannedCall) -> bool:
        """A turn handed on to a sticky handoff's target is not shown as a tool call (the target's events are)."""
        return call.get("kind") != HANDED_ON

    def tool_name(self, call: PlannedCall) -> str:
        """The executor's name of the tool a call names (the model's wire name may differ)."""
        return str(self.agent.executor.resolve_name(call["name"]))

    def tool_effect(self, state: RunState, call: PlannedCall, session_id: Hashable) -> Effect[Any]:
        """The call through the executor, its argument JSON decoded.

        Under ``external_tools_only`` the agent's own tools were not offered: a call to one does
        not run, and the model is told so.
        """
        executor = self.agent.executor
        if state.scratch.get(EXTERNAL_ONLY_KEY):
            text = f"{call['name']!r} is not one of the tools offered to you; call only those."
            return Call(self.refusal, (state, call, text))
        name = self.tool_name(call)
        request = AgentMessage(sender=self.agent.name, content=FunctionCall(name, decode_arguments(call["arguments"])))
        return ToolCall(executor, request, session_id)

    def on_results(
        self, state: RunState, calls: Sequence[PlannedCall], results: Sequence[Any], session_id: Hashable
    ) -> Decision:
        """Each result goes into memory as the answer to its call id; a routed run notes the calls' arguments."""
        if self._router is not None:
            arguments = [decode_arguments(call["arguments"]) for call in calls]
            called = state.scratch.setdefault("called", [])
            called.extend(args for args in arguments if isinstance(args, dict) and args not in called)
        for call, result in zip(calls, results, strict=True):
            if call.get("kind") == HANDED_ON:  # planned by the agent, not its model: not part of its conversation
                continue
            content = result.content if isinstance(result, AgentMessage) else result
            extra = {"tool_call_id": call.get("id"), "name": call["name"]}
            self.agent.update_memory(
                AgentMessage(sender="ActionExecutor", content=content, extra_info=extra), session_id
            )
        problems = state.scratch.pop(_PROBLEMS, None)
        self._observe(problems if isinstance(problems, list) else [], session_id)
        return self._handoff(calls, session_id)

    def _handoff(self, calls: Sequence[PlannedCall], session_id: Hashable) -> Decision:
        """The run's end when a transfer tool ran: the target's reply is the turn's (`plait.agents.handoff`)."""
        if not self.agent.handoffs:
            return None
        actions = self.agent.executor.actions
        for call in calls:
            reply = taken(actions.get(self.tool_name(call)), session_id)
            if reply is not None:
                return Done(reply)
        return None


class FunctionCallingAgent(FunctionCallingCore, Agent):
    """The function-calling agent, called synchronously (arguments: `FunctionCallingCore`)."""


class AsyncFunctionCallingAgent(FunctionCallingCore, AsyncAgent):
    """Async twin: ``await agent(...)``; a turn's tool calls run concurrently."""

    _executor_cls: ClassVar[str] = "AsyncActionExecutor"


class StreamingFunctionCallingAgent(FunctionCallingCore, StreamingAgent):
    """Streams each model turn's text as it arrives (tool rounds included), then the final END message."""


class AsyncStreamingFunctionCallingAgent(FunctionCallingCore, AsyncStreamingAgent):
    """Async twin of `StreamingFunctionCallingAgent`: ``async for chunk in agent(...)``."""

    _executor_cls: ClassVar[str] = "AsyncActionExecutor"


_PROBLEMS = "text_call_problems"
"""`RunState.scratch` key: what was wrong with calls written in the text, told after the turn's results."""


def _as_response(result: Any) -> ModelResponse:
    """A turn's result: a `ModelResponse` from ``complete``, or the final chunk of a streamed turn."""
    if isinstance(result, AgentMessage):
        result = result.extra_info["response"]
    if not isinstance(result, ModelResponse):
        raise TypeError(f"a function-calling turn must give a ModelResponse, not {type(result).__name__}")
    return result


for _sibling in (AsyncFunctionCallingAgent, StreamingFunctionCallingAgent, AsyncStreamingFunctionCallingAgent):
    FunctionCallingAgent.register(_sibling)
