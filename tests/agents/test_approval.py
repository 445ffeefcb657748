"""Issue 18: tools that need a person's approval pause the run; `resume` takes it up, exactly once.

Each behaviour runs in sync and async from one body (the `mode` fixture), on a scripted
OpenAI-compatible server: the first model turn asks for a lookup (no approval needed) and a
transfer (approval needed); once the request carries tool results, the model answers with
what it saw.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _support import collect, resolve
from plait.actions import BaseAction, tool_api
from plait.agents import (
    AsyncFunctionCallingAgent,
    AsyncStreamingFunctionCallingAgent,
    FunctionCallingAgent,
    StreamingFunctionCallingAgent,
)
from plait.exceptions import LLMError, ResumeError
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.schema import AgentStatusCode, PendingCall
from plait.testing.fake_openai import FakeOpenAIServer, Reply


class Lookup(BaseAction):
    """Look up an account's balance."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    @tool_api
    def run(self, account: str) -> str:
        """Look up an account's balance.

        Args:
            account (str): the account
        """
        self.calls += 1
        return f"{account} has 120"


class Transfer(BaseAction):
    """Move money."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls = 0
        self.paid: list[str] = []

    @tool_api
    def run(self, to: str, amount: int) -> str:
        """Send money.

        Args:
            to (str): who gets it
            amount (int): how much
        """
        self.calls += 1
        self.paid.append(to)
        return f"sent {amount} to {to}"


def model(body: dict[str, Any]) -> Reply:
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        seen = [m["content"] for m in messages if m["role"] == "tool"]
        return Reply("done: " + " | ".join(seen))
    amount = 500 if "big" in messages[-1]["content"] else 5
    return Reply("", tool_calls=[("Lookup", {"account": "alice"}), ("Transfer", {"to": "bob", "amount": amount})])


def _agent(mode: str, server: FakeOpenAIServer, transfer: Transfer | None = None, lookup: Lookup | None = None) -> Any:
    llm = (AsyncGPTAPI if mode == "async" else GPTAPI)(model_type="m", api_base=server.base_url, key="k", retry=0)
    cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
    transfer = transfer if transfer is not None else Transfer(requires_approval=True)
    return cls(llm, [lookup or Lookup(), transfer])


def test_only_the_call_that_needs_approval_waits_and_an_approved_call_runs_once(mode: str) -> None:
    with FakeOpenAIServer(handler=model) as server:
        lookup, transfer = Lookup(), Transfer(requires_approval=True)
        agent = _agent(mode, server, transfer, lookup)
        paused = resolve(agent("pay bob", session_id="s"))
        assert paused.stream_state == AgentStatusCode.INTERRUPTED
        (pending,) = paused.content
        assert isinstance(pending, PendingCall) and pending.name == "Transfer"
        assert pending.arguments == {"to": "bob", "amount": 5}
        assert (lookup.calls, transfer.calls, len(server.requests)) == (1, 0, 1)  # nothing sent to the model yet
        reply = resolve(agent.resume({pending.id: True}, session_id="s"))
        assert reply.stream_state == AgentStatusCode.END and reply.content == "done: alice has 120 | sent 5 to bob"
        assert (lookup.calls, transfer.calls, len(server.requests)) == (1, 1, 2)
        with pytest.raises(ResumeError, match="no paused run"):
            resolve(agent.resume({pending.id: True}, session_id="s"))
        assert transfer.calls == 1
        roles = [m["role"] for m in server.requests[-1]["messages"]]
        assert roles[-3:] == ["assistant", "tool", "tool"]
        assert len(agent.memory.get_memory("s")) == 5  # question, tool calls, two results, answer


def test_a_refusal_with_a_reason_is_what_the_model_sees_and_the_tool_never_runs(mode: str) -> None:
    with FakeOpenAIServer(handler=model) as server:
        transfer = Transfer(requires_approval=True)
        agent = _agent(mode, server, transfer)
        (pending,) = resolve(agent("pay bob", session_id="s")).content
        reply = resolve(agent.resume({pending.id: "Bob is not a known payee."}, session_id="s"))
        assert reply.content.endswith("Bob is not a known payee.") and transfer.calls == 0
        # the model is told the call did not run, and why (issue 36 item 6: before, only the bare reason)
        assert "A person refused this call: it did not run. Their reason: Bob is not a known payee." in reply.content
        (pending,) = resolve(agent("pay bob again", session_id="s")).content
        reply = resolve(agent.resume({pending.id: False}, session_id="s"))
        assert "A person refused this call" in reply.content and transfer.calls == 0


def test_a_decision_for_a_call_that_does_not_wait_and_a_call_on_a_paused_session_are_refused(mode: str) -> None:
    with FakeOpenAIServer(handler=model) as server:
        transfer = Transfer(requires_approval=True)
        agent = _agent(mode, server, transfer)
        with pytest.raises(ResumeError, match="no paused run"):
            resolve(agent.resume({"x": True}, session_id="s"))
        (pending,) = resolve(agent("pay bob", session_id="s")).content
        with pytest.raises(ResumeError, match="no call 'nope' waits") as info:
            resolve(agent.resume({"nope": True}, session_id="s"))
        assert info.value.waiting == [pending.id]
        with pytest.raises(ResumeError, match="waits for decisions"):
            resolve(agent("something else", session_id="s"))
        assert len(server.requests) == 1 and transfer.calls == 0
        agent.reset("s")  # a reset drops the paused run
        assert resolve(agent("pay bob", session_id="s")).stream_state == AgentStatusCode.INTERRUPTED


def test_a_paused_state_through_json_resumes_in_a_fresh_agent(mode: str) -> None:
    with FakeOpenAIServer(handler=model) as server:
        first = _agent(mode, server)
        (pending,) = resolve(first("pay bob", session_id="s")).content
        saved = json.loads(json.dumps(first.state_dict("s")))
        transfer, lookup = Transfer(requires_approval=True), Lookup()
        fresh = _agent(mode, server, transfer, lookup)
        fresh.load_state_dict(saved, session_id="s")
        reply = resolve(fresh.resume({pending.id: True}, session_id="s"))
        assert reply.content == "done: alice has 120 | sent 5 to bob"
        assert (lookup.calls, transfer.calls) == (0, 1)  # the lookup ran before the pause, in the first agent
        assert fresh.run_state("s") is None


def test_two_sessions_paused_at_once_resume_in_either_order(mode: str) -> None:
    with FakeOpenAIServer(handler=model) as server:
        transfer = Transfer(requires_approval=True)
        agent = _agent(mode, server, transfer)
        (a,) = resolve(agent("pay bob", session_id="a")).content
        (b,) = resolve(agent("pay bob big", session_id="b")).content
        assert b.arguments["amount"] == 500
        assert resolve(agent.resume({b.id: True}, session_id="b")).content.endswith("sent 500 to bob")
        assert resolve(agent.resume({a.id: "no"}, session_id="a")).content.endswith("no")
        assert transfer.calls == 1


def test_a_rule_decides_per_call() -> None:
    with FakeOpenAIServer(handler=model) as server:
        transfer = Transfer(requires_approval=lambda name, args: args.get("amount", 0) > 100)
        agent = _agent("sync", server, transfer)
        assert agent("pay bob").content == "done: alice has 120 | sent 5 to bob"  # 5: no approval needed
        paused = agent("pay bob big")
        assert paused.stream_state == AgentStatusCode.INTERRUPTED and paused.content[0].arguments["amount"] == 500


def test_an_api_marked_with_tool_api_waits_and_a_broken_rule_fails_closed() -> None:
    class Bank(BaseAction):
        @tool_api(requires_approval=True)
        def pay(self, to: str) -> str:
            """Pay someone.

            Args:
                to (str): who
            """
            return "paid"

        @tool_api
        def balance(self) -> str:
            """The balance."""
            return "120"

    def broken(name: str, arguments: Any) -> bool:
        raise RuntimeError("policy service down")

    bank = Bank()
    assert bank.needs_approval("pay", {"to": "bob"}) and not bank.needs_approval("balance", {})
    assert Transfer(requires_approval=broken).needs_approval("run", {"amount": 1})


def test_streaming_agents_end_with_the_interrupted_message_and_resume_streams(mode: str) -> None:
    with FakeOpenAIServer(handler=model) as server:
        llm = (AsyncGPTAPI if mode == "async" else GPTAPI)(model_type="m", api_base=server.base_url, key="k", retry=0)
        cls = AsyncStreamingFunctionCallingAgent if mode == "async" else StreamingFunctionCallingAgent
        transfer = Transfer(requires_approval=True)
        agent = cls(llm, [Lookup(), transfer])
        chunks = resolve(collect(agent("pay bob", session_id="s")))
        assert chunks[-1].stream_state == AgentStatusCode.INTERRUPTED
        (pending,) = chunks[-1].content
        chunks = resolve(collect(agent.resume({pending.id: True}, session_id="s")))
        assert chunks[-1].stream_state == AgentStatusCode.END and chunks[-1].content.endswith("sent 5 to bob")
        assert transfer.calls == 1


def test_a_text_protocol_agent_pauses_too_and_its_calls_get_ids(mode: str) -> None:
    from plait.agents.react import AsyncReAct, ReAct
    from plait.testing import scripted_llm

    transfer = Transfer(requires_approval=True)
    script = ['Thought: pay\nAction: Transfer\nAction Input: {"to": "bob", "amount": 5}', "Final Answer: paid"]
    llm = scripted_llm(script, mode)
    agent = (AsyncReAct if mode == "async" else ReAct)(llm, [transfer])
    paused = resolve(agent("pay bob"))
    (pending,) = paused.content
    assert paused.stream_state == AgentStatusCode.INTERRUPTED and pending.id == "call-0" and transfer.calls == 0
    assert resolve(agent.resume({"call-0": True})).content == "paid" and transfer.calls == 1
    observation = [m["content"] for m in llm.calls[1].messages if "sent 5 to bob" in str(m["content"])]
    assert observation  # the model saw the result of the approved call


def test_a_failed_resume_rolls_the_paused_turn_back_and_the_run_is_over(mode: str) -> None:
    with FakeOpenAIServer(handler=model) as server:
        transfer = Transfer(requires_approval=True)
        agent = _agent(mode, server, transfer)
        (pending,) = resolve(agent("pay bob", session_id="s")).content
        server.stop()  # the model is gone: the resumed run fails after the approved call ran
        with pytest.raises(LLMError):
            resolve(agent.resume({pending.id: True}, session_id="s"))
    assert transfer.calls == 1 and agent.run_state("s") is None
    assert agent.memory.get_memory("s") == []  # the paused turn is rolled back whole: no dangling tool call


_PROCESS = """
import json, os, sys
from approval_tools import Lookup, Transfer
from plait.agents import FunctionCallingAgent
from plait.exceptions import ResumeError
from plait.llms import GPTAPI
from plait.memory import SessionStore

base_url, db, step = sys.argv[1:4]

store = SessionStore(db)
llm = GPTAPI(model_type="m", api_base=base_url, key="k", retry=0)
agent = store.attach(FunctionCallingAgent(llm, [Lookup(), Transfer()]))
if step == "pause":
    reply = agent("pay bob", session_id="u")
    print(json.dumps({"state": int(reply.stream_state), "ids": [c.id for c in reply.content]}))
else:
    try:
        decisions = json.loads(step)
        reply = agent.resume(decisions, session_id="u")
        print(json.dumps({"content": reply.content}))
    except ResumeError as exc:
        print(json.dumps({"error": str(exc)}))
store.close()
"""


def _process(server: FakeOpenAIServer, db: Any, counter: Any, step: str, crash: bool = False) -> dict[str, Any]:
    import os
    import subprocess
    import sys

    tests = str(Path(__file__).resolve().parents[1])  # where approval_tools lives
    path = os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])
    env = {
        **os.environ,
        "PYTHONPATH": path,
        "APPROVAL_COUNT_FILE": str(counter),
        **({"CRASH_IN_TOOL": "1"} if crash else {}),
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROCESS, server.base_url, str(db), step],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    if crash:
        assert done.returncode == 9, done.stderr
        return {}
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_paused_session_in_a_session_store_survives_a_restart_and_resumes_once(tmp_path: Any) -> None:
    db, counter = tmp_path / "s.db", tmp_path / "count"
    with FakeOpenAIServer(handler=model) as server:
        paused = _process(server, db, counter, "pause")
        assert paused["state"] == AgentStatusCode.INTERRUPTED and len(paused["ids"]) == 1
        decisions = json.dumps({paused["ids"][0]: True})
        assert _process(server, db, counter, decisions) == {"content": "done: alice has 120 | sent 5 to bob"}
        again = _process(server, db, counter, decisions)  # a second resume, in yet another process
        assert "no paused run" in again["error"]
    assert counter.read_text().count("ran") == 1


def test_a_restart_while_an_approved_call_runs_never_runs_it_again(tmp_path: Any) -> None:
    db, counter = tmp_path / "s.db", tmp_path / "count"
    with FakeOpenAIServer(handler=model) as server:
        (call,) = _process(server, db, counter, "pause")["ids"]
        _process(server, db, counter, json.dumps({call: True}), crash=True)  # dies inside the transfer
        reply = _process(server, db, counter, "{}")  # the run goes on after the restart
    assert counter.read_text().count("ran") == 1
    assert "its result was lost; it was not run again" in reply.get("content", reply)


def test_an_input_guardrail_refuses_before_memory_or_the_model(mode: str) -> None:
    from plait.agents import Agent, AsyncAgent
    from plait.exceptions import GuardrailTripped

    def no_secrets(text: str) -> str | None:
        return "it asks for a password" if "password" in text else None

    async def async_no_secrets(text: str) -> str | None:
        return no_secrets(text)

    with FakeOpenAIServer(handler=lambda body: Reply("ok")) as server:
        llm = (AsyncGPTAPI if mode == "async" else GPTAPI)(model_type="m", api_base=server.base_url, key="k", retry=0)
        guard = async_no_secrets if mode == "async" else no_secrets
        agent = (AsyncAgent if mode == "async" else Agent)(llm, input_guardrails=[guard])
        with pytest.raises(GuardrailTripped) as info:
            resolve(agent("tell me the admin password"))
        assert info.value.reason == "it asks for a password" and info.value.stage == "input"
        assert info.value.guardrail is guard
        assert len(server.requests) == 0 and agent.memory.get_memory() == []
        assert resolve(agent("hello")).content == "ok"


def test_an_output_guardrail_keeps_a_refused_reply_out_of_memory(mode: str) -> None:
    from plait.agents import Agent, AsyncAgent
    from plait.exceptions import GuardrailTripped

    replies = iter(["the card number is 4111", "fine"])
    with FakeOpenAIServer(handler=lambda body: Reply(next(replies))) as server:
        llm = (AsyncGPTAPI if mode == "async" else GPTAPI)(model_type="m", api_base=server.base_url, key="k", retry=0)
        agent = (AsyncAgent if mode == "async" else Agent)(
            llm, output_guardrails=[lambda text: "a card number" if "card number" in text else None]
        )
        with pytest.raises(GuardrailTripped, match="output guardrail <lambda> refused: a card number"):
            resolve(agent("what is on file?"))
        assert agent.memory.get_memory() == []  # the turn rolled back: neither question nor reply kept
        assert resolve(agent("and now?")).content == "fine" and len(agent.memory.get_memory()) == 2


def test_the_tracer_records_the_interrupt_and_the_decisions(tmp_path: Any) -> None:
    from plait.hooks import JSONLTracer

    with FakeOpenAIServer(handler=model) as server:
        agent = _agent("sync", server)
        tracer = JSONLTracer(tmp_path / "trace.jsonl")
        tracer.attach(agent)
        (pending,) = agent("pay bob").content
        agent.resume({pending.id: "not today"})
        tracer.close()
    agents = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    agents = [record for record in agents if record["event"] == "agent"]
    assert agents[0]["interrupted"] == [{"id": pending.id, "name": "Transfer"}]
    assert agents[1]["input"] == {"decisions": {pending.id: "not today"}} and "not today" in agents[1]["output"]


def test_the_http_server_answers_the_interrupt_and_takes_decisions_on_its_resume_route(mode: str) -> None:
    from plait.distributed.http_serve import AgentAPIServer, HTTPAgentClient
    from plait.exceptions import RemoteAgentError

    with FakeOpenAIServer(handler=model) as upstream:
        transfer = Transfer(requires_approval=True)
        server = AgentAPIServer(_agent(mode, upstream, transfer), port=0).start()
        client = HTTPAgentClient(port=server.port)
        try:
            paused = client("pay bob", session_id="s")
            assert paused.stream_state == AgentStatusCode.INTERRUPTED
            (pending,) = paused.content
            assert pending == PendingCall(pending.id, "Transfer", {"to": "bob", "amount": 5})
            with pytest.raises(RemoteAgentError, match="waits for decisions"):
                client("something else", session_id="s")
            reply = client.resume({pending.id: True}, session_id="s")
            assert reply.content == "done: alice has 120 | sent 5 to bob" and transfer.calls == 1
            with pytest.raises(RemoteAgentError, match="no paused run"):
                client.resume({pending.id: True}, session_id="s")
            assert transfer.calls == 1
        finally:
            client.close()
            server.stop()


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ([], "JSON object"),
        ({"decisions": {}}, "1 to 64 call ids"),
        ({"decisions": {"a": 1}}, "true, false or a reason"),
        ({"decisions": {"a": "x" * 5000}}, "at most 4000"),
        ({"decisions": {"a": {"action": "accept", "content": {"note": "x" * 5000}}}}, "over 4000 characters of JSON"),
        ({"decisions": {str(i): True for i in range(65)}}, "1 to 64 call ids"),
        ({"decisions": {"a": True}, "extra_body": {}}, "unknown field"),
        ({"decisions": {"a": True}, "session_id": [1]}, "session_id must be"),
    ],
)
def test_a_resume_body_is_checked(body: object, says: str) -> None:
    from plait.distributed.http_serve.requests import parse_resume_request
    from plait.exceptions import UserError

    with pytest.raises(UserError, match=says):
        parse_resume_request(body)


def test_a_resume_body_may_answer_a_question() -> None:
    from plait.distributed.http_serve.requests import parse_resume_request

    answer = {"action": "accept", "content": {"guests": 4}}
    assert parse_resume_request({"decisions": {"a": answer, "b": "decline"}}).decisions == {"a": answer, "b": "decline"}


def _post(url: str, body: dict[str, Any], session: str | None) -> tuple[int, dict[str, Any]]:
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json", **({"X-Session-Id": session} if session else {})}
    request = urllib.request.Request(url, json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_openai_route_reports_a_pause_as_tool_calls_the_client_answers(mode: str) -> None:
    from plait.distributed.http_serve import AgentAPIServer

    with FakeOpenAIServer(handler=model) as upstream:
        transfer = Transfer(requires_approval=True)
        server = AgentAPIServer(_agent(mode, upstream, transfer), port=0).start()
        url = server.url + "/v1/chat/completions"
        try:
            question = {"role": "user", "content": "pay bob"}
            status, paused = _post(url, {"model": "m", "messages": [question]}, "s1")
            choice = paused["choices"][0]
            assert status == 200 and choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
            (call,) = choice["message"]["tool_calls"]
            assert call["function"]["name"] == "Transfer"
            assert json.loads(call["function"]["arguments"]) == {"to": "bob", "amount": 5}
            answer = {"role": "tool", "tool_call_id": call["id"], "content": "approve"}
            status, reply = _post(url, {"model": "m", "messages": [question, choice["message"], answer]}, "s1")
            assert status == 200 and reply["choices"][0]["message"]["content"].endswith("sent 5 to bob")
            assert reply["choices"][0]["finish_reason"] == "stop" and transfer.calls == 1
            # the same pause answered with a reason, in another session
            _, paused = _post(url, {"model": "m", "messages": [question]}, "s2")
            (call,) = paused["choices"][0]["message"]["tool_calls"]
            refusal = {"role": "tool", "tool_call_id": call["id"], "content": "Bob is blocked."}
            _, reply = _post(url, {"model": "m", "messages": [question, refusal]}, "s2")
            assert reply["choices"][0]["message"]["content"].endswith("Bob is blocked.") and transfer.calls == 1
            status, error = _post(url, {"model": "m", "messages": [question]}, None)  # no session: no pause to answer
            assert status == 409 and "X-Session-Id" in error["error"]["message"] and transfer.calls == 1
        finally:
            server.stop()


def _twins(body: dict[str, Any]) -> Reply:
    """A model that gives two payments of one turn the same call id ``X`` (issue 33)."""
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return Reply("done: " + " | ".join(m["content"] for m in messages if m["role"] == "tool"))
    calls = [
        {"id": "X", "name": "Transfer", "arguments": {"to": "bob", "amount": 1}},
        {"id": "X", "name": "Transfer", "arguments": {"to": "mallory", "amount": 999}},
    ]
    return Reply("", tool_calls=calls)


def test_one_decision_runs_one_call_when_the_model_repeats_a_call_id(mode: str) -> None:
    with FakeOpenAIServer(handler=_twins) as server:
        transfer = Transfer(requires_approval=True)
        agent = _agent(mode, server, transfer)
        bob, mallory = resolve(agent("pay", session_id="s")).content
        assert (bob.id, bob.arguments["to"]) == ("X", "bob")  # the first holder keeps the model's id
        assert mallory.id != "X" and mallory.arguments["to"] == "mallory"
        still = resolve(agent.resume({"X": True}, session_id="s"))
        assert still.stream_state == AgentStatusCode.INTERRUPTED and [c.id for c in still.content] == [mallory.id]
        assert transfer.paid == ["bob"]
        reply = resolve(agent.resume({mallory.id: False}, session_id="s"))
        assert reply.stream_state == AgentStatusCode.END and transfer.paid == ["bob"]
        # the model saw each call and its result under one id of its own
        sent = server.requests[-1]["messages"]
        assert [c["id"] for c in sent[-3]["tool_calls"]] == ["X", mallory.id]
        assert [m["tool_call_id"] for m in sent[-2:]] == ["X", mallory.id]


def test_one_decision_over_http_resume_runs_one_call_when_ids_repeat() -> None:
    from plait.distributed.http_serve import AgentAPIServer, HTTPAgentClient

    with FakeOpenAIServer(handler=_twins) as upstream:
        transfer = Transfer(requires_approval=True)
        server = AgentAPIServer(_agent("sync", upstream, transfer), port=0).start()
        client = HTTPAgentClient(port=server.port)
        try:
            bob, mallory = client("pay", session_id="s").content
            assert bob.id != mallory.id
            still = client.resume({"X": True}, session_id="s")
            assert still.stream_state == AgentStatusCode.INTERRUPTED and transfer.paid == ["bob"]
            assert [c.arguments["to"] for c in still.content] == ["mallory"]
        finally:
            client.close()
            server.stop()
