"""The programs the cross-process checks of `plait.testing.session_backends` run in child processes.

Each opens the store its parent's `BackendSpec` names (from the environment) and runs one role::

    python -m plait.testing._backend_child turns SESSION                     # turns until killed
    python -m plait.testing._backend_child writer SESSION NAME TURNS         # one of two writers
    python -m plait.testing._backend_child approval SESSION STEP COUNTER [crash]

Models are functions (`FunctionLLM`): no server, no network.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from ..actions import BaseAction, tool_api
from ..agents import Agent, FunctionCallingAgent
from ..exceptions import ResumeError
from ..llms.response import ModelResponse, ToolCall
from ..memory.backend import SessionBackend
from ._backend_spec import BackendSpec
from .llms import FunctionLLM

__all__ = ["main"]


def _say(data: object) -> None:
    """One line to the parent (flushed: it may kill this process any time after)."""
    sys.stdout.write(f"{data if isinstance(data, str) else json.dumps(data)}\n")
    sys.stdout.flush()


class Nap(BaseAction):
    """Rest a while."""

    @tool_api
    def run(self, seconds: float) -> str:
        """Rest a while.

        Args:
            seconds (float): how long
        """
        time.sleep(seconds)
        return "rested"


class Transfer(BaseAction):
    """Move money (needs a person's approval); appends ``ran`` to `counter` each time it runs."""

    def __init__(self, counter: str, crash: bool) -> None:
        super().__init__(requires_approval=True)
        self.counter, self.crash = counter, crash

    @tool_api
    def run(self, to: str, amount: int) -> str:
        """Send money.

        Args:
            to (str): who gets it
            amount (int): how much
        """
        with open(self.counter, "a", encoding="utf-8") as count:
            count.write("ran\n")
        if self.crash:
            os._exit(9)  # the process dies after the transfer, before the run goes on
        return f"sent {amount} to {to}"


def _nap_model(messages: Any, params: Any) -> object:
    """A nap for a question (odd turns: none, even ones: 50 ms), then the answer."""
    last = messages[-1]
    if last["role"] == "user":
        turn = int(str(last["content"]).split()[-1])
        arguments = json.dumps({"seconds": 0.0 if turn % 2 else 0.05})
        return ModelResponse(tool_calls=[ToolCall(f"nap-{turn}", "Nap", arguments)], finish_reason="tool_calls")
    return "the answer"


def _pay_model(messages: Any, params: Any) -> object:
    """Pay bob 5 (a call that needs approval); once results are in, say what they were."""
    if messages[-1]["role"] == "tool":
        return "done: " + " | ".join(str(m["content"]) for m in messages if m["role"] == "tool")
    return ModelResponse(tool_calls=[ToolCall("pay-1", "Transfer", '{"to": "bob", "amount": 5}')])


def turns(store: SessionBackend, session: str) -> None:
    """Tool-using turns on `session`, one after another, each reported once its call returned."""
    agent = store.attach(FunctionCallingAgent(FunctionLLM(_nap_model), [Nap()]))
    for turn in range(1_000_000):
        agent(f"turn {turn}", session_id=session)
        _say(str(turn))  # the call returned: this turn must survive a kill


def writer(store: SessionBackend, session: str, name: str, count: str) -> None:
    """`count` turns on `session` (shared with another writer), started when stdin says so; reports the outcome."""

    def reply(messages: Any, params: Any) -> str:
        time.sleep(0.001)  # a model that takes a moment: the two writers' turns interleave
        return f"re: {messages[-1]['content']}"

    agent = store.attach(Agent(FunctionLLM(reply)))
    _say("ready")
    sys.stdin.readline()  # both writers start together
    acked: list[str] = []
    errors: dict[str, int] = {}
    message = ""
    for turn in range(int(count)):
        text = f"{name} {turn}"
        try:
            agent(text, session_id=session)
        except Exception as exc:
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
            message = str(exc)
        else:
            acked.append(text)  # the call returned: this turn is stored
    _say({"acked": acked, "errors": errors, "message": message})


def approval(store: SessionBackend, session: str, step: str, counter: str, crash: str = "") -> None:
    """Ask to pay bob (``pause``), or resume the paused run with `step`'s decisions (JSON)."""
    agent = store.attach(FunctionCallingAgent(FunctionLLM(_pay_model), [Transfer(counter, crash == "crash")]))
    try:
        if step == "pause":
            reply = agent("pay bob", session_id=session)
        else:
            reply = agent.resume(json.loads(step), session_id=session)
    except ResumeError as exc:
        _say({"error": str(exc)})
        return
    if isinstance(reply.content, str):
        _say({"content": reply.content})
    else:  # paused: the calls waiting for a decision
        _say({"state": int(reply.stream_state), "ids": [call.id for call in reply.content]})


ROLES: dict[str, Callable[..., None]] = {"turns": turns, "writer": writer, "approval": approval}


def main(argv: list[str] | None = None) -> None:
    """Run the role `argv` names on the store the environment's `BackendSpec` opens."""
    role, *arguments = sys.argv[1:] if argv is None else argv
    store = BackendSpec.from_environment().open()
    try:
        ROLES[role](store, *arguments)
    finally:
        store.close()


if __name__ == "__main__":
    main()
