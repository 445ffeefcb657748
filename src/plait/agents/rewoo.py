"""`ReWOO` / `AsyncReWOO`: plan all tool calls first, run them, then solve.

Reasoning WithOut Observation splits a request into three phases, so the model is called
twice (plus one re-ask for a bad plan) however many tools run:

1. **Planner**: the model writes ``Plan: ...`` / ``#E<n> = Tool[input]`` pairs (see
   `plait.agents._react_plan` for the exact format). A plan that breaks the format, or
   names an unknown tool, is sent back once with a hint naming the problem and the valid
   tools (`max_turn` planner attempts in all); if it is still unusable the reply says so.
2. **Workers**: each step's tool runs with earlier evidence substituted for its ``#E<k>``
   variables. Steps whose inputs are ready run together (concurrently in `AsyncReWOO`).
   A failing tool's error message becomes its evidence.
3. **Solver**: the model answers the question from the plans and their evidence.

Only the question and the answer are kept in memory; the reply's
``extra_info['intermediate_steps']`` holds every step with its evidence.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from ..effects import Flow, Gather
from ..exceptions import ParseError, UserError
from ..prompts import rewoo_prompts as prompts
from ..schema import AgentMessage
from ._react_base import ProtocolAggregator, ToolProtocolAgent, describe_parameters
from ._react_plan import PlanStep, parse_plan, substitute
from .agent import AsyncAgent
from .aggregator.default_aggregator import content_to_text

__all__ = ["AsyncReWOO", "ReWOO"]

_ANSWER_PREFIX = re.compile(r"^\s*(?:final\s+)?answer\s*:\s*", re.IGNORECASE)


class ReWOO(ToolProtocolAgent):
    """Planner, workers, solver.

    Args:
        llm: The model (instance or config dict); its `chat` is used.
        actions: Tools (instances, classes, config dicts or functions) or an `ActionExecutor`.
        template: The planner's system prompt (placeholders ``{action_info}``,
            ``{tool_names}``); default `REWOO_PLANNER_PROMPT`.
        solver_template: The solver's prompt (``{question}``, ``{worklog}``).
        format_hint: Sent back with a bad plan (``{error}``, ``{tool_names}``).
        max_turn: Planner attempts (the first one plus re-asks); at least 1.
        action_hooks: Hooks for the executor.
        **kwargs: Other `Agent` arguments (``memory``, ``name``, ``hooks``...).

    Example:
        ```python
        agent = ReWOO(llm, [search, weather])
        reply = agent('What is the weather in the city that hosted the 2012 Olympics?')
        reply.extra_info['intermediate_steps']  # [{'evidence': '#E1', 'tool': 'search', ...}, ...]
        ```
    """

    def __init__(
        self,
        llm: Any = None,
        actions: Any = None,
        template: Any = None,
        solver_template: str = prompts.REWOO_SOLVER_PROMPT,
        format_hint: str = prompts.REWOO_FORMAT_HINT,
        max_turn: int = 2,
        action_hooks: list[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(max_turn, int) or max_turn < 1:
            raise UserError(f"ReWOO needs max_turn >= 1 planner attempts, got {max_turn!r}")
        kwargs.setdefault("aggregator", ProtocolAggregator())
        super().__init__(
            llm=llm,
            actions=actions,
            template=prompts.REWOO_PLANNER_PROMPT if template is None else template,
            max_turn=max_turn,
            action_hooks=action_hooks,
            **kwargs,
        )
        self.solver_template = solver_template
        self.format_hint = format_hint

    def template_values(self) -> dict[str, Any]:
        """``{action_info}``: one ``name[input]: description (arguments)`` line per tool."""
        values = super().template_values()
        lines = [
            f"{api['name']}[input]: {api.get('description', '')} Arguments: {describe_parameters(api)}."
            for api in self.tool_descriptions()
        ]
        values["action_info"] = "\n".join(lines) or "(no tools)"
        return values

    def forward_flow(
        self, inputs: Sequence[AgentMessage], session_id: Hashable, kwargs: Mapping[str, Any]
    ) -> Flow[AgentMessage]:
        """Plan, run the plan's tools, and solve."""
        return (yield from self._rewoo_flow(session_id, kwargs))

    def _rewoo_flow(self, session_id: Hashable, kwargs: Mapping[str, Any]) -> Flow[AgentMessage]:
        history, pending = self.split_memory(session_id)
        question = "\n".join(content_to_text(m.content) for m in pending)
        planned = yield from self._plan_flow(history + pending, session_id, kwargs)
        if isinstance(planned, AgentMessage):
            return planned
        steps, plan_text = planned
        evidence, records = yield from self._work_flow(steps, session_id)
        worklog = "\n".join(
            f"Plan: {step.plan}\n{step.evidence} = {step.tool}[{step.tool_input}]\nEvidence: {evidence[step.evidence]}"
            for step in steps
        )
        request = self.solver_template.format(question=question, worklog=worklog)
        solver = [*self.render(history), {"role": "user", "content": request}]
        raw = yield self.model_call("chat", solver, session_id, kwargs)
        answer = _ANSWER_PREFIX.sub("", str(raw), count=1).strip()
        extra = {"intermediate_steps": [records[step.evidence] for step in steps], "plan": plan_text}
        return AgentMessage(sender=self.name, content=answer, extra_info=extra)

    def _plan_flow(
        self, messages: list[AgentMessage], session_id: Hashable, kwargs: Mapping[str, Any]
    ) -> Flow[tuple[list[PlanStep], str] | AgentMessage]:
        """Ask for a plan, re-asking with a hint while it does not parse."""
        prompt = self.render(messages, self.system_prompt())
        names = self.tool_names()
        failures: list[dict[str, str]] = []
        for _ in range(self.max_turn):
            raw = yield self.model_call("chat", prompt, session_id, kwargs)
            try:
                return parse_plan(str(raw), self.executor.is_valid, names), str(raw)
            except ParseError as exc:
                failures.append({"planner_output": str(raw), "error": exc.err_msg})
                hint = self.format_hint.format(error=exc.err_msg, tool_names=", ".join(names) or "none")
                prompt = [*prompt, {"role": "assistant", "content": str(raw)}, {"role": "user", "content": hint}]
        message = prompts.REWOO_FAILURE.format(attempts=len(failures), error=failures[-1]["error"])
        extra = {"intermediate_steps": [], "plan_errors": failures}
        return AgentMessage(sender=self.name, content=message, extra_info=extra)

    def _work_flow(
        self, steps: list[PlanStep], session_id: Hashable
    ) -> Flow[tuple[dict[str, str], dict[str, dict[str, Any]]]]:
        """Run the steps in waves: every step whose variables are known runs in the next wave."""
        evidence: dict[str, str] = {}
        records: dict[str, dict[str, Any]] = {}
        waiting = list(steps)
        while waiting:
            ready = [s for s in waiting if all(d in evidence for d in s.depends)] or waiting[:1]
            inputs = [substitute(step.tool_input, evidence) for step in ready]
            calls = tuple(
                self.tool_call(step.tool, given, session_id) for step, given in zip(ready, inputs, strict=True)
            )
            results = yield Gather(calls)
            for step, given, result in zip(ready, inputs, results, strict=True):
                evidence[step.evidence] = self.result_text(result)
                records[step.evidence] = {
                    "plan": step.plan,
                    "evidence": step.evidence,
                    "tool": step.tool,
                    "tool_input": given,
                    "observation": evidence[step.evidence],
                    "state": self.result_state(result),
                }
            done = {id(step) for step in ready}
            waiting = [s for s in waiting if id(s) not in done]
        return evidence, records


class AsyncReWOO(ReWOO, AsyncAgent):
    """Async twin of `ReWOO`; independent plan steps run concurrently."""

    _executor_cls = "AsyncActionExecutor"
