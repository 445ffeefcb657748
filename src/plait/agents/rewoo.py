"""`ReWOO` / `AsyncReWOO`: plan all tool calls first, run them, then solve.

Reasoning WithOut Observation splits a request into three phases, so the model is called
twice (plus one re-ask for a bad plan) however many tools run:

1. **Planner**: the model writes ``Plan: ...`` / ``#E<n> = Tool[input]`` pairs (see
   `plait.agents._react_plan` for the exact format). A plan that breaks the format, or
   names an unknown tool, is sent back once with a hint naming the problem and the valid
   tools (``max_turn - 1`` planner attempts in all: `max_turn` counts model calls and the
   last one is the solver's); if it is still unusable the reply says so.
2. **Workers**: each step's tool runs with earlier evidence substituted for its ``#E<k>``
   variables. Steps whose inputs are ready run together (concurrently in `AsyncReWOO`).
   A failing tool's error message becomes its evidence.
3. **Solver**: the model answers the question from the plans and their evidence.

Only the question and the answer are kept in memory; the reply's
``extra_info['intermediate_steps']`` holds every step with its evidence.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from ..exceptions import ParseError, UserError
from ..prompts import rewoo_prompts as prompts
from ..schema import AgentMessage
from ._react_base import TextToolProtocol, ToolProtocolAgent
from ._react_plan import PlanStep, parse_plan, substitute
from .agent import Agent, AsyncAgent
from .aggregator.default_aggregator import content_to_text
from .run_state import PlannedCall, RunState
from .tool_loop import FINAL, Act, Ask, Decision, Done

__all__ = ["AsyncReWOO", "ReWOO", "ReWOOProtocol"]

_ANSWER_PREFIX = re.compile(r"^\s*(?:final\s+)?answer\s*:\s*", re.IGNORECASE)


class ReWOOCore(ToolProtocolAgent):
    """Planner, workers, solver (`ReWOO`, `AsyncReWOO`).

    Args:
        llm: The model (instance or config dict); its `chat` is used.
        actions: Tools (instances, classes, config dicts or functions) or an `ActionExecutor`.
        template: The planner's system prompt (placeholders ``{action_info}``,
            ``{tool_names}``); default `REWOO_PLANNER_PROMPT`.
        solver_template: The solver's prompt (``{question}``, ``{worklog}``).
        format_hint: Sent back with a bad plan (``{error}``, ``{tool_names}``).
        max_turn: Model calls per run, at least 2: the planner's attempts (the first one
            plus re-asks) and the solver. The default 3 allows one re-ask.
        action_hooks: Hooks for the executor.
        **kwargs: Other `Agent` arguments (``memory``, ``name``, ``hooks``...).

    Example:
        ```python
        agent = ReWOO(llm, [search, weather])
        reply = agent('What is the weather in the city that hosted the 2012 Olympics?')
        reply.extra_info['intermediate_steps']  # [{'evidence': '#E1', 'tool': 'search', ...}, ...]
        ```
    """

    default_template = prompts.REWOO_PLANNER_PROMPT
    default_observation = "{observation}"

    def __init__(
        self,
        llm: object = None,
        actions: object = None,
        template: object = None,
        solver_template: str = prompts.REWOO_SOLVER_PROMPT,
        format_hint: str = prompts.REWOO_FORMAT_HINT,
        max_turn: int = 3,
        action_hooks: list[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(max_turn, int) or isinstance(max_turn, bool) or max_turn < 2:
            raise UserError(f"ReWOO needs max_turn >= 2 model calls (a plan and the solver), got {max_turn!r}")
        super().__init__(llm, actions, template, max_turn, action_hooks, **kwargs)
        self.solver_template = solver_template
        self.format_hint = format_hint

    def template_values(self) -> dict[str, Any]:
        """``{action_info}``: one ``name[input]: description (arguments)`` line per tool."""
        values = super().template_values()
        lines = self.tool_lines("{name}[input]: {description} Arguments: {arguments}.")
        values["action_info"] = "\n".join(lines) or "(no tools)"
        return values

    def loop_protocol(self, inputs: Sequence[AgentMessage] = ()) -> ReWOOProtocol:
        """This agent's paradigm on the tool loop (for a new run, or a paused one to resume)."""
        return ReWOOProtocol(self)


class ReWOOProtocol(TextToolProtocol[ReWOOCore]):
    """ReWOO on the tool loop: planner calls, the plan's tools in waves, and the solver as the final call.

    The run state keeps the question, the re-asks of the planner, the plan (as dicts) and
    the evidence gathered so far; each call's id is its evidence variable (``#E1``).
    """

    name = "rewoo"

    def begin(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> None:
        """The question (the messages after the agent's last reply) and an empty plan."""
        _, pending = self.agent.split_memory(session_id)
        question = "\n".join(content_to_text(m.content) for m in pending)
        state.scratch.update(
            question=question, retries=[], failures=[], plan=None, plan_text="", evidence={}, records={}
        )

    def ask(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> Ask:
        """The planner: the conversation behind the planner prompt, then any re-asks."""
        agent = self.agent
        history, pending = agent.split_memory(session_id)
        prompt = [*agent.render(history + pending, agent.system_prompt()), *state.scratch["retries"]]
        return Ask(agent.model_call("chat", prompt, session_id, kwargs))

    def on_reply(self, state: RunState, reply: Any, session_id: Hashable) -> Decision:
        """A plan runs its first wave; a bad plan is sent back with a hint; the solver's reply is the answer."""
        if state.forced:
            return Done(self._answer(state, str(reply)))
        agent = self.agent
        names = agent.tool_names()
        try:
            steps = parse_plan(str(reply), agent.executor.is_valid, names)
        except ParseError as exc:
            state.scratch["failures"].append({"planner_output": str(reply), "error": exc.err_msg})
            hint = agent.format_hint.format(error=exc.err_msg, tool_names=", ".join(names) or "none")
            state.scratch["retries"] += [
                {"role": "assistant", "content": str(reply)},
                {"role": "user", "content": hint},
            ]
            return None
        state.scratch.update(plan=[dataclasses.asdict(step) for step in steps], plan_text=str(reply))
        return self._wave(state)

    def _wave(self, state: RunState) -> Decision:
        """The steps whose variables are all known (at least one), or FINAL when none is left."""
        evidence: dict[str, str] = state.scratch["evidence"]
        waiting = [PlanStep(**{**step, "depends": tuple(step["depends"])}) for step in state.scratch["plan"]]
        waiting = [step for step in waiting if step.evidence not in evidence]
        if not waiting:
            return FINAL
        ready = [s for s in waiting if all(d in evidence for d in s.depends)] or waiting[:1]
        return Act(
            [PlannedCall(name=s.tool, arguments=substitute(s.tool_input, evidence), id=s.evidence) for s in ready]
        )

    def on_results(
        self, state: RunState, calls: Sequence[PlannedCall], results: Sequence[Any], session_id: Hashable
    ) -> Decision:
        """Each result is its step's evidence; then the next wave."""
        agent = self.agent
        plans = {step["evidence"]: step["plan"] for step in state.scratch["plan"]}
        for call, result in zip(calls, results, strict=True):
            variable = call.get("id", "")
            record = agent.step_record(
                result, plan=plans.get(variable, ""), evidence=variable, tool=call["name"], tool_input=call["arguments"]
            )
            state.scratch["evidence"][variable] = record["observation"]
            state.scratch["records"][variable] = record
        return self._wave(state)

    def final(self, state: RunState, session_id: Hashable, kwargs: Mapping[str, object]) -> Ask | Done:
        """The solver, given the plan and its evidence; without a plan, the failure reply."""
        if state.scratch["plan"] is None:
            return self.stop(state, session_id)
        agent = self.agent
        evidence = state.scratch["evidence"]
        worklog = "\n".join(
            f"Plan: {step['plan']}\n{step['evidence']} = {step['tool']}[{step['tool_input']}]\n"
            f"Evidence: {evidence.get(step['evidence'], '')}"
            for step in state.scratch["plan"]
        )
        request = agent.solver_template.format(question=state.scratch["question"], worklog=worklog)
        history, _ = agent.split_memory(session_id)
        return Ask(
            agent.model_call("chat", [*agent.render(history), {"role": "user", "content": request}], session_id, kwargs)
        )

    def stop(self, state: RunState, session_id: Hashable) -> Done:
        """No usable plan within the budget: say so, with the planner's attempts."""
        failures = state.scratch["failures"]
        error = failures[-1]["error"] if failures else "the planner was never asked (max_turn too small)"
        message = prompts.REWOO_FAILURE.format(attempts=len(failures), error=error)
        extra = {"intermediate_steps": [], "plan_errors": failures}
        return Done(AgentMessage(sender=self.agent.name, content=message, extra_info=extra))

    def _answer(self, state: RunState, raw: str) -> AgentMessage:
        answer = _ANSWER_PREFIX.sub("", raw, count=1).strip()
        records = state.scratch["records"]
        steps = [records[step["evidence"]] for step in state.scratch["plan"]]
        extra = {"intermediate_steps": steps, "plan": state.scratch["plan_text"]}
        return AgentMessage(sender=self.agent.name, content=answer, extra_info=extra)


class ReWOO(ReWOOCore, Agent):
    """The ReWOO agent, called synchronously (arguments: `ReWOOCore`)."""


class AsyncReWOO(ReWOOCore, AsyncAgent):
    """Async twin of `ReWOO`; independent plan steps run concurrently."""

    _executor_cls = "AsyncActionExecutor"


ReWOO.register(AsyncReWOO)
