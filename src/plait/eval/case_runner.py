"""`CaseRunner`: one agent answering many cases at once, each in its own session.

The agent comes from a zero-argument factory (sync or async, streaming or not, tool-using or
not). A case runs in the session ``eval-<id>``; when it is over its messages (the longest
memory of the agent tree: an InternLM agent keeps the trajectory in its inner agent) become
the case's trajectory and the session is forgotten (`AgentModule.reset`), so the agent's
memory does not grow with the data set. Token usage comes from a `UsageMeter` registered on
the agent. Whatever goes wrong in a case — the agent raises, the time runs out — is the
case's ``error``, never the run's.

The same object runs cases locally (`plait.eval.runner`) and inside Ray actors
(`plait.eval.ray_runner`, as the agent of an `AgentRayActor`), so both record the same thing.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Union

from ..agents.aggregator.default_aggregator import content_to_text
from ..exceptions import UserError
from ..hooks.usage import UsageMeter
from ..schema import AgentStatusCode
from ..trajectories.tokens import TokenRecorder, recorded
from ..types import JSONValue
from ..utils.loading import load_object
from .cases import CaseId, case_key

__all__ = ["AgentFactory", "CaseRunner", "agent_profile", "load_factory"]

AgentFactory = Callable[[], Any]
"""A zero-argument callable returning an agent."""

_EXECUTORS = ("executor", "plugin_executor", "interpreter_executor")


def load_factory(factory: Union[AgentFactory, str]) -> AgentFactory:
    """The factory itself, or the one ``MODULE:FACTORY`` names.

    Raises:
        UserError: ``MODULE:FACTORY`` does not name a callable.
    """
    if callable(factory):
        return factory
    found = load_object(factory, "--agent")
    if not callable(found):
        raise UserError(f"--agent {factory!r} is not a callable that returns an agent")
    return found


def agent_profile(agent: Any) -> dict[str, JSONValue]:
    """What export needs to know of the agent without building it: class, name, system prompt, tools.

    ``protocol`` is ``'function_calling'`` (native tool calls), ``'text'`` (a text protocol:
    ReAct, InternLM2) or ``'chat'`` (no tools). ``tools`` are the OpenAI ``tools`` entries of
    every executor of the agent; ``tool_names`` maps each tool's plait name (``Toolkit.api``)
    to its name there. ``system`` is the agent's system prompt when it is plain text and not a
    text protocol's instructions (those describe the protocol export turns into tool calls).
    """
    from ..agents.function_calling import FunctionCallingCore

    tools: list[JSONValue] = []
    names: dict[str, JSONValue] = {}
    for attribute in _EXECUTORS:
        executor = getattr(agent, attribute, None)
        if executor is not None and callable(getattr(executor, "openai_tools", None)):
            for tool in executor.openai_tools():
                tools.append(tool)
                wire = tool["function"]["name"]
                names[executor.resolve_name(wire)] = wire
    if isinstance(agent, FunctionCallingCore):
        protocol = "function_calling"
    else:
        protocol = "text" if any(getattr(agent, a, None) is not None for a in _EXECUTORS) else "chat"
    template = getattr(agent, "template", None)
    system = template if isinstance(template, str) and protocol != "text" else None
    name = getattr(agent, "name", None) or type(agent).__name__
    return {
        "class": f"{type(agent).__module__}.{type(agent).__qualname__}",
        "name": str(name),
        "protocol": protocol,
        "system": system,
        "tools": tools,
        "tool_names": names,
    }


def _jsonable(value: Any) -> Any:
    """`value` as plain JSON data (what JSON cannot hold becomes its text)."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


class CaseRunner:
    """The agent a factory makes, answering cases (see the module docstring).

    Args:
        factory: A zero-argument callable returning the agent, or ``'MODULE:FACTORY'``.

    Attributes:
        agent: The agent.
        meter: The `UsageMeter` registered on it (None: not a plait agent, no usage).
    """

    def __init__(self, factory: Union[AgentFactory, str]) -> None:
        from ..agents.module import AgentModule
        from ..distributed.http_serve._calls import agent_chunks
        from ..interceptors import register_interceptor

        # imported here, not on the first case: the import (aiohttp, 0.3 s idle, over 1 s on a busy
        # machine) would block the event loop inside the first cases' time limits
        self._agent_chunks = agent_chunks

        self.agent = load_factory(factory)()
        if not callable(self.agent):
            raise UserError(f"the agent factory returned {type(self.agent).__name__}, not an agent")
        self.meter: UsageMeter | None = None
        self.tokens: TokenRecorder | None = None
        if isinstance(self.agent, AgentModule):
            self.meter = UsageMeter()
            register_interceptor(self.agent, self.meter)
            self.tokens = TokenRecorder()
            register_interceptor(self.agent, self.tokens)

    def describe(self) -> dict[str, JSONValue]:
        """`agent_profile` of the agent."""
        return agent_profile(self.agent)

    async def run(
        self,
        case_id: CaseId,
        text: str,
        timeout: float | None = None,
        sample: int | None = None,
        gen: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Answer one case (or sample `sample` of it) in its own session.

        Args:
            case_id: The case's id.
            text: What the agent is asked.
            timeout: Seconds the answer may take.
            sample: The sample's number (``plait eval --samples``): its session is the case's
                with ``#sample``.
            gen: Generation settings passed with the call to the agent, which passes them to
                its model (a sample's ``seed`` and ``temperature``).

        Returns:
            ``{"output", "error", "seconds", "usage", "trajectory"}``: the answer's text (None
            on error), what went wrong (None when nothing did), the seconds it took, the token
            usage (None when the backend reports none) and the session's messages; and
            ``tokens`` (each model call's exact tokens, `plait.trajectories.tokens`) when the
            model gave any.
        """
        session = f"eval-{case_key(case_id)}" + ("" if sample is None else f"#{sample}")
        if self.meter is not None:
            self.meter.take(session)
        started = time.perf_counter()
        output: str | None = None
        error: str | None = None
        try:
            output = await asyncio.wait_for(self._answer(text, session, gen or {}), timeout)
        except asyncio.TimeoutError:
            error = f"TimeoutError: no answer within {timeout:g} s"
        except Exception as exc:  # a case's failure is its result, whatever the agent raised
            error = f"{type(exc).__name__}: {exc}"
        seconds = time.perf_counter() - started
        answer: dict[str, Any] = {"output": output, "error": error, "seconds": round(seconds, 6)}
        answer["usage"] = self._usage(session)
        tokens = None if self.tokens is None else recorded(self.tokens.take(session))
        if tokens is not None:  # the model gave its exact tokens (the embedded engine with logprobs=True)
            answer["tokens"] = tokens
        answer["trajectory"] = self._take_trajectory(session)
        return answer

    async def _answer(self, text: str, session: str, gen: Mapping[str, Any]) -> str:
        """The agent's answer as text (a streaming agent's last chunk).

        Raises:
            UserError: The agent paused for a person's approval of tool calls (nobody approves in an eval).
        """
        last: Any = None
        async for chunk in self._agent_chunks(self.agent, [text], {**gen, "session_id": session}):
            last = chunk
        if getattr(last, "stream_state", None) == AgentStatusCode.INTERRUPTED:
            raise UserError("the agent paused for a person's approval of tool calls; nobody approves in an eval")
        return content_to_text(getattr(last, "content", last))

    def _usage(self, session: str) -> dict[str, int] | None:
        if self.meter is None:
            return None
        metered = self.meter.take(session)
        if not metered.reported:
            return None
        return {
            "prompt_tokens": metered.prompt_tokens,
            "completion_tokens": metered.completion_tokens,
            "total_tokens": metered.total_tokens,
            "calls": metered.calls,
        }

    def _take_trajectory(self, session: str) -> list[Any]:
        """The session's messages (its longest memory in the agent tree), then the session forgotten."""
        state_dict = getattr(self.agent, "state_dict", None)
        if not callable(state_dict):
            return []
        state = state_dict(session)
        memories = [value for key, value in state.items() if key == "memory" or key.endswith(".memory")]
        trajectory: list[Any] = max(memories, key=len, default=[])
        if callable(getattr(self.agent, "reset", None)):
            self.agent.reset(session, recursive=True)
        return list(_jsonable(trajectory))
