"""Stored responses of ``/v1/responses``: fetched, deleted and continued with ``previous_response_id`` (private).

A stored response names the agent session its conversation lives in and how many messages
each memory of the agent tree held when it was answered (its *marks*); the conversation
itself is never copied into the store. A session's latest stored response is its *head*.

* **Continuing the head** (a chain: each request's ``previous_response_id`` is the last
  answer) runs in the same session: its memory already holds the conversation, and the new
  ``input`` (one message, or the ``function_call_output`` items that answer the response's
  calls: a run paused on them is resumed; instructions beside) is added as with ``X-Session-Id``.
  While that request runs the session has no head, so a second request continuing the same
  response meanwhile branches (below). A request that fails, or is sent with ``store: false``,
  leaves the session as it was (its memories cut back to the response's marks).
* **Continuing an older response** (a branch) copies the session's state (`state_dict`), each
  memory cut back to the response's marks, into a new session (`load_state_dict`): the model
  sees the conversation up to that response and nothing later, and the original chain is not
  touched. A paused run is not carried into a branch. A session whose memories hold fewer
  messages than the marks (dropped from memory, or compacted by a running summary) cannot be
  gone on from: 400 naming ``previous_response_id``.
* Without ``previous_response_id`` a stored request is answered as a self-contained one (its
  ``input`` loaded into a fresh session), and that session is kept instead of dropped; a pause
  for approval is then answered like a call of the client's (``function_call_output`` with
  ``previous_response_id``) instead of refused with 409.

Responses belong to the tenant that made them (one bearer token each, `AccessControl`): another
tenant's id is answered as an unknown one (404 on ``GET`` / ``DELETE``, 400 naming
``previous_response_id``). Each tenant keeps at most `ServerLimits.max_stored_responses`; the
oldest is dropped first, and a session goes (`AgentModule.reset`) with its last stored
response. These sessions are the store's, not the `SessionTable`'s: no ttl drops them.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from ...types import JSONValue, SessionId
from .openai_request import OpenAIRequest, OpenAIRequestError

__all__ = ["ResponseStore"]


@dataclass
class _Stored:
    body: dict[str, JSONValue]
    session: SessionId
    marks: dict[str, int]


@dataclass
class _Tenant:
    responses: OrderedDict[str, _Stored] = field(default_factory=OrderedDict)
    heads: dict[SessionId, str | None] = field(default_factory=dict)  # session -> its head (None: in flight)


def _members(agent: Any) -> list[tuple[str, Any]]:
    """The agents of the tree that have a memory, by path (``''``: the root)."""
    agents = agent.named_agents() if callable(getattr(agent, "named_agents", None)) else [("", agent)]
    return [(path, member) for path, member in agents if getattr(member, "memory", None) is not None]


def _marks(agent: Any, session: SessionId) -> dict[str, int]:
    """How many messages each memory of the agent tree holds in `session`."""
    return {path: member.memory.length(session) for path, member in _members(agent)}


def _check_new_turns(body: OpenAIRequest) -> None:
    """A request going on from a stored response brings one message, or the results of the calls it waits on.

    Raises:
        OpenAIRequestError: More (the agent would be given the last one only).
    """
    turns = body.turns
    answers = next((i for i, turn in enumerate(reversed(turns)) if turn.role != "tool"), len(turns))
    before = turns[: len(turns) - answers] if answers else turns[:-1]
    if any(turn.role != "system" for turn in before):
        raise OpenAIRequestError(
            "with 'previous_response_id', 'input' takes one message, or the function_call_output items "
            "that answer the previous response's calls",
            "input",
        )


def _not_found(response_id: object) -> OpenAIRequestError:
    return OpenAIRequestError(
        f"Previous response with id {response_id!r} not found.", "previous_response_id", "previous_response_not_found"
    )


class ResponseStore:
    """The stored responses of every tenant (see the module docstring).

    Args:
        get_agent: The served agent.
        limit: Responses one tenant keeps (0: none are stored).
    """

    def __init__(self, get_agent: Callable[[], Any], limit: int) -> None:
        self.get_agent = get_agent
        self.limit = limit
        self._tenants: dict[str, _Tenant] = {}

    def __len__(self) -> int:
        return sum(len(tenant.responses) for tenant in self._tenants.values())

    def start(self, tenant: str, body: OpenAIRequest, session: SessionId | None) -> SessionId | None:
        """The session a request that continues a stored response runs in (else `session`, the client's).

        Raises:
            OpenAIRequestError: The response is unknown to this tenant, no longer held, or the
                request names a session too.
        """
        response_id = body.previous_response
        if response_id is None:
            return session
        if session is not None:
            raise OpenAIRequestError(
                "'previous_response_id' continues a stored conversation: send no session with it",
                "previous_response_id",
            )
        held = self._tenants.get(tenant)
        stored = held.responses.get(response_id) if held is not None else None
        if held is None or stored is None:
            raise _not_found(response_id)
        _check_new_turns(body)
        agent = self.get_agent()
        now = _marks(agent, stored.session)
        if any(now.get(path, 0) < mark for path, mark in stored.marks.items()):
            raise OpenAIRequestError(
                f"the conversation of response {response_id!r} is no longer held by the server",
                "previous_response_id",
            )
        if held.heads.get(stored.session) == response_id:  # the chain's latest: go on in its session
            held.heads[stored.session] = None
            return stored.session
        branch = f"resp-{uuid.uuid4().hex}"
        state = {
            key: value[: stored.marks.get(key.removesuffix("memory").removesuffix("."), 0)]
            if key.endswith("memory")
            else value
            for key, value in agent.state_dict(stored.session).items()
            if not key.endswith("run_state")
        }
        agent.load_state_dict(state, branch, strict=False)
        held.heads[branch] = None
        return branch

    def finish(
        self,
        tenant: str,
        body: OpenAIRequest,
        session: SessionId,
        answered: dict[str, JSONValue] | None,
        *,
        keep: bool,
        continued: bool,
    ) -> bool:
        """After a request: keep its `answered` response (with `keep`), else give a `continued` session back.

        Returns:
            Whether `session` is the store's (not to be dropped with the request).
        """
        if keep and answered is not None:
            self.keep(tenant, session, answered)
            return True
        if continued:
            self.abandon(tenant, body, session)
            return True
        return False

    def abandon(self, tenant: str, body: OpenAIRequest, session: SessionId) -> None:
        """A request that `start` gave `session` failed or was not to be stored: the session is as it was before."""
        held = self._tenants.get(tenant)
        if held is None or held.heads.get(session, "") is not None:
            return
        previous = held.responses.get(body.previous_response or "")
        if previous is not None and previous.session == session:  # the chain's head again, its turns only
            agent = self.get_agent()
            for path, member in _members(agent):
                member.memory.truncate(session, previous.marks.get(path, 0))
            output = previous.body.get("output")
            paused = isinstance(output, list) and any(
                isinstance(item, dict) and item.get("type") == "function_call" for item in output
            )
            if not paused and callable(getattr(agent, "set_run_state", None)):
                for _, member in agent.named_agents():  # a run the unstored request left waiting
                    member.set_run_state(None, session)
            held.heads[session] = body.previous_response
        elif not any(stored.session == session for stored in held.responses.values()):
            del held.heads[session]  # a branch nothing was stored in
            self.get_agent().reset(session, recursive=True)
        else:
            held.heads[session] = ""

    def keep(self, tenant: str, session: SessionId, response: dict[str, JSONValue]) -> None:
        """Store a finished `response`, answered in `session`, as the session's head (the oldest may go)."""
        held = self._tenants.setdefault(tenant, _Tenant())
        response_id = str(response["id"])
        held.responses[response_id] = _Stored(response, session, _marks(self.get_agent(), session))
        held.heads[session] = response_id
        while len(held.responses) > self.limit:
            self._drop(tenant, next(iter(held.responses)))

    def get(self, tenant: str, response_id: str) -> dict[str, JSONValue] | None:
        """A stored response of `tenant`, or None."""
        held = self._tenants.get(tenant)
        stored = held.responses.get(response_id) if held is not None else None
        return stored.body if stored is not None else None

    def delete(self, tenant: str, response_id: str) -> bool:
        """Delete a stored response of `tenant`; False when it has none by that id."""
        if self.get(tenant, response_id) is None:
            return False
        self._drop(tenant, response_id)
        return True

    def _drop(self, tenant: str, response_id: str) -> None:
        held = self._tenants[tenant]
        stored = held.responses.pop(response_id)
        if held.heads.get(stored.session) == response_id:
            held.heads[stored.session] = ""  # no head: continuing an older response of it branches
        if held.heads.get(stored.session) is not None and not any(
            other.session == stored.session for other in held.responses.values()
        ):
            del held.heads[stored.session]
            self.get_agent().reset(stored.session, recursive=True)
        if not held.responses and not held.heads:
            del self._tenants[tenant]

    def routes(self, tenant_of: Callable[[web.Request], str]) -> list[web.RouteDef]:
        """``GET`` and ``DELETE /v1/responses/{id}`` (`tenant_of`: whose responses a request may see)."""

        def unknown(response_id: str) -> web.Response:
            error = {
                "message": f"Response with id {response_id!r} not found.",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
            return web.json_response({"error": error}, status=404)

        async def fetch(request: web.Request) -> web.Response:
            response_id = request.match_info["response_id"]
            body = self.get(tenant_of(request), response_id)
            return unknown(response_id) if body is None else web.json_response(body)

        async def delete(request: web.Request) -> web.Response:
            response_id = request.match_info["response_id"]
            if not self.delete(tenant_of(request), response_id):
                return unknown(response_id)
            return web.json_response({"id": response_id, "object": "response.deleted", "deleted": True})

        return [
            web.get("/v1/responses/{response_id}", fetch),
            web.delete("/v1/responses/{response_id}", delete),
        ]
