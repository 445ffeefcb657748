"""`ToolRouter`: whether a question needs a tool, decided before the model is asked.

Small models called with ``tool_choice='auto'`` call a calculator for greetings and skip it
for sums (SmolLM2-135M: 5 of 10 sums and 3 of 10 small-talk questions right; bench/README.md,
"When the CLI's agent calls its tool"). A function-calling agent built with
``tool_choice='routed'`` asks its router on a run's first model call instead: arithmetic
gets ``'required'`` when a Calculator is offered; anything else gets ``'none'`` when the
Calculator is the only tool. With other tools, a question that uses a tool's own words (a
word of its name, or two of its description and parameters: "How many bananas do we have?"
and a tool described "How many units of an item the shop has in stock") gets ``'required'``,
and ``'auto'`` otherwise. After a tool ran, the agent's ``reset_tool_choice`` applies as for
any forcing choice, unless `ToolRouter.again` finds a part of the question that no call
covered yet ("How many pears and how many plums?" after only ``get_stock(item='pears')``):
then the tools are required once more. Measured: 8 of 10 sums and 10 of 10 small-talk
questions (SmolLM2); Qwen2.5-Coder-1.5B end to end in bench/README.md.

`plait run`, `plait chat`, `plait serve` and `plait web` build their agents with
``tool_choice='routed'``; so can you::

    agent = FunctionCallingAgent(llm, [Calculator()], tool_choice='routed')
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any, Final

__all__ = ["ROUTED", "ToolRouter"]

ROUTED: Final = "routed"
"""The ``tool_choice`` that lets the agent's `ToolRouter` decide per question."""

_ARITHMETIC = re.compile(
    r"\d\s*(?:[-+*/x×÷^%]|\*\*|times|plus|minus|divided|mod\b)\s*\(?\s*\d"
    r"|\b(?:calculate|compute|multiply|divide|add|subtract|sum|product|square root)\b[^\n]*\d",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_PARTS = re.compile(r",|;|&|\band\b|\bor\b", re.IGNORECASE)
# Words that say nothing about which tool fits: function words, question words, and the
# generic words of tool schemas ("get", "name", "value", "current").
_STOP: Final = frozenset(
    """a an the of in on at to for from by with about into as and or but if then than so not no
    is are was were be been being am do does did have has had can could will would should may might
    must shall i me my we us our you your he she it its they them their this that these those there
    here what whats which who whom whose when where why how please tell give show let lets s t
    some any all each every many much more one ones just also very too right now today currently current
    get set find fetch return returns e g eg ie etc name names value values string number integer
    type object item items thing things use using used""".split()  # noqa: SIM905 (a word list reads better)
)
# Function words that make a two-word phrase of a description say nothing ("of a", "in the").
_GLUE: Final = frozenset({"a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or"})
_CALCULATOR = "Calculator"


def _words(text: str) -> list[str]:
    """Lower-case words of `text`, snake_case and camelCase split (``get_stock`` -> ``get``, ``stock``)."""
    return _WORD.findall(_CAMEL.sub(" ", text).lower())


def _stem(word: str) -> str:
    """A crude singular: ``apples`` -> ``apple``, ``currencies`` -> ``currency`` (both sides of a match alike)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


class _Vocabulary:
    """What one tool is about: the words of its name, and those (and two-word phrases) of its description."""

    def __init__(self, name: str, function: Mapping[str, Any] | None) -> None:
        self.name = {_stem(w) for w in _words(name)} - _STOP
        text = []
        if function is not None:
            text.append(str(function.get("description") or ""))
            properties = (function.get("parameters") or {}).get("properties") or {}
            if isinstance(properties, Mapping):
                for key, schema in properties.items():
                    text.append(str(key))
                    if isinstance(schema, Mapping):
                        text.extend(str(v) for v in schema.get("enum") or ())
        words = _words(" ".join(text))
        self.words = {_stem(w) for w in words} - _STOP - self.name
        self.phrases = {(a, b) for a, b in pairwise(words) if not {a, b} <= _GLUE}

    def score(self, words: Sequence[str]) -> int:
        """2 for each word of the name the question uses, 1 for each description word, 2 for each phrase."""
        stems = {_stem(w) for w in words} - _STOP
        phrases = set(pairwise(words)) & self.phrases
        return 2 * len(stems & self.name) + len(stems & self.words) + 2 * len(phrases)


def _function(tool: Mapping[str, Any]) -> tuple[str, Mapping[str, Any] | None]:
    """(name, function entry) of an OpenAI ``tools`` entry, or of a bare function entry."""
    function = tool.get("function", tool)
    if not isinstance(function, Mapping):
        return "", None
    return str(function.get("name") or ""), function


class ToolRouter:
    """Decides the first model call's ``tool_choice`` from the question and the offered tools."""

    def __call__(self, question: str, tool_names: Sequence[str], tools: Iterable[Mapping[str, Any]] = ()) -> str:
        """The tool choice for `question`, given the offered tools' names (``Toolkit.api`` names count by toolkit).

        Args:
            question: The user's message.
            tool_names: The offered tools' names.
            tools: Their OpenAI ``tools`` entries (descriptions and parameters), when known.

        Returns:
            ``'required'`` for arithmetic when a Calculator is offered; ``'none'`` for anything
            else when the Calculator is the only tool; ``'required'`` when the question uses a
            word of a tool's name or two words (or a two-word phrase) of its description and
            parameters; else ``'auto'``.
        """
        kinds = [name.split(".")[0] for name in tool_names]
        calculator = _CALCULATOR in kinds
        if calculator and _ARITHMETIC.search(question):
            return "required"
        if calculator and all(kind == _CALCULATOR for kind in kinds):
            return "none"
        described = dict(_function(tool) for tool in tools)
        vocabularies = [_Vocabulary(name, None) for name in tool_names if name not in described]
        vocabularies += [_Vocabulary(name, function) for name, function in described.items() if name]
        words = _words(question)
        if any(vocabulary.score(words) >= 2 for vocabulary in vocabularies):
            return "required"
        return "auto"

    def again(
        self, question: str, arguments: Iterable[Mapping[str, Any]], tools: Iterable[Mapping[str, Any]] = ()
    ) -> bool:
        """Whether the tools should be required once more, after calls with these `arguments` ran.

        The question is cut into parts at ``and``, ``or``, commas and semicolons ("How many
        pears | and how many plums are in stock?"). True when one part holds a value of a call
        made and a later part holds none but names one thing of its own: one word that is no
        function word and no word of the offered tools ("plums"). A part before the first
        covered one ("Which is warmer right now, | Rome | or Oslo?") or with more words of its
        own is a question about the results, not a missed call.
        """
        values = {_stem(w) for args in arguments for value in args.values() for w in _words(str(value))}
        vocabulary: set[str] = set()
        for tool in tools:
            name, function = _function(tool)
            known = _Vocabulary(name, function)
            vocabulary |= known.name | known.words
        covered, missed = False, False
        for part in _PARTS.split(question):
            stems = [_stem(w) for w in _words(part)]
            if any(stem in values for stem in stems):
                covered = True
            elif covered:
                own = {stem for stem in stems if stem not in _STOP and stem not in vocabulary}
                missed = missed or len(own) == 1
        return missed

    def __repr__(self) -> str:
        return "ToolRouter()"
