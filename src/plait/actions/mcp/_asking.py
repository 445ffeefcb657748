"""An MCP server's elicitations as questions for the agent's person (``elicit="approval"``, private).

With `MCPToolkit(..., elicit="approval")` the server's ``elicitation/create`` requests are not
answered by a callback: the ``tools/call`` that is running when one arrives returns at once with
the question (`plait.actions._parked`), the agent's run pauses on it like a call waiting for
approval, and the person's answer, given through ``resume``, is sent to the server; the call
then goes on where it was. While the question waits, the call's timeout clock stands still.

Everything here runs on the connection's loop thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...exceptions import MCPError, UserError
from ...types import JSONValue
from ._client_requests import RequestRefused, elicitation_answer
from ._protocol import INTERNAL_ERROR, INVALID_PARAMS

__all__ = ["Asked", "Questions"]

logger = logging.getLogger(__name__)


@dataclass
class Asked:
    """A question a running call asked: the person's answer goes into `answer`; `call` goes on after it.

    Attributes:
        question: ``message``, ``requested_schema`` and ``server``.
        answer: Filled with the answer (an `elicitation_answer` mapping) when it comes.
        call: The ``tools/call`` that asked it (still running).
    """

    question: dict[str, Any]
    answer: asyncio.Future[Mapping[str, Any]]
    call: asyncio.Future[dict[str, JSONValue]]


class Questions:
    """The elicitations of one connection's server that wait for a running call to carry them out.

    Args:
        server: The name of the server (shown with the question).
    """

    def __init__(self, server: Callable[[], str]) -> None:
        self.server = server
        self.unclaimed: list[tuple[dict[str, Any], asyncio.Future[Mapping[str, Any]]]] = []
        self.calls = 0  # tools/call requests in flight
        self._arrived: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self._arrived is None:
            self._arrived = asyncio.Event()
        return self._arrived

    async def handler(self, params: Mapping[str, JSONValue]) -> JSONValue:
        """Answer an ``elicitation/create`` request: with the person's answer, once a call carried it out."""
        if params.get("mode", "form") != "form":
            raise RequestRefused(f"plait answers form elicitations only, not {params.get('mode')!r}", INVALID_PARAMS)
        schema = params.get("requestedSchema")
        schema = dict(schema) if isinstance(schema, Mapping) else {"type": "object", "properties": {}}
        if not self.calls:  # no tool call runs that could pause an agent's run for it
            logger.warning("the MCP server %r asked a question outside a tool call: cancelled", self.server())
            return {"action": "cancel"}
        question = {"message": str(params.get("message", "")), "requested_schema": schema, "server": self.server()}
        answer: asyncio.Future[Mapping[str, Any]] = asyncio.get_running_loop().create_future()
        self.unclaimed.append((question, answer))
        self._event().set()
        reply = await answer
        try:
            return elicitation_answer(reply, schema)
        except UserError as exc:  # checked when decided; a bug if it fails here
            raise RequestRefused(str(exc), INTERNAL_ERROR) from exc

    def start(self, call: asyncio.Future[dict[str, JSONValue]]) -> asyncio.Future[dict[str, JSONValue]]:
        """Count `call` as running until it ends; questions left over when no call runs are cancelled."""
        self.calls += 1

        def ended(_: object) -> None:
            if not call.cancelled():
                call.exception()  # seen: a parked call nobody answered fails when the session closes
            self.calls -= 1
            if not self.calls:
                leftovers, self.unclaimed = self.unclaimed, []
                for _question, answer in leftovers:
                    if not answer.done():
                        answer.set_result({"action": "cancel"})

        call.add_done_callback(ended)
        return call

    async def outcome(self, call: asyncio.Future[dict[str, JSONValue]]) -> dict[str, JSONValue] | Asked:
        """`call`'s result (raises its error), or the first question asked while it runs."""
        try:
            while not call.done() and not self.unclaimed:
                arrived: asyncio.Future[Any] = asyncio.ensure_future(self._event().wait())
                try:
                    await asyncio.wait((call, arrived), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    arrived.cancel()
        except asyncio.CancelledError:  # the caller gave up: so does the call
            call.cancel()
            raise
        if call.cancelled():
            raise MCPError("the MCP tool call was cancelled (the toolkit was closed)")
        if call.done():
            return call.result()
        question, answer = self.unclaimed.pop(0)
        if not self.unclaimed:
            self._event().clear()
        return Asked(question, answer, call)
