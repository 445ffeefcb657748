"""Garbage and mixed-up markup through the text tool-call detector and the think splitter (issue 37).

Replies are built from fragments of every format's markup (whole calls, lone tags, halves of
tags, names of offered and unoffered tools, broken JSON, deep brackets, lone surrogates) mixed
with random text, and fed whole and in random pieces. For each: nothing raises, no call names a
tool that was not offered, every call's arguments are a JSON object, every problem is one line,
and the streamed text (shown while streaming, then held back) is exactly the final text, the
same as `find_tool_calls` gives. Hypothesis explores (`FUZZ // 10` cases); a seeded run puts
`FUZZ` replies (10,000 by default; ``PLAIT_FUZZ_EXAMPLES`` changes it) through the detector.
"""

from __future__ import annotations

import itertools
import json
import os
import random

from hypothesis import HealthCheck, given, settings, strategies as st

from plait.llms.text_tool_calls import TextCallStream, TextToolCalls, find_tool_calls
from plait.llms.think_tags import ThinkStream, split_think

FUZZ = int(os.environ.get("PLAIT_FUZZ_EXAMPLES", "10000"))
OFFERED = ("get_weather", "search")

FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<function=get_weather>",
    "<function=rm_rf>",
    "<function=",
    "</function>",
    "<parameter=city>",
    "</parameter>",
    "<|action_start|>",
    "<|plugin|>",
    "<|interpreter|>",
    "<|action_end|>",
    "<|python_tag|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "<\uff5ctool\u2581calls\u2581begin\uff5c>",
    "<\uff5ctool\u2581call\u2581begin\uff5c>",
    "<\uff5ctool\u2581sep\uff5c>",
    "<\uff5ctool\u2581call\u2581end\uff5c>",
    "<\uff5ctool\u2581calls\u2581end\uff5c>",
    "function",
    "```json\n",
    "```python\n",
    "```",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    '{"name": "rm_rf", "parameters": {"path": "/"}}',
    "{'name': 'search', 'arguments': {'q': True}}",
    '{"name": ',
    '"arguments": ',
    '"parameters": ',
    '"get_weather"',
    "get_weather",
    "search.call(query='x')",
    "rm_rf",
    "<think>",
    "</think>",
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    ":",
    ",",
    ";",
    "\n",
    " ",
    "<",
    "<|",
    "[TOOL",
    "\\",
    "null",
    "NaN",
    "\ud800",
    '"\\ud800"',
    "9" * 5000,
    "[" * 400,
    "]" * 400,
]


def _check(text: str, cuts: list[int], think: bool = True) -> TextToolCalls:
    found = find_tool_calls(text, OFFERED)
    for call in found.calls:
        assert call.name in OFFERED
        assert isinstance(json.loads(call.arguments), dict)
        call.arguments.encode("utf-8")  # no lone surrogate slipped through a JSON escape
    assert all(isinstance(p, str) and "\n" not in p for p in found.problems)
    bounds = [0, *sorted({cut % (len(text) + 1) for cut in cuts}), len(text)]
    stream = TextCallStream(OFFERED)
    shown = "".join(stream.feed(text[a:b]) for a, b in itertools.pairwise(bounds))
    rest, streamed = stream.finish()
    assert streamed == found
    assert shown + rest == found.text
    for opened in (False, True) if think else ():
        splitter = ThinkStream(opened=opened)
        parts = [splitter.feed(text[a:b]) for a, b in itertools.pairwise(bounds)] + [splitter.finish()]
        assert ("".join(r for r, _ in parts), "".join(c for _, c in parts)) == split_think(text, opened=opened)
    return found


REPLIES = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12)), max_size=14).map("".join)


@settings(max_examples=max(1, FUZZ // 10), deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(REPLIES, st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_hypothesis_replies_never_crash_nor_call_an_unoffered_tool(text: str, cuts: list[int]) -> None:
    _check(text, cuts)


def test_ten_thousand_fuzzed_replies_through_the_detector() -> None:
    rng = random.Random(37)
    counts = {"replies": 0, "calls": 0, "problems": 0, "with_markup": 0}
    for _ in range(FUZZ):
        parts = [
            rng.choice(FRAGMENTS)
            if rng.random() < 0.7
            else "".join(rng.choices("ab {}[]\"'<>|:\n\\,;`", k=rng.randint(0, 8)))
            for _ in range(rng.randint(0, 14))
        ]
        text = "".join(parts)
        found = _check(text, [rng.randint(0, len(text)) for _ in range(rng.randint(0, 12))], think=False)
        counts["replies"] += 1
        counts["calls"] += len(found.calls)
        counts["problems"] += len(found.problems)
        counts["with_markup"] += found.found
    assert counts["replies"] == FUZZ
    # the generator reaches the interesting paths: usable calls and rejected markup both occur
    assert counts["calls"] > FUZZ // 100 and counts["problems"] > FUZZ // 10, counts
