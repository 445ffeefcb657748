"""Issue 39 item 1: an approval inside a sub-agent run as a tool pauses the top-level call; `resume` there ends it.

The sub-agent's paused run stays in its session (``"<session>/<call id>"``); the caller's run
pauses with the sub-agent's waiting calls listed as ``"<call id>/<sub call id>"``, and
``top.resume({...})`` hands the decisions down: the gated tool runs once, nothing before the
pause runs again, and the sub-agent's answer becomes the tool call's result.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from _support import collect, resolve
from plait.actions import BaseAction
from plait.agents import AsyncFunctionCallingAgent, FunctionCallingAgent
from plait.agents.tool_loop import REFUSED
from plait.events import ApprovalNeeded, Final, SubAgentEnded, SubAgentStarted, ToolCallStarted, ToolResult
from plait.exceptions import ResumeError
from plait.llms.response import ModelResponse, ToolCall
from plait.schema import AgentStatusCode, PendingCall
from plait.testing import scripted_llm


class Refund(BaseAction):
    """Refund a payment."""

    def __init__(self) -> None:
        super().__init__(requires_approval=True)
        self.runs = 0

    def run(self, amount: int) -> str:
        """Refund money.

        Args:
            amount: how much
        """
        self.runs += 1
        return f"refunded {amount}"


def calls(*items: tuple[str, str, str]) -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall(i, n, a) for i, n, a in items], finish_reason="tool_calls")


def fc(mode: str, script: list[Any], tools: list[Any], name: str) -> Any:
    cls = FunctionCallingAgent if mode == "sync" else AsyncFunctionCallingAgent
    return cls(scripted_llm(script, mode), tools, name=name)


LEAD = [calls(("c1", "billing", '{"message": "refund 5"}')), "Refunded, see billing."]
BILLING = [calls(("r1", "Refund", '{"amount": 5}')), "Done: refunded 5."]


def tree(mode: str, lead: list[Any] = LEAD, billing: list[Any] = BILLING) -> tuple[Any, Any, Refund]:
    refund = Refund()
    sub = fc(mode, billing, [refund], "billing")
    return fc(mode, lead, [sub.as_tool()], "blogger"), sub, refund


def paused_tree(mode: str) -> tuple[Any, Any, Refund]:
    agent, sub, refund = tree(mode)
    paused = resolve(agent("Refund me", session_id="s"))
    assert paused.stream_state == AgentStatusCode.INTERRUPTED
    assert paused.content == [PendingCall("c1/r1", "Refund", {"amount": 5})]
    assert refund.runs == 0
    assert agent.run_state("s").waiting == ["c1/r1"] and sub.run_state("s/c1").waiting == ["r1"]
    return agent, sub, refund


def test_approval_in_the_sub_agent_pauses_the_top_and_resume_runs_it_once(mode: str) -> None:
    agent, sub, refund = paused_tree(mode)
    reply = resolve(agent.resume({"c1/r1": True}, session_id="s"))
    assert reply.content == "Refunded, see billing."
    assert refund.runs == 1
    assert len(agent.llm.calls) == 2 and len(sub.llm.calls) == 2  # nothing before the pause was asked again
    assert sub.llm.calls[1].messages[-1] == {"role": "tool", "tool_call_id": "r1", "content": "refunded 5"}
    assert agent.llm.calls[1].messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "Done: refunded 5."}
    assert agent.run_state("s") is None and sub.run_state("s/c1") is None
    memory = [m["content"] for m in sub.state_dict("s/c1")["memory"]]
    assert memory[0] == "refund 5" and memory[-1] == "Done: refunded 5."
    with pytest.raises(ResumeError):  # it is over: nothing waits
        resolve(agent.resume({"c1/r1": True}, session_id="s"))
    assert refund.runs == 1


@pytest.mark.parametrize("decision", [False, "not today"])
def test_refusal_reaches_the_sub_agents_model(mode: str, decision: bool | str) -> None:
    agent, sub, refund = paused_tree(mode)
    assert resolve(agent.resume({"c1/r1": decision}, session_id="s")).content == "Refunded, see billing."
    assert refund.runs == 0
    told = sub.llm.calls[1].messages[-1]
    assert told["role"] == "tool" and told["tool_call_id"] == "r1" and REFUSED in told["content"]
    assert (decision in told["content"]) if isinstance(decision, str) else True


@pytest.mark.parametrize("key", ["r1", "c1", "c1/r2", "c2/r1"])
def test_a_bad_id_is_a_resume_error_and_the_pause_holds(mode: str, key: str) -> None:
    agent, sub, refund = paused_tree(mode)
    with pytest.raises(ResumeError, match="c1/r1"):
        resolve(agent.resume({key: True}, session_id="s"))
    with pytest.raises(ResumeError):
        resolve(agent.resume({"c1/r1": 1}, session_id="s"))  # not a decision
    assert agent.run_state("s").waiting == ["c1/r1"] and sub.run_state("s/c1").waiting == ["r1"]
    assert resolve(agent.resume({"c1/r1": True}, session_id="s")).content == "Refunded, see billing."
    assert refund.runs == 1


def test_the_paused_tree_survives_a_json_round_trip(mode: str) -> None:
    agent, sub, refund = paused_tree(mode)
    saved = json.dumps({"top": agent.state_dict("s"), "billing": sub.state_dict("s/c1")})
    assert "run_state" in json.loads(saved)["billing"]
    # a new process: fresh agents whose models only know what comes after the pause
    fresh, fresh_sub, fresh_refund = tree(mode, LEAD[1:], BILLING[1:])
    state = json.loads(saved)
    fresh.load_state_dict(state["top"], session_id="s")
    fresh_sub.load_state_dict(state["billing"], session_id="s/c1")
    assert resolve(fresh.resume({"c1/r1": True}, session_id="s")).content == "Refunded, see billing."
    assert fresh_refund.runs == 1 and refund.runs == 0
    assert len(fresh.llm.calls) == 1 and len(fresh_sub.llm.calls) == 1


def test_stream_events_report_one_pause_with_the_nested_id(mode: str) -> None:
    agent, _, refund = tree(mode)
    events = collect(agent.stream_events("Refund me", session_id="s"))
    asked = [e for e in events if isinstance(e, ApprovalNeeded)]
    assert [(e.agent, [c.id for c in e.calls]) for e in asked] == [("blogger", ["c1/r1"])]
    kinds = [type(e).__name__ for e in events if not isinstance(e, (ApprovalNeeded,))]
    assert kinds.index("SubAgentStarted") < kinds.index("SubAgentEnded")
    final = events[-1]
    assert isinstance(final, Final) and final.paused and [c.id for c in final.message.content] == ["c1/r1"]
    events = collect(agent.resume_events({"c1/r1": True}, session_id="s"))
    started = next(i for i, e in enumerate(events) if isinstance(e, SubAgentStarted))
    ended = next(i for i, e in enumerate(events) if isinstance(e, SubAgentEnded))
    ran = next(i for i, e in enumerate(events) if isinstance(e, ToolResult) and e.name == "Refund")
    assert started < ran < ended and events[ran].agent == "billing" and events[ran].output == "refunded 5"
    assert [e.name for e in events if isinstance(e, ToolCallStarted) and e.agent == "billing"] == ["Refund"]
    assert isinstance(events[-1], Final) and events[-1].message.content == "Refunded, see billing."
    assert refund.runs == 1


def test_nested_sub_agents_nest_the_ids(mode: str) -> None:
    refund = Refund()
    billing = fc(mode, BILLING, [refund], "billing")
    desk = fc(mode, [calls(("m1", "billing", '{"message": "refund 5"}')), "Desk: done."], [billing.as_tool()], "desk")
    top = fc(mode, [calls(("c1", "desk", '{"message": "help"}')), "All done."], [desk.as_tool()], "top")
    paused = resolve(top("Refund me", session_id="s"))
    assert [c.id for c in paused.content] == ["c1/m1/r1"] and refund.runs == 0
    assert desk.run_state("s/c1").waiting == ["m1/r1"] and billing.run_state("s/c1/m1").waiting == ["r1"]
    assert resolve(top.resume({"c1/m1/r1": True}, session_id="s")).content == "All done."
    assert refund.runs == 1
    assert [len(a.llm.calls) for a in (top, desk, billing)] == [2, 2, 2]


def test_two_gated_calls_decided_one_at_a_time(mode: str) -> None:
    script = [calls(("r1", "Refund", '{"amount": 5}'), ("r2", "Refund", '{"amount": 7}')), "Both handled."]
    agent, sub, refund = tree(mode, billing=script)
    paused = resolve(agent("Refund me", session_id="s"))
    assert [c.id for c in paused.content] == ["c1/r1", "c1/r2"]
    again = resolve(agent.resume({"c1/r2": "too much"}, session_id="s"))
    assert [c.id for c in again.content] == ["c1/r1"] and refund.runs == 0 and len(sub.llm.calls) == 1
    assert resolve(agent.resume({"c1/r1": True}, session_id="s")).content == "Refunded, see billing."
    assert refund.runs == 1
    results = [m for m in sub.llm.calls[1].messages if m["role"] == "tool"]
    assert results[0]["content"] == "refunded 5" and "too much" in results[1]["content"]


def test_outside_a_tool_loop_the_paused_run_is_dropped(mode: str) -> None:
    """Called directly (no loop, no call id: the MCP server's way), nobody can approve: the caller is told so."""
    refund = Refund()
    billing = fc(mode, [calls(("r1", "Refund", '{"amount": 5}'))], [refund], "billing")
    tool = billing.as_tool()
    result = resolve(
        tool({"message": "refund 5"}, session_id="s")
        if mode == "sync"
        else tool.acall({"message": "refund 5"}, session_id="s")
    )
    assert "billing paused for a person's approval" in result.errmsg
    assert refund.runs == 0
    assert billing.state_dict("s/billing/1") == {"memory": []}  # the paused run is gone, nothing half-kept


_PROCESS = """
import json, sys
from approval_tools import Transfer
from plait.agents import FunctionCallingAgent
from plait.llms import GPTAPI
from plait.memory import SessionStore

base_url, folder, step = sys.argv[1:4]
llm = GPTAPI(model_type="m", api_base=base_url, key="k", retry=0)
top_store, sub_store = SessionStore(folder + "/top.db"), SessionStore(folder + "/billing.db")
billing = sub_store.attach(FunctionCallingAgent(llm, [Transfer()], name="billing"))
top = top_store.attach(FunctionCallingAgent(llm, [billing.as_tool()], name="top"))
if step == "pause":
    reply = top("pay bob", session_id="u")
    print(json.dumps({"ids": [c.id for c in reply.content]}))
else:
    print(json.dumps({"content": top.resume(json.loads(step), session_id="u").content}))
top_store.close()
sub_store.close()
"""


def _model(body: dict[str, Any]) -> Any:
    from plait.testing.fake_openai import Reply

    messages = body["messages"]
    offered = [tool["function"]["name"] for tool in body.get("tools") or []]
    if messages[-1]["role"] == "tool":
        return Reply(f"{'top' if 'billing' in offered else 'billing'} says: {messages[-1]['content']}")
    if "billing" in offered:
        return Reply("", tool_calls=[("billing", {"message": "pay bob 5"})])
    return Reply("", tool_calls=[("Transfer", {"to": "bob", "amount": 5})])


def test_a_paused_tree_in_session_stores_survives_a_restart(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    from plait.testing.fake_openai import FakeOpenAIServer

    tests = str(Path(__file__).resolve().parents[1])  # where approval_tools lives
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]),
        "APPROVAL_COUNT_FILE": str(tmp_path / "count"),
    }

    def process(server: FakeOpenAIServer, step: str) -> dict[str, Any]:
        argv = [sys.executable, "-c", _PROCESS, server.base_url, str(tmp_path), step]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))

    with FakeOpenAIServer(handler=_model) as server:
        (call,) = process(server, "pause")["ids"]
        assert call.count("/") == 1  # '<the top's call id>/<billing's call id>'
        assert process(server, json.dumps({call: True})) == {"content": "top says: billing says: sent 5 to bob"}
        asked = len(server.requests)
    assert (tmp_path / "count").read_text().count("ran") == 1
    assert asked == 4  # top, billing (pause); billing, top (resume): nothing asked again
