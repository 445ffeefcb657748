"""Issue 38 item 3: a server's elicitation pauses the agent's run; the person's answer, given through `resume`, goes on.

`MCPToolkit(..., elicit="approval")` on asking_server.py (official SDK, stdio): its ``book`` tool
elicits the number of guests and writes one line per call that really ran. A scripted OpenAI-compatible
model calls ``book`` and then answers with the tool's result. Every behaviour runs in sync and async
mode from one body.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from _support import collect, resolve
from plait.actions._parked import GONE
from plait.actions.mcp import MCPToolkit
from plait.agents import AsyncFunctionCallingAgent, FunctionCallingAgent
from plait.distributed import AgentAPIServer
from plait.events import ToolCallDelta, ToolResult
from plait.exceptions import ResumeError, UserError
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.schema import AgentStatusCode, PendingCall
from plait.testing.fake_openai import FakeOpenAIServer, Reply

ASKING = str(Path(__file__).with_name("asking_server.py"))


def model(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return Reply("done: " + messages[-1]["content"])
    return Reply("", tool_calls=[("asking_server.book", {"table": "7"})])


@pytest.fixture
def booking(make_toolkit: Callable[..., MCPToolkit], mode: str, tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    """A function-calling agent on a scripted model with the asking server's tools, and its bookings file."""
    bookings = tmp_path / "bookings.txt"
    toolkit = make_toolkit(args=[ASKING], env={"BOOKINGS": str(bookings)}, elicit="approval", timeout=20)
    with FakeOpenAIServer(handler=model) as server:
        llm = (AsyncGPTAPI if mode == "async" else GPTAPI)(model_type="m", api_base=server.base_url, key="k", retry=0)
        agent = (AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent)(llm, [toolkit])
        yield agent, bookings


def _paused(agent: Any) -> PendingCall:
    paused = resolve(agent("book table 7", session_id="s"))
    assert paused.stream_state == AgentStatusCode.INTERRUPTED
    (pending,) = paused.content
    assert isinstance(pending, PendingCall) and pending.name == "asking_server.book"
    return pending


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        ({"action": "accept", "content": {"guests": 4, "vegetarian": True}}, 'accept {"guests":4,"vegetarian":true}'),
        ("decline", "decline"),
        ("cancel", "cancel"),
        (False, "decline"),
    ],
)
def test_the_question_pauses_the_run_and_the_answer_reaches_the_call_once(
    booking: tuple[Any, Path], answer: object, outcome: str
) -> None:
    agent, bookings = booking
    pending = _paused(agent)
    question = pending.question
    assert question is not None and question["message"] == "How many guests at table 7?"
    assert question["server"] == "asking-server" and "ticket" not in question
    assert set(question["requested_schema"]["properties"]) == {"guests", "vegetarian"}
    assert pending.arguments == {"table": "7"}
    assert not bookings.exists()  # the call waits inside the server for the answer
    assert "How many guests at table 7?" in json.dumps(agent.state_dict("s"))  # the paused run, saved with its question
    reply = resolve(agent.resume({pending.id: answer}, session_id="s"))
    assert reply.stream_state == AgentStatusCode.END
    assert reply.content == f"done: {outcome}"
    assert bookings.read_text().splitlines() == [f"7: {outcome}"]  # the call ran exactly once
    with pytest.raises(ResumeError, match="no paused run"):
        resolve(agent.resume({pending.id: answer}, session_id="s"))


def test_an_answer_that_does_not_fit_is_refused_and_the_question_stays_open(booking: tuple[Any, Path]) -> None:
    agent, bookings = booking
    pending = _paused(agent)
    for bad, why in [
        ({"action": "accept", "content": {"guest": 4}}, "did you mean 'guests'"),
        ({"action": "accept", "content": {"guests": "four"}}, "is a integer"),
        ({"action": "accept", "content": {}}, "lacks the required field 'guests'"),
        ("maybe", "action is one of accept, decline, cancel"),
    ]:
        with pytest.raises(ResumeError, match=why):
            resolve(agent.resume({pending.id: bad}, session_id="s"))
    assert not bookings.exists()
    reply = resolve(agent.resume({pending.id: {"action": "accept", "content": {"guests": 2}}}, session_id="s"))
    assert reply.content == 'done: accept {"guests":2,"vegetarian":false}'
    assert bookings.read_text().splitlines() == ['7: accept {"guests":2,"vegetarian":false}']


def test_an_answer_for_a_call_that_no_longer_runs_is_an_observation_not_a_hang(booking: tuple[Any, Path]) -> None:
    agent, bookings = booking
    pending = _paused(agent)
    saved = json.dumps(agent.state_dict("s"))
    (ticket,) = set(re.findall(r'"ticket": "([0-9a-f]+)"', saved))
    agent.reset("s")
    # as after a restart: the saved run names a call that no process holds any more
    agent.load_state_dict(json.loads(saved.replace(ticket, "0" * len(ticket))), session_id="s")
    reply = resolve(agent.resume({pending.id: "decline"}, session_id="s"))
    assert reply.stream_state == AgentStatusCode.END and reply.content == f"done: {GONE}"
    assert not bookings.exists()


def test_elicit_is_approval_or_a_callable(mode: str) -> None:
    with pytest.raises(UserError, match="elicit is 'approval' or a callable"):
        MCPToolkit(sys.executable, [ASKING], elicit="approve")  # type: ignore[arg-type]


def test_the_call_timeout_does_not_count_the_time_a_person_takes(
    make_toolkit: Callable[..., MCPToolkit], mode: str, tmp_path: Path
) -> None:
    bookings = tmp_path / "bookings.txt"
    toolkit = make_toolkit(args=[ASKING], env={"BOOKINGS": str(bookings)}, elicit="approval", timeout=4)
    with FakeOpenAIServer(handler=model) as server:
        llm = (AsyncGPTAPI if mode == "async" else GPTAPI)(model_type="m", api_base=server.base_url, key="k", retry=0)
        agent = (AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent)(llm, [toolkit])
        pending = _paused(agent)
        time.sleep(6)  # longer than the call's timeout: the clock stood still while the question waited
        reply = resolve(agent.resume({pending.id: "cancel"}, session_id="s"))
    assert reply.content == "done: cancel" and bookings.read_text().splitlines() == ["7: cancel"]


def test_the_events_show_the_question_and_the_call_ending_once_answered(booking: tuple[Any, Path]) -> None:
    agent, bookings = booking
    events = collect(agent.stream_events("book table 7", session_id="s"))
    events = [event for event in events if not isinstance(event, ToolCallDelta)]  # the arguments as they were written
    kinds = [type(event).__name__ for event in events]
    assert kinds == ["ToolCallStarted", "ApprovalNeeded", "Final"]  # no result yet: the call still runs
    (call,) = events[1].calls
    assert events[1].to_dict()["calls"][0]["question"]["message"] == "How many guests at table 7?"
    assert events[-1].paused
    events = collect(agent.resume_events({call.id: {"action": "accept", "content": {"guests": 1}}}, session_id="s"))
    results = [event for event in events if isinstance(event, ToolResult)]
    assert [(r.id, r.status) for r in results] == [(call.id, "ok")]
    assert results[0].output == 'accept {"guests":1,"vegetarian":false}'
    assert not events[-1].paused and bookings.read_text().count("\n") == 1


def test_a_served_agent_gives_the_question_and_takes_the_answer_over_http(booking: tuple[Any, Path]) -> None:
    agent, bookings = booking
    server = AgentAPIServer(agent, port=0).start()

    def post(route: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"http://127.0.0.1:{server.port}{route}"
        request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            reply: dict[str, Any] = json.loads(response.read())
        return reply

    try:
        paused = post("/chat_completion", {"message": ["book table 7"], "session_id": "h"})
        (call,) = paused["content"]
        assert call["question"]["message"] == "How many guests at table 7?" and "ticket" not in call["question"]
        answer = {"action": "accept", "content": {"guests": 5}}
        reply = post("/resume", {"decisions": {call["id"]: answer}, "session_id": "h"})
    finally:
        server.stop()
    assert reply["content"] == 'done: accept {"guests":5,"vegetarian":false}'
    assert bookings.read_text().splitlines() == ['7: accept {"guests":5,"vegetarian":false}']
