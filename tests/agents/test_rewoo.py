from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from _support import resolve
from plait.agents.rewoo import AsyncReWOO, ReWOO
from plait.exceptions import UserError
from plait.schema import ActionStatusCode
from plait.testing import scripted_llm


def search(query: str) -> str:
    """Search the web.

    Args:
        query: what to look for
    """
    return "London" if "2012" in query else f"results for {query}"


def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    if city == "Atlantis":
        raise LookupError("unknown city Atlantis")
    return f"rainy in {city}"


MEETING = threading.Barrier(4, timeout=60)
"""Where four `slow` steps meet: each goes on only once all four are in flight (never, one after another)."""


def slow(n: int) -> int:
    """Wait until four calls of it are running, then echo.

    Args:
        n: a number
    """
    MEETING.wait()
    return n


PLAN = "Plan: Find the host city.\n#E1 = search[2012 Olympics host]\nPlan: Get its weather.\n#E2 = weather[#E1]"


def rewoo(mode: str, script: list[Any], **kwargs: Any) -> ReWOO:
    cls = ReWOO if mode == "sync" else AsyncReWOO
    return cls(scripted_llm(script, mode), [search, weather, slow], **kwargs)


def test_plan_work_solve(mode: str) -> None:
    agent = rewoo(mode, [PLAN, "Answer: It is rainy in London."])
    reply = resolve(agent("What is the weather in the 2012 Olympics host city?"))
    assert reply.content == "It is rainy in London."
    planner, solver = agent.llm.calls
    assert "search[input]: Search the web." in planner.messages[0]["content"]
    assert "search, weather, slow" in planner.messages[0]["content"]
    request = solver.messages[-1]["content"]
    assert "#E1 = search[2012 Olympics host]\nEvidence: London" in request
    assert "#E2 = weather[#E1]\nEvidence: rainy in London" in request
    assert "Question: What is the weather in the 2012 Olympics host city?" in request
    steps = reply.extra_info["intermediate_steps"]
    assert [(s["evidence"], s["tool_input"], s["observation"]) for s in steps] == [
        ("#E1", "2012 Olympics host", "London"),
        ("#E2", "London", "rainy in London"),
    ]
    assert reply.extra_info["plan"] == PLAN
    assert [m["sender"] for m in agent.state_dict()["memory"]] == ["user", agent.name]


def test_tool_error_becomes_evidence(mode: str) -> None:
    agent = rewoo(mode, ["Plan: weather\n#E1 = weather[Atlantis]", "I could not find it."])
    reply = resolve(agent("Weather in Atlantis?"))
    assert reply.content == "I could not find it."
    assert "Evidence: LookupError: unknown city Atlantis" in agent.llm.calls[1].messages[-1]["content"]
    assert reply.extra_info["intermediate_steps"][0]["state"] == ActionStatusCode.API_ERROR


def test_malformed_plan_is_reasked_once_with_a_hint(mode: str) -> None:
    bad = "Plan: both at once\n#E1 = search[a]\n#E2 = search[b]"
    agent = rewoo(mode, [bad, PLAN, "rainy"])
    reply = resolve(agent("Weather?"))
    assert reply.content == "rainy"
    retry = agent.llm.calls[1].messages
    assert retry[-2] == {"role": "assistant", "content": bad}
    assert "more than one #E line" in retry[-1]["content"] and "search, weather, slow" in retry[-1]["content"]
    agent.llm.assert_complete()


def test_unknown_tool_in_plan_is_reasked_with_valid_tools(mode: str) -> None:
    agent = rewoo(mode, ["Plan: look\n#E1 = google[x]", "Plan: look\n#E1 = search[x]", "done"])
    assert resolve(agent("x?")).content == "done"
    assert "unknown tool 'google'. Valid tools: search, weather, slow" in agent.llm.calls[1].messages[-1]["content"]


def test_out_of_planner_attempts_gives_a_clear_failure(mode: str) -> None:
    agent = rewoo(mode, ["no plan", "#E1 = search x"])
    reply = resolve(agent("x?"))
    assert reply.content.startswith("I could not work out a usable plan for this request after 2 attempt(s).")
    assert "before any 'Plan:'" in reply.content
    assert [e["planner_output"] for e in reply.extra_info["plan_errors"]] == ["no plan", "#E1 = search x"]
    agent.llm.assert_complete()  # no solver call, no tool ran


def test_history_reaches_planner_and_solver(mode: str) -> None:
    agent = rewoo(mode, ["Plan: a\n#E1 = search[x]", "first", "Plan: b\n#E1 = search[y]", "second"])
    resolve(agent("one"))
    resolve(agent("two"))
    planner, solver = agent.llm.calls[2:]
    assert [m["content"] for m in planner.messages[1:]] == ["one", "first", "two"]
    assert [m["content"] for m in solver.messages[:2]] == ["one", "first"]
    assert "Question: two" in solver.messages[-1]["content"]


def test_independent_steps_run_concurrently_in_async_mode() -> None:
    plan = "\n".join(f"Plan: p{i}\n#E{i} = slow[{i}]" for i in range(1, 5)) + "\nPlan: sum\n#E5 = search[#E1 #E4]"
    agent = rewoo("async", [plan, "ok"])
    MEETING.reset()
    reply = asyncio.run(agent("go"))
    steps = reply.extra_info["intermediate_steps"]
    assert [step["observation"] for step in steps[:4]] == ["1", "2", "3", "4"]  # all four met: one wave
    assert steps[-1]["tool_input"] == "1 4"


def test_json_inputs_get_evidence_substituted(mode: str) -> None:
    plan = 'Plan: a\n#E1 = search[2012]\nPlan: b\n#E2 = weather[{"city": "#E1"}]'
    agent = rewoo(mode, [plan, "ok"])
    reply = resolve(agent("?"))
    assert reply.extra_info["intermediate_steps"][1]["observation"] == "rainy in London"


def test_max_turn_must_allow_a_plan() -> None:
    with pytest.raises(UserError, match="max_turn"):
        ReWOO(None, [search], max_turn=0)
