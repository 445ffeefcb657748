"""A payments agent that asks a person before money moves, and can wait for the answer across restarts.

Payments over 100 need approval (a rule on the tool); balances do not. The run pauses with the
waiting calls, the session is kept in a SessionStore, and the decision may come from another
process later: ``resume`` runs each approved call exactly once.

Usage: ``python examples/payments.py "Pay 250 to bob from my account"`` (asks on the terminal).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from common import make_llm

from plait.actions import BaseAction, tool_api
from plait.agents import FunctionCallingAgent
from plait.memory import SessionStore
from plait.schema import AgentStatusCode, PendingCall


class Payments(BaseAction):
    """Balances and payments of the user's account."""

    def __init__(self) -> None:
        super().__init__()
        self.balance = 1000
        self.sent: list[tuple[str, int]] = []

    @tool_api
    def get_balance(self) -> str:
        """The account's balance."""
        return f"{self.balance} EUR"

    @tool_api(requires_approval=lambda name, arguments: int(arguments.get("amount", 0)) > 100)
    def pay(self, to: str, amount: int) -> str:
        """Pay someone from the account.

        Args:
            to (str): who is paid
            amount (int): how many euros
        """
        self.balance -= amount
        self.sent.append((to, amount))
        return f"paid {amount} EUR to {to}; balance {self.balance} EUR"


def ask_on_terminal(call: PendingCall) -> bool | str:
    """A person's decision, typed: y runs the call, anything else refuses it (and is the reason given)."""
    answer = input(f"Run {call.name}({call.arguments})? [y/N/reason] ").strip()
    return True if answer.lower() in ("y", "yes") else answer or False


def main(
    request: str,
    llm: Any = None,
    store_path: str = "payments.db",
    decide: Callable[[PendingCall], bool | str] = ask_on_terminal,
) -> str:
    payments = Payments()
    with SessionStore(store_path) as store:
        agent = store.attach(FunctionCallingAgent(llm or make_llm(temperature=0.0), [payments], "You move money."))
        reply = agent(request, session_id="user-1")
        while reply.stream_state == AgentStatusCode.INTERRUPTED:  # the session is on disk: this could be hours later
            reply = agent.resume({call.id: decide(call) for call in reply.content}, session_id="user-1")
    sys.stdout.write(f"{reply.content}\n")
    return str(reply.content)


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or "Pay 250 EUR to bob.")
