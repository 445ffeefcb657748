"""`ToolLoop`: the one loop every tool-using paradigm runs on.

A tool-using agent alternates model calls and tool calls until it has an answer. What
differs between paradigms — how the request is written, how a reply is read, how tool
results are shown, how the final answer is asked for — lives in a small `LoopProtocol`
per paradigm. What is the same lives here, once:

* **the budget**: ``max_turn`` (``max_iterations``) is the number of model calls a run
  may make, fix-up re-asks and the final-answer call included;
* **running out** (the protocol's ``out_of_budget`` policy): ``'force'`` keeps the last
  call of the budget for the final answer (`LoopProtocol.final`: a forced prompt, or
  ReWOO's solver); ``'stop'`` and ``'last'`` make no further call and let
  `LoopProtocol.stop` answer (a fixed message, or the last reply as it is);
* **tool calls**: the calls a reply asks for run together (`Gather`: concurrently under an
  async driver) through `LoopProtocol.tool_effect`;
* **chunks**: what a protocol `emit`s reaches streaming callers as `Emit` effects;
* **state**: everything the loop knows between two effects is in a `RunState` (JSON),
  registered with the agent for the session while the run lasts, so `state_dict` shows an
  unfinished run and a saved one can go on (`run_tool_loop` with ``state=``);
* **approval**: calls whose tool requires a person's approval (`LoopProtocol.needs_approval`)
  do not run: the others of the turn do, and the run pauses, answering with an
  ``AgentStatusCode.INTERRUPTED`` message whose content lists the waiting `PendingCall`s. The
  run state stays with the agent (and in `state_dict`); `decide` records decisions and the run
  goes on where it stopped. A call runs at most once: its result is kept in the state.
* **questions**: a running call that asks a person something (an MCP server's elicitation:
  its result is a parked question, `plait.actions._parked`) waits the same way, with the
  question in its `PendingCall`; the decision is the answer, and the call goes on with it
  (`go_on`) instead of running again.
* **external tools**: calls to tools the caller runs (``external_tools=``, planned with
  ``kind`` `EXTERNAL`) always wait, like approval-gated ones, and are answered with a
  `ToolOutput` decision: its text is the call's result.
* **sub-agents**: an agent run as a tool that pauses pauses this run (`plait.agents._sub_runs`).

The protocol's hooks return a decision: `Act` (run these tool calls), `Done` (the reply),
`FINAL` (ask for the final answer now) or None (the next model turn).
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar, Final, Generic, Literal, NamedTuple, Protocol, TypeVar, Union

from ..actions._parked import continued, go_on
from ..effects import Call, Effect, Emit, Flow, Gather, Report
from ..events import ApprovalNeeded, ToolCallStarted, ToolResult, agent_name, tool_result_event
from ..exceptions import UserError
from ..llms.response import unique_call_ids
from ..schema import ActionReturn, ActionStatusCode, AgentMessage, AgentStatusCode, PendingCall
from ..untrusted import decode_arguments
from ._sub_runs import goes_on, nested_pending, still_waits, with_call_id
from .decisions import EXTERNAL, LOST, REFUSED, call_id, decide
from .run_state import PlannedCall, RunState, call_key, decode_result, encode_result

__all__ = [
    "EXTERNAL",
    "FINAL",
    "LOST",
    "REFUSED",
    "REPEATED",
    "REPEAT_CALLS",
    "REUSED",
    "Act",
    "Ask",
    "Decision",
    "Done",
    "LoopAgent",
    "LoopProtocol",
    "OutOfBudget",
    "RepeatCalls",
    "build_executor",
    "check_budget",
    "decide",
    "run_tool_loop",
]

REUSED = "(This call was already made in this run with the same arguments: it did not run again; this is its result.)"
"""What the model is told beside a repeated call's earlier result (``repeat_calls='reuse'``)."""

REPEATED = "This call was already made in this run with the same arguments: it did not run again."
"""What the model is told instead of a repeated call's result (``repeat_calls='error'``)."""

RepeatCalls = Literal["reuse", "run", "error"]
REPEAT_CALLS: Final = ("reuse", "run", "error")

OutOfBudget = Literal["force", "stop", "last"]


class Ask(NamedTuple):
    """Make this model call (`ModelCall`, or an `AgentCall` to an inner agent)."""

    effect: Effect[Any]


class Act(NamedTuple):
    """Run these tool calls (together), then hand their results to `LoopProtocol.on_results`."""

    calls: Sequence[PlannedCall]


class Done(NamedTuple):
    """The run's reply."""

    message: AgentMessage


class _Final:
    __slots__ = ()

    def __repr__(self) -> str:
        return "FINAL"


FINAL: Final = _Final()
"""Decision: ask for the final answer now (`LoopProtocol.final`), whatever budget is left."""

Decision = Union[Act, Done, _Final, None]


class LoopAgent(Protocol):
    """What the loop needs of the agent a protocol is bound to (every `AgentModule` is one)."""

    def set_run_state(self, state: RunState | None, session_id: Hashable = 0) -> None:
        """Register (or with None, drop) the state of a session's run."""
        ...

    def keep_paused_run(self, state: RunState | None, session_id: Hashable = 0, wait: bool = False) -> None:
        """Store a paused run with the session (None: it is over)."""
        ...


A = TypeVar("A", bound=LoopAgent)


class LoopProtocol(ABC, Generic[A]):
    """What one paradigm adds to the loop: its requests, its reading of replies, its final answer.

    A protocol is made per run from its agent and reads the agent's settings (prompts,
    tools, parser) live. Everything it must remember between calls goes into the
    `RunState` it is handed, never into attributes, so a run can stop and go on.

    Attributes:
        name: Names the paradigm in the `RunState`.
        out_of_budget: What happens when the budget is spent (see the module docs).
    """

    name: ClassVar[str]
    out_of_budget: OutOfBudget = "force"

    def __init__(self, agent: A) -> None:
        self.agent = agent
        self.outbox: list[Any] = []

    def emit(self, chunk: Any) -> None:
        """Pass `chunk` to streaming callers (the loop yields it as an `Emit` after this hook returns)."""
        self.outbox.append(chunk)

    def begin(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> None:
        """Prepare a new run's state (before its first model call); nothing by default."""

    @abstractmethod
    def ask(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> Ask:
        """The next model call."""

    @abstractmethod
    def on_reply(self, state: RunState, reply: Any, session_id: Hashable) -> Decision:
        """Read a model reply (also the final call's): answer, tool calls, or None to ask again."""

    @abstractmethod
    def tool_effect(self, state: RunState, call: PlannedCall, session_id: Hashable) -> Effect[Any]:
        """The effect that runs `call`."""

    def on_results(
        self, state: RunState, calls: Sequence[PlannedCall], results: Sequence[Any], session_id: Hashable
    ) -> Decision:
        """Take tool results in (observations, step records); None asks the model again."""
        return None

    def withdraw(self, state: RunState, session_id: Hashable) -> bool:
        """Take back the last reply, whose calls were all made before in this run; True when taken back.

        Called (``repeat_calls='reuse'``, policy ``'force'``) instead of running such a reply:
        the answer is then asked for on the conversation as it was. A protocol that cannot
        take a reply back returns False, and the repeats get their earlier results with `REUSED`.
        """
        return False

    def needs_approval(self, state: RunState, call: PlannedCall) -> bool:
        """Whether `call` must wait for a person's decision (its tool's ``requires_approval``)."""
        check = getattr(getattr(self.agent, "executor", None), "needs_approval", None)
        return bool(check(call["name"], call.get("arguments"))) if callable(check) else False

    def reported(self, call: PlannedCall) -> bool:
        """Whether `call` is shown in the stream events (a call the agent plans for itself may not be)."""
        return True

    def tool_name(self, call: PlannedCall) -> str:
        """The tool a call names, as people know it (its stream events carry this name)."""
        return str(call["name"])

    def refusal(self, state: RunState, call: PlannedCall, text: str) -> Any:
        """What stands for a refused call's result: the executor's kind of answer, `text` as its error."""
        arguments = decode_arguments(call.get("arguments"))
        args = arguments if isinstance(arguments, dict) else {"input": arguments}
        refused = ActionReturn(args=args, type=call["name"], errmsg=text, state=ActionStatusCode.API_ERROR)
        return AgentMessage(sender="ActionExecutor", content=refused)

    def supplied(self, state: RunState, call: PlannedCall, text: str) -> Any:
        """What stands for a call answered with a `ToolOutput`: the executor's kind of answer, `text` its result."""
        arguments = decode_arguments(call.get("arguments"))
        args = arguments if isinstance(arguments, dict) else {"input": arguments}
        given = ActionReturn(args=args, type=call["name"], result=[{"type": "text", "content": text}])
        return AgentMessage(sender="ActionExecutor", content=given)

    def final(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> Ask | Done:
        """The call that asks for the final answer (policy ``'force'``), or a reply without one."""
        return self.ask(state, session_id, kwargs)

    def stop(self, state: RunState, session_id: Hashable) -> Done:
        """The reply when the budget is spent and no further call is made."""
        raise UserError(f"{type(self).__name__} has no reply for a spent budget")


def check_budget(max_turn: object, what: str = "max_turn") -> int:
    """`max_turn` as a budget of model calls (an int >= 1).

    Raises:
        UserError: Anything else.
    """
    if isinstance(max_turn, bool) or not isinstance(max_turn, int) or max_turn < 1:
        raise UserError(f"{what} is the number of model calls a run may make: an int >= 1, got {max_turn!r}")
    return max_turn


def run_tool_loop(
    protocol: LoopProtocol[Any],
    budget: int,
    session_id: Hashable,
    kwargs: Mapping[str, object],
    state: RunState | None = None,
) -> Flow[AgentMessage]:
    """Run `protocol` until it answers, within `budget` model calls.

    Args:
        protocol: The paradigm's protocol (bound to its agent).
        budget: Model calls the run may make.
        session_id: The session.
        kwargs: The caller's keyword arguments (they reach the model).
        state: A run to go on with (from `RunState.from_dict`); a new run when None.

    While the run lasts its state is the agent's ``run_state`` for the session (in
    `state_dict`); it is dropped when the run ends, whether it answered or raised.
    """
    budget = check_budget(budget)
    agent = protocol.agent
    if state is None:
        state = RunState(protocol.name)
        protocol.begin(state, session_id, kwargs)
    elif state.protocol != protocol.name:
        raise UserError(f"a {state.protocol!r} run cannot go on as {protocol.name!r}")
    agent.set_run_state(state, session_id)
    paused = False
    try:
        reply = yield from _loop(protocol, budget, state, session_id, kwargs)
        paused = reply.stream_state == AgentStatusCode.INTERRUPTED
        return reply
    finally:
        if not paused:
            agent.set_run_state(None, session_id)


def _one_id_per_call(calls: Sequence[PlannedCall]) -> list[PlannedCall]:
    """A new turn's calls, each named by an id of its own before anything runs, waits or is stored.

    Native calls arrive with unique ids (`ModelResponse` re-issues duplicates); a protocol
    that writes its own ids could still repeat one (or write ``call-1``, the name of an
    id-less call by its place), and a decision on ``X`` must never name two calls. Then the
    calls get ids by `unique_call_ids`; otherwise they are kept as they are.
    """
    if len(calls) < 2:
        return list(calls)
    keys = [call_id(call, i) for i, call in enumerate(calls)]
    if len(set(keys)) == len(keys):
        return list(calls)
    given = [call.get("id") or "" for call in calls]
    unique: list[PlannedCall] = []
    for call, old, new in zip(calls, given, unique_call_ids(given, blank="call-{}"), strict=True):
        if new != old:
            call = call.copy()
            call["id"] = new
        unique.append(call)
    return unique


def _loop(
    protocol: LoopProtocol[Any], budget: int, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]
) -> Flow[AgentMessage]:
    decision: Decision | Ask = Act(state.pending) if state.pending else None
    while True:
        if decision is None or decision is FINAL:
            decision = _next_call(protocol, budget, state, session_id, kwargs, decision is FINAL)
        if isinstance(decision, Done):
            return decision.message
        if isinstance(decision, Act):
            if decision.calls is not state.pending:  # a new turn's calls (a resumed run goes on with its own)
                state.pending, state.outcomes = _one_id_per_call(decision.calls), []
                if _only_repeats(protocol, state) and protocol.withdraw(state, session_id):
                    state.pending = []
                    decision = FINAL  # the model only repeats itself: answer on what ran
                    continue
            results, repeats = yield from _run_calls(protocol, state, session_id)
            if state.waiting:
                paused = _interrupted(protocol, state)
                yield Report(ApprovalNeeded, (agent_name(protocol.agent), tuple(paused.content)))
                return paused
            calls = state.pending
            state.pending, state.outcomes = [], []
            decision = protocol.on_results(state, calls, results, session_id)
            if decision is None and repeats == len(calls) and protocol.out_of_budget == "force":
                decision = FINAL  # the model only repeats itself: ask for the answer now
            yield from _flush(protocol)
            continue
        if isinstance(decision, Ask):
            state.turns += 1
            reply = yield decision.effect
            decision = protocol.on_reply(state, reply, session_id)
            if state.forced and not isinstance(decision, Done):
                decision = protocol.stop(state, session_id)
            yield from _flush(protocol)
            continue
        raise TypeError(f"{type(protocol).__name__} returned {decision!r}, not a decision")  # a protocol bug


def _run_calls(protocol: LoopProtocol[Any], state: RunState, session_id: Hashable) -> Flow[tuple[list[Any], int]]:
    """Run the pending calls that may run; their results (refusals included) in call order.

    A new turn's calls are sorted first: those that need a person's approval wait
    (`RunState.waiting`). While any wait, what ran is kept in the state and never runs again.
    A call identical to one this run already made (`call_key`) is answered as the agent's
    ``repeat_calls`` says, without running; the second value returned counts those.
    """
    calls = state.pending
    results, ready = _settled(protocol, state)
    settled = [i for i, o in enumerate(state.outcomes) if o and not {"result", "question", "paused"} & set(o)]
    for i in settled:  # refused, answered by the caller, or lost to a restart: decided now, reported now
        outcome = state.outcomes[i] or {}
        status = "refused" if "refused" in outcome else None if "output" in outcome else "error"
        yield Report(_ended, (protocol, calls[i], i, results[i], status))
    asked = {i: state.outcomes[i] or {} for i in ready if "answer" in (state.outcomes[i] or {})}  # calls going on
    mode = getattr(protocol.agent, "repeat_calls", "run")
    fresh = [i for i in ready if i not in asked]
    keys, repeats = _repeats(state, fresh) if mode != "run" else ({}, [])
    keys.update({i: call_key(calls[i]) for i in asked} if mode != "run" else {})
    ready = [i for i in ready if i not in repeats] if repeats else ready
    effects = tuple(
        Call(go_on, (asked[i]["question"]["ticket"], asked[i]["answer"]))
        if i in asked
        else with_call_id(protocol.tool_effect(state, calls[i], session_id), call_id(calls[i], i))
        for i in ready
    )
    if ready and state.turn_start is not None:  # a paused run goes on: on disk first, a call runs at most once
        for i in ready:
            state.outcomes[i] = {"started": True}
        yield Call(protocol.agent.keep_paused_run, (state, session_id, True))
    if ready:
        for i in fresh:
            if i not in repeats:
                yield from _report(protocol, _started, calls[i], i)
        ran = yield Gather(effects)
        for i, result in zip(ready, ran, strict=True):
            results[i] = continued(decode_result(asked[i]["asked"]), result) if i in asked else result
            if still_waits(state, call_id(calls[i], i), i, results[i]):  # it asks, or its sub-agent paused
                continue
            if keys:
                state.ran[keys[i]] = results[i]
            yield from _report(protocol, _ended, calls[i], i, results[i])
    for i in repeats:
        earlier = state.ran[keys[i]]
        results[i] = _repeated(earlier) if mode == "reuse" else protocol.refusal(state, calls[i], REPEATED)
        yield Report(_ended, (protocol, calls[i], i, results[i], "repeated"))
    if state.waiting or state.turn_start is not None:
        for i in (*ready, *repeats):
            if not {"question", "paused"} & set(state.outcomes[i] or {}):
                state.outcomes[i] = {"result": encode_result(results[i])}
    return results, len(repeats)


def _report(protocol: LoopProtocol[Any], event: Callable[..., Any], call: PlannedCall, *args: object) -> Flow[None]:
    """Report `call`'s `event` (`_started`, `_ended`) unless the protocol keeps the call out of the events."""
    if protocol.reported(call):
        yield Report(event, (protocol, call, *args))


def _started(protocol: LoopProtocol[Any], call: PlannedCall, index: int) -> ToolCallStarted:
    """The `ToolCallStarted` event of a call (made only when someone asked for events)."""
    arguments = decode_arguments(call.get("arguments"))
    return ToolCallStarted(agent_name(protocol.agent), call_id(call, index), protocol.tool_name(call), arguments)


def _ended(
    protocol: LoopProtocol[Any], call: PlannedCall, index: int, result: Any, status: str | None = None
) -> ToolResult:
    """The `ToolResult` event of a call's result (made only when someone asked for events)."""
    return tool_result_event(agent_name(protocol.agent), call_id(call, index), protocol.tool_name(call), result, status)


def _settled(protocol: LoopProtocol[Any], state: RunState) -> tuple[list[Any], list[int]]:
    """The results the pending calls already have (ran, refused, lost), and the calls ready to run."""
    calls = state.pending
    if len(state.outcomes) != len(calls):
        state.outcomes = [None] * len(calls)
        state.waiting = [call_id(call, i) for i, call in enumerate(calls) if _waits(protocol, state, call)]
    results: list[Any] = [None] * len(calls)
    ready: list[int] = []
    for i, (call, outcome) in enumerate(zip(calls, state.outcomes, strict=True)):
        if outcome is None:
            if call_id(call, i) not in state.waiting:
                ready.append(i)
        elif "refused" in outcome:
            results[i] = protocol.refusal(state, call, str(outcome["refused"]))
        elif "output" in outcome:
            results[i] = protocol.supplied(state, call, str(outcome["output"]))
        elif "result" in outcome:
            results[i] = decode_result(outcome["result"])
        elif "question" in outcome or "paused" in outcome:  # it goes on once answered, else it waits
            if goes_on(outcome, call_id(call, i), state.waiting):
                ready.append(i)
        else:  # started before a restart: it may have run, so it does not run again
            results[i] = protocol.refusal(state, call, LOST)
    return results, ready


def _waits(protocol: LoopProtocol[Any], state: RunState, call: PlannedCall) -> bool:
    """Whether a call waits for a decision: a call to an external tool always does."""
    return call.get("kind") == EXTERNAL or protocol.needs_approval(state, call)


def _only_repeats(protocol: LoopProtocol[Any], state: RunState) -> bool:
    """Whether every pending call was made before in this run (and repeats are answered by reuse)."""
    if getattr(protocol.agent, "repeat_calls", "run") != "reuse" or protocol.out_of_budget != "force":
        return False
    return bool(state.pending) and all(call_key(call) in state.ran for call in state.pending)


def _repeats(state: RunState, ready: Sequence[int]) -> tuple[dict[int, str], list[int]]:
    """The `call_key` of each ready call, and those made before in this run (or earlier in this reply)."""
    keys = {i: call_key(state.pending[i]) for i in ready}
    seen: set[str] = set()
    repeats: list[int] = []
    for i in ready:
        if keys[i] in state.ran or keys[i] in seen:
            repeats.append(i)
        seen.add(keys[i])
    return keys, repeats


def _repeated(result: Any) -> Any:
    """An earlier call's result given again, with `REUSED` said beside it."""
    content = result.content if isinstance(result, AgentMessage) else result
    if isinstance(content, ActionReturn):
        if content.errmsg is not None:
            content = dataclasses.replace(content, errmsg=f"{content.errmsg}\n{REUSED}")
        else:
            note = {"type": "text", "content": REUSED}
            content = dataclasses.replace(content, result=[*(content.result or []), note])
    elif isinstance(content, str):
        content = f"{content}\n{REUSED}"
    else:
        return result
    return result.model_copy(update={"content": content}) if isinstance(result, AgentMessage) else content


def _interrupted(protocol: LoopProtocol[Any], state: RunState) -> AgentMessage:
    """The paused run's answer: the calls that wait for a decision."""
    waiting = []
    for i, (call, outcome) in enumerate(zip(state.pending, state.outcomes, strict=True)):
        if call_id(call, i) in state.waiting:
            arguments = decode_arguments(call.get("arguments"))
            args = arguments if isinstance(arguments, dict) else {"input": arguments}
            asked = (outcome or {}).get("question")
            question = {k: v for k, v in asked.items() if k != "ticket"} if isinstance(asked, dict) else None
            external = call.get("kind") == EXTERNAL
            waiting.append(PendingCall(call_id(call, i), call["name"], args, question=question, external=external))
        elif outcome is not None and "paused" in outcome:  # a sub-agent's calls, under this call's id
            waiting += nested_pending(call_id(call, i), outcome["paused"], state.waiting)
    name = str(getattr(protocol.agent, "name", type(protocol.agent).__name__))
    return AgentMessage(sender=name, content=waiting, stream_state=AgentStatusCode.INTERRUPTED)


def _flush(protocol: LoopProtocol[Any]) -> Flow[None]:
    if protocol.outbox:
        chunks, protocol.outbox = protocol.outbox, []
        for chunk in chunks:
            yield Emit(chunk)


def _next_call(
    protocol: LoopProtocol[Any],
    budget: int,
    state: RunState,
    session_id: Hashable,
    kwargs: Mapping[str, object],
    final: bool,
) -> Ask | Done:
    """The next model call within the budget, the final-answer call, or the out-of-budget reply."""
    left = budget - state.turns
    if state.forced or left <= 0:
        return protocol.stop(state, session_id)
    if final or (protocol.out_of_budget == "force" and left == 1):
        state.forced = True
        return protocol.final(state, session_id, kwargs)
    return protocol.ask(state, session_id, kwargs)


def build_executor(actions: Any, executor_cls: str, hooks: Sequence[Any] | None = None) -> Any:
    """The executor of an agent's tools: `actions` itself when it is one, else a new `executor_cls`.

    Args:
        actions: An `ActionExecutor`, or tools (instances, classes, config dicts, functions).
        executor_cls: ``'ActionExecutor'`` or ``'AsyncActionExecutor'``.
        hooks: Action hooks; registered on a given executor, or passed to a new one.
    """
    from .. import actions as actions_module

    if isinstance(actions, actions_module.ActionExecutor):
        for hook in hooks or ():
            actions.register_hook(hook)
        return actions
    return getattr(actions_module, executor_cls)(actions=actions, hooks=list(hooks) if hooks else None)
