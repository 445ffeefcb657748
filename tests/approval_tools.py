"""Tools for the approval tests that run in another process (a CLI, a served web demo, a restarted agent).

`Transfer` needs approval and appends a line to ``$APPROVAL_COUNT_FILE`` each time it runs
(so the test process can count runs across processes); with ``$CRASH_IN_TOOL`` set the process
dies right after the transfer. `Lookup` needs no approval. Importing the module registers both.
"""

from __future__ import annotations

import os

from plait.actions import BaseAction, tool_api


class Transfer(BaseAction):
    """Move money."""

    @tool_api(requires_approval=True)
    def run(self, to: str, amount: int) -> str:
        """Send money.

        Args:
            to (str): who gets it
            amount (int): how much
        """
        with open(os.environ["APPROVAL_COUNT_FILE"], "a", encoding="utf-8") as count:
            count.write("ran\n")
        if os.environ.get("CRASH_IN_TOOL"):
            os._exit(9)  # the process dies after the transfer, before the run goes on
        return f"sent {amount} to {to}"


class Lookup(BaseAction):
    """Look up balances."""

    @tool_api
    def run(self, account: str) -> str:
        """Look up an account's balance.

        Args:
            account (str): the account
        """
        return f"{account} has 120"
