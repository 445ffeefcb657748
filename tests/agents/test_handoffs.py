"""Issue 39 item 2: handoffs — a triage agent hands the conversation to a specialist, by declared history policy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from _support import collect, resolve
from plait.agents import AsyncFunctionCallingAgent, FunctionCallingAgent
from plait.agents.handoff import Handoff
from plait.events import SubAgentStarted, TextDelta
from plait.exceptions import UserError
from plait.llms.response import ModelResponse, ToolCall
from plait.memory.session_store import SessionStore
from plait.testing import scripted_llm


def calls(*items: tuple[str, str, str]) -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall(i, n, a) for i, n, a in items], finish_reason="tool_calls")


def lookup(order: str) -> str:
    """Look an order up.

    Args:
        order: The order number.
    """
    return f"order {order}: shipped"


def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order number.
    """
    return f"refunded {order}"


def fc(mode: str) -> Any:
    return FunctionCallingAgent if mode == "sync" else AsyncFunctionCallingAgent


def team(mode: str, front: list[Any], back: list[Any], **handoff: Any) -> tuple[Any, Any]:
    """A triage agent (tool: lookup) that may hand off to refunds (tool: refund)."""
    refunds = fc(mode)(scripted_llm(back, mode), [refund], "You handle refunds.", name="refunds")
    triage = fc(mode)(
        scripted_llm(front, mode), [lookup], "Route the user.", name="triage", handoffs=[Handoff(refunds, **handoff)]
    )
    return triage, refunds


def shown(call: Any) -> list[tuple[str, str]]:
    """A model request's conversation as (role, content) pairs, system and tool parts left out."""
    return [(m["role"], m["content"]) for m in call.messages if m["role"] in ("user", "assistant") and m["content"]]


def transfer(call_id: str = "t1") -> ModelResponse:
    return calls((call_id, "transfer_to_refunds", "{}"))


def test_the_model_sees_a_transfer_tool_and_the_target_answers_the_turn(mode: str) -> None:
    triage, refunds = team(mode, ["Hello! How can I help?", transfer()], ["Refunded order 7.", "Anything else?"])
    assert resolve(triage("hi", session_id="s")).content == "Hello! How can I help?"
    reply = resolve(triage("refund order 7 please", session_id="s"))
    assert reply.content == "Refunded order 7." and reply.sender == "refunds"
    tools = [t["function"]["name"] for t in triage.llm.calls[0].params["tools"]]
    assert tools == ["lookup", "transfer_to_refunds"]
    (asked,) = refunds.llm.calls
    assert [t["function"]["name"] for t in asked.params["tools"]] == ["refund"]  # never the sender's tools
    assert not any(m["role"] == "tool" or m.get("tool_calls") for m in asked.messages)
    assert shown(asked) == [
        ("user", "hi"),
        ("assistant", "Hello! How can I help?"),
        ("user", "refund order 7 please"),
    ]
    # sticky: the next turn goes straight to refunds, which remembers the conversation
    assert resolve(triage("thanks", session_id="s")).content == "Anything else?"
    assert len(triage.llm.calls) == 2 and shown(refunds.llm.calls[1])[-2:] == [
        ("assistant", "Refunded order 7."),
        ("user", "thanks"),
    ]


def test_history_none_shows_only_this_turn(mode: str) -> None:
    triage, refunds = team(mode, ["Hi!", transfer()], ["Done."], history="none")
    resolve(triage("hi", session_id="s"))
    resolve(triage("refund 7", session_id="s"))
    assert shown(refunds.llm.calls[0]) == [("user", "refund 7")]


def test_history_summary_sums_up_the_earlier_turns(mode: str) -> None:
    front = ["Hi Ada!", transfer(), "Ada greeted; she is a long-time customer."]  # the last: the summary
    triage, refunds = team(mode, front, ["Done, Ada."], history="summary")
    resolve(triage("hi, I am Ada", session_id="s"))
    assert resolve(triage("refund 7", session_id="s")).content == "Done, Ada."
    summarised = triage.llm.calls[2]
    assert "hi, I am Ada" in summarised.messages[-1]["content"] and "refund 7" not in summarised.messages[-1]["content"]
    assert shown(refunds.llm.calls[0]) == [
        ("user", "Summary of the conversation so far:\nAda greeted; she is a long-time customer."),
        ("user", "refund 7"),
    ]


def test_history_function_decides_what_the_target_sees(mode: str) -> None:
    seen: list[list[str]] = []

    def last_two(messages: list[Any]) -> list[Any]:
        seen.append([str(m.content) for m in messages])
        return messages[-1:]

    triage, refunds = team(mode, ["Hi!", transfer()], ["Done."], history=last_two)
    resolve(triage("hi", session_id="s"))
    resolve(triage("refund 7", session_id="s"))
    assert seen == [["hi", "Hi!", "refund 7"]]
    assert shown(refunds.llm.calls[0]) == [("user", "refund 7")]


def test_a_handoff_that_is_not_sticky_comes_back(mode: str) -> None:
    triage, _ = team(mode, [transfer(), "Back with triage."], ["Refunded."], sticky=False)
    assert resolve(triage("refund 7", session_id="s")).content == "Refunded."
    assert resolve(triage("and order 8?", session_id="s")).content == "Back with triage."
    # triage's model sees the target's reply as its own turn
    assert shown(triage.llm.calls[1])[-2:] == [("assistant", "Refunded."), ("user", "and order 8?")]


def test_the_target_runs_its_own_tools(mode: str) -> None:
    back = [calls(("r1", "refund", '{"order": "7"}')), "Refunded 7 for you."]
    triage, refunds = team(mode, [transfer()], back)
    assert resolve(triage("refund 7", session_id="s")).content == "Refunded 7 for you."
    assert refunds.llm.calls[1].messages[-1]["content"] == "refunded 7"


def test_state_survives_json_and_a_session_store_restart(mode: str, tmp_path: Any) -> None:
    triage, _ = team(mode, ["Hi!", transfer()], ["Refunded."])
    resolve(triage("hi", session_id="s"))
    resolve(triage("refund 7", session_id="s"))
    state = json.loads(json.dumps(triage.state_dict("s")))
    again, refunds = team(mode, [], ["Anything else?"])
    again.load_state_dict(state, "s")
    assert resolve(again("thanks", session_id="s")).content == "Anything else?"  # still with refunds
    assert shown(refunds.llm.calls[0])[-2:] == [("assistant", "Refunded."), ("user", "thanks")]

    store = SessionStore(tmp_path / "sessions.db")
    first, _ = team(mode, ["Hi!", transfer()], ["Refunded."])
    store.attach(first)
    resolve(first("hi", session_id="t"))
    resolve(first("refund 7", session_id="t"))
    store.close()
    store = SessionStore(tmp_path / "sessions.db")
    later, refunds = team(mode, [], ["Anything else?"])
    store.attach(later)
    assert resolve(later("thanks", session_id="t")).content == "Anything else?"
    assert shown(refunds.llm.calls[0])[-2:] == [("assistant", "Refunded."), ("user", "thanks")]
    store.close()


def test_stream_events_show_the_target(mode: str) -> None:
    triage, _ = team(mode, [transfer()], ["Refunded."])
    events = collect(triage.stream_events("refund 7"))
    started = [e for e in events if isinstance(e, SubAgentStarted)]
    assert [e.agent for e in started] == ["refunds"]
    assert [e.text for e in events if isinstance(e, TextDelta)][-1] == "Refunded."


def test_mistakes_fail_at_construction() -> None:
    refunds = FunctionCallingAgent(scripted_llm([]), [], name="refunds")
    with pytest.raises(UserError, match="history must be one of"):
        Handoff(refunds, history="everything")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="share the tool name 'transfer_to_refunds'"):
        FunctionCallingAgent(scripted_llm([]), [], handoffs=[refunds, Handoff(refunds)])


def test_a_streaming_agent_streams_the_target_answer() -> None:
    from plait.agents import StreamingFunctionCallingAgent

    back = scripted_llm(["Refunded order 7.", "Glad to help with that."])
    refunds = StreamingFunctionCallingAgent(back, [refund], name="refunds")
    triage = StreamingFunctionCallingAgent(scripted_llm([transfer()]), [lookup], name="triage", handoffs=[refunds])
    for question, answer in (("refund 7", "Refunded order 7."), ("thanks", "Glad to help with that.")):
        chunks = list(triage(question))  # the second turn is handed on (sticky): streamed the same way
        assert chunks[-1].content == answer and chunks[-1].sender == "refunds"
        assert any(c.content and c.content != chunks[-1].content for c in chunks[:-1])  # pieces before the end


def payer(ran: list[str]) -> Any:
    """A refunds tool that needs a person's approval; the orders it paid go into `ran`."""
    from plait.actions import tool_api

    @tool_api(requires_approval=True)
    def pay(order: str) -> str:
        """Pay an order back.

        Args:
            order: The order number.
        """
        ran.append(order)
        return f"paid {order}"

    return pay


def test_an_approval_inside_the_target_pauses_the_front_agent_and_resumes_there(mode: str) -> None:
    from plait.schema import AgentStatusCode

    ran: list[str] = []
    pay = payer(ran)
    refunds = fc(mode)(
        scripted_llm([calls(("p1", "pay", '{"order": "7"}')), "Paid back 7.", "Bye."], mode), [pay], name="refunds"
    )
    triage = fc(mode)(scripted_llm([transfer()], mode), [lookup], name="triage", handoffs=[refunds])
    paused = resolve(triage("refund 7", session_id="s"))
    assert paused.stream_state == AgentStatusCode.INTERRUPTED and ran == []
    assert [call.id for call in paused.content] == ["t1/p1"]
    state = json.loads(json.dumps({"triage": triage.state_dict("s")}))  # the whole tree, between pause and resume
    triage.load_state_dict(state["triage"], "s")
    reply = resolve(triage.resume({"t1/p1": True}, session_id="s"))
    assert (reply.content, reply.sender) == ("Paid back 7.", "refunds") and ran == ["7"]
    assert len(triage.llm.calls) == 1  # the front agent's model was not asked again
    assert resolve(triage("thanks", session_id="s")).content == "Bye."  # the session stays with refunds
    assert ran == ["7"]


def test_a_pause_in_a_later_sticky_turn_pauses_the_front_agent_and_resumes_there(mode: str) -> None:
    """A later turn is handed on by a transfer the agent plans itself: the same pause and resume, no model call."""
    from plait.events import ApprovalNeeded, ToolCallStarted
    from plait.schema import AgentStatusCode

    ran: list[str] = []
    pay = payer(ran)
    back = ["Which order?", calls(("p1", "pay", '{"order": "7"}')), "Paid back 7."]
    refunds = fc(mode)(scripted_llm(back, mode), [pay], name="refunds")
    triage = fc(mode)(scripted_llm([transfer()], mode), [lookup], name="triage", handoffs=[refunds])
    assert resolve(triage("a refund, please", session_id="s")).content == "Which order?"
    events = collect(triage.stream_events("order 7", session_id="s"))
    paused = events[-1].message
    assert paused.stream_state == AgentStatusCode.INTERRUPTED and ran == []
    (waiting,) = [call.id for call in paused.content]
    assert waiting.startswith("handoff-") and waiting.endswith("/p1")  # '<handing-on call>/<the target's call>'
    assert [e.name for e in events if isinstance(e, ToolCallStarted)] == []  # handing on is no tool call to show
    assert [e.calls[0].id for e in events if isinstance(e, ApprovalNeeded)] == [waiting]
    state = json.loads(json.dumps(triage.state_dict("s")))  # the whole tree, between pause and resume
    triage.load_state_dict(state, "s")
    reply = resolve(triage.resume({waiting: True}, session_id="s"))
    assert (reply.content, reply.sender) == ("Paid back 7.", "refunds") and ran == ["7"]
    assert len(triage.llm.calls) == 1  # the front agent's model was asked once, in the first turn
    front = [(m.sender, m.content) for m in triage.memory.get_memory("s") if isinstance(m.content, str)]
    assert front[-3:] == [("refunds", "Which order?"), ("user", "order 7"), ("refunds", "Paid back 7.")]
    assert not any(  # the handing-on call is not part of the front agent's conversation
        isinstance(m.extra_info, dict) and str(m.extra_info.get("tool_call_id", "")).startswith("handoff-")
        for m in triage.memory.get_memory("s")
    )


def test_draw_shows_a_handoff_as_one_dashed_arrow() -> None:
    from plait import draw

    triage, _ = team("sync", [], [])
    picture = draw(triage)
    assert '-.->|"transfer_to_refunds"|' in picture
    assert "<b>transfer_to_refunds</b>" not in picture  # not also drawn as a tool
    assert "<b>lookup</b>" in picture and "<b>refund</b>" in picture  # each agent's own tools
