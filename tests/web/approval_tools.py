"""A tool that needs approval, imported by the served web demo (``PLAIT_WEB_TOOL_MODULES``) in the approval test."""

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
        return f"sent {amount} to {to}"
