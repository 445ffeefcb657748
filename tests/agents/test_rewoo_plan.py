from __future__ import annotations

import pytest

from plait.agents._react_plan import PlanStep, parse_plan, substitute
from plait.exceptions import ParseError

GOOD = """Plan: Find the host city.
#E1 = Search[host city of the 2012 Olympics]
Plan: Get its weather.
#E2 = Weather[#E1]"""


def test_parses_plans_with_dependencies() -> None:
    assert parse_plan(GOOD) == [
        PlanStep("Find the host city.", "#E1", "Search", "host city of the 2012 Olympics", ()),
        PlanStep("Get its weather.", "#E2", "Weather", "#E1", ("#E1",)),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "  Plan:   Find the host city.  \n\n   #E1=Search[  host city of the 2012 Olympics ]  \r\n"
        "Plan: Get its weather.\n#E2   =   Weather [#E1]\n",
        "Here is my plan:\n**Plan:** Find the host city.\n#E1 = Search[host city of the 2012 Olympics]\n\n"
        "**Plan 2:** Get its weather.\n#E2 = Weather[#E1]\nThat's all.",
        "1. Plan: Find the host city. #E1 = Search[host city of the 2012 Olympics]\n"
        "2. Plan: Get its weather. #E2 = Weather[#E1]",
        "- Plan: Find the host city.\n- #E1 = Search[host city of the 2012 Olympics]\n"
        "- Plan: Get its weather.\n- #E2 = Weather[#E1]",
    ],
    ids=["whitespace", "markdown-and-chatter", "inline", "bullets"],
)
def test_layout_is_tolerated(text: str) -> None:
    steps = parse_plan(text)
    assert [(s.evidence, s.tool, s.tool_input) for s in steps] == [
        ("#E1", "Search", "host city of the 2012 Olympics"),
        ("#E2", "Weather", "#E1"),
    ]


def test_plan_text_may_continue_and_inputs_may_span_lines() -> None:
    text = "Plan: Compute it\nwith a program.\n#E1 = Python[print(1)\nprint(2)]"
    [step] = parse_plan(text)
    assert step.plan == "Compute it with a program."
    assert step.tool_input == "print(1)\nprint(2)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Plan: a\n#E1 = Search[x]\n#E2 = Search[y]", "more than one #E line"),
        ("Plan: a #E1 = Search[x] #E2 = Search[y]", "more than one #E line"),
        ("Plan: a\nPlan: b\n#E1 = Search[x]", "Plan 1 has no"),
        ("Plan: a\n#E1 = Search[x]\nPlan: b", "Plan 2 has no"),
        ("#E1 = Search[x]\nPlan: a", "before any 'Plan:'"),
        ("Plan: a\n#E1 = Search x", "square brackets"),
        ("Plan: a\n#E1 = Search(x)", "square brackets"),
        ("Plan: a\n#E1 = Search[x", "square brackets"),
        ("Plan: a\n#E1 = [x]", "square brackets"),
        ("Plan: a\n#E1 = Search[x]\nPlan: b\n#E1 = Search[y]", "defined twice"),
        ("Plan: a\n#E1 = Search[#E2]\nPlan: b\n#E2 = Search[y]", "#E2, which is not defined"),
        ("I will just answer: 42", "holds no plan"),
        ("", "holds no plan"),
    ],
)
def test_format_errors_explain_themselves(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message) as info:
        parse_plan(text)
    assert info.value.raw == text


def test_unknown_tools_are_rejected_with_the_valid_names() -> None:
    with pytest.raises(ParseError, match=r"unknown tool 'Google'\. Valid tools: Search, Weather"):
        parse_plan("Plan: a\n#E1 = Google[x]", {"Search", "Weather"}.__contains__, ["Search", "Weather"])


def test_e1_is_not_e12() -> None:
    steps = parse_plan("\n".join(f"Plan: p{i}\n#E{i} = T[{i}]" for i in range(1, 13)) + "\nPlan: last\n#E13 = T[#E12]")
    assert steps[-1].depends == ("#E12",)
    assert substitute("#E1 and #E12", {"#E1": "one", "#E12": "twelve"}) == "one and twelve"


def test_substitution_inside_json_keeps_it_valid() -> None:
    evidence = {"#E1": 'He said "hi"\nthen left'}
    assert substitute('{"text": "#E1", "n": 2}', evidence) == {"text": 'He said "hi"\nthen left', "n": 2}
    assert substitute("{not json #E1}", evidence) == '{not json He said "hi"\nthen left}'
