"""Text that Lagent 0.5.0rc3 prints, pinned byte for byte (issue 38).

The expected strings were printed by Lagent 0.5.0rc3 itself (``repr`` of the same agent trees,
``description['parameter_description']`` of the same tool): a Lagent script that logs an agent
tree or puts tool descriptions in a prompt sees the same text under plait.
"""

from __future__ import annotations

from plait.actions import BaseAction, JsonParser, TupleParser, tool_api
from plait.agents import Agent, AgentDict, AgentList, Sequential

LAGENT_JSON_HINT = (
    "If you call this tool, you must pass arguments in the JSON format {key: value}, "
    "where the key is the parameter name."
)
LAGENT_TUPLE_HINT = (
    "If you call this tool, you must pass arguments in the tuple format like (arg1, arg2, arg3), "
    "and the arguments are ordered."
)


class Bold(BaseAction):
    @tool_api
    def run(self, text: str) -> str:
        """Make text bold.

        Args:
            text (str): input text
        """
        return "**" + text + "**"


class Inner(Agent):
    def __init__(self) -> None:
        super().__init__(name="inner team")
        self.w = Agent(name="w")


class Team(Agent):
    def __init__(self) -> None:
        super().__init__(memory=None)
        self.writer = Agent(name="writer")
        self.crew = AgentList([Agent(name="c0"), Sequential(Agent(), Agent(name="x"))])
        self.board = AgentDict({"lead": Agent(name="lead")})
        self.seq = Sequential({"first": Agent(name="f"), "second": Inner()}, name="pipeline")


def test_parameter_descriptions_are_lagent_05s_english_text() -> None:
    assert JsonParser.PARAMETER_DESCRIPTION == LAGENT_JSON_HINT
    assert TupleParser.PARAMETER_DESCRIPTION == LAGENT_TUPLE_HINT
    assert Bold().description["parameter_description"] == LAGENT_JSON_HINT
    assert Bold(parser=TupleParser).description["parameter_description"] == LAGENT_TUPLE_HINT


def test_sequential_repr_is_lagents() -> None:
    assert repr(Sequential(Agent(name="a"), Agent())) == (
        "Sequential(name='Sequential')(\n  (0): Agent(name='a')\n  (1): Agent(name='Agent')\n)"
    )
    assert repr(Sequential([("u", Agent(name="u")), ("v", AgentList([Agent()]))])) == (
        "Sequential(name='Sequential')(\n"
        "  (u): Agent(name='u')\n"
        "  (v): AgentList(\n"
        "    (0): Agent(name='Agent')\n"
        "  )\n"
        ")"
    )


def test_nested_tree_and_leaves_repr_is_lagents() -> None:
    assert repr(Team()) == (
        "Team(name='Team')(\n"
        "  (writer): Agent(name='writer')\n"
        "  (crew): AgentList(\n"
        "    (0): Agent(name='c0')\n"
        "    (1): Sequential(name='Sequential')(\n"
        "      (0): Agent(name='Agent')\n"
        "      (1): Agent(name='x')\n"
        "    )\n"
        "  )\n"
        "  (board): AgentDict(\n"
        "    (lead): Agent(name='lead')\n"
        "  )\n"
        "  (seq): Sequential(name='pipeline')(\n"
        "    (first): Agent(name='f')\n"
        "    (second): Inner(name='inner team')(\n"
        "      (w): Agent(name='w')\n"
        "    )\n"
        "  )\n"
        ")"
    )
    assert repr(AgentList()) == "AgentList()"
    assert repr(AgentDict()) == "AgentDict()"
    assert repr(Agent()) == "Agent(name='Agent')"
    assert repr(Agent(name="x y")) == "Agent(name='x y')"
