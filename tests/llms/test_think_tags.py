"""Inline ``<think>`` reasoning split from content (issue 37, item 1), whole and streamed.

Each case runs as `split_think` on the whole reply and as `ThinkStream` fed at once, a
character at a time and in random pieces; the streamed pieces, joined, must be exactly
the whole split, so a tag is never shown as content and nothing is lost or doubled.
"""

from __future__ import annotations

import random

import pytest

from plait.exceptions import UserError
from plait.llms.think_tags import ThinkStream, split_think


def _pieces(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    out, index = [], 0
    while index < len(text):
        size = rng.randint(1, 5)
        out.append(text[index : index + size])
        index += size
    return out


def split_every_way(text: str, opened: bool) -> tuple[str, str]:
    whole = split_think(text, opened=opened)
    for pieces in ([text], list(text), _pieces(text, 1), _pieces(text, 2)):
        stream = ThinkStream(opened=opened)
        parts = [stream.feed(piece) for piece in pieces] + [stream.finish()]
        joined = ("".join(r for r, _ in parts), "".join(c for _, c in parts))
        assert joined == whole == (stream.reasoning, stream.content), (pieces, parts)
    return whole


CASES = [
    (
        "qwen3",
        "<think>\nThe user greets me. I should greet back.\n</think>\n\nHello!",
        ("The user greets me. I should greet back.", "Hello!"),
    ),
    ("no-think", "Hello!", ("", "Hello!")),
    ("empty-block", "<think>\n\n</think>\n\nHello!", ("", "Hello!")),
    ("unclosed", "<think>\nStill thinking about", ("Still thinking about", "")),
    (
        "r1-distill-closing-only*",
        "Okay, the user says hi.\n</think>\n\nHi there!",
        ("Okay, the user says hi.", "Hi there!"),
    ),
    ("two-blocks", "<think>a</think>\nCall made.\n<think>b</think>\nDone.", ("a\n\nb", "Call made.\nDone.")),
    ("mid-answer", "Answer <think>hm</think> continues.", ("hm", "Answer continues.")),
    ("lookalikes", "a <thinking> b </thinker> c <", ("", "a <thinking> b </thinker> c <")),
    ("whitespace-kept", "  indented\n", ("", "  indented\n")),
]


@pytest.mark.parametrize(("reply", "split"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_think_blocks_split_whole_and_streamed(
    reply: str, split: tuple[str, str], request: pytest.FixtureRequest
) -> None:
    opened = request.node.callspec.id.endswith("*")  # the prompt opened the block (a stream must be told)
    assert split_think(reply) == split_every_way(reply, opened) == split


def test_opened_says_the_prompt_opened_the_block() -> None:
    assert split_every_way("reasoning here</think>answer", opened=True) == ("reasoning here", "answer")
    assert split_every_way("<think>reasoning</think>answer", opened=True) == ("reasoning", "answer")
    assert split_every_way("all reasoning, cut off", opened=True) == ("all reasoning, cut off", "")
    assert split_every_way("plain answer</think> tail", opened=False) == ("", "plain answer tail")


def test_a_stream_never_shows_part_of_a_tag_as_content() -> None:
    stream = ThinkStream()
    content = ""
    for char in "Hi <think>x</think> there ":
        content += stream.feed(char)[1]
        assert "<" not in content and "x" not in content
    assert content == "Hi there"  # the trailing space waits for what follows
    assert stream.finish() == ("", " ")


def test_reasoning_streams_as_it_comes() -> None:
    stream = ThinkStream()
    assert stream.feed("<think>First") == ("First", "")
    assert stream.feed(" step. ") == (" step.", "")
    assert stream.feed("Second.</think>") == (" Second.", "")
    assert stream.feed("\n\nAnswer") == ("", "Answer")
    assert stream.finish() == ("", "")


def test_the_docstring_examples_hold() -> None:
    assert split_think("<think>\nThe user greets me.\n</think>\n\nHello!") == ("The user greets me.", "Hello!")
    assert split_think("Plan: greet back.</think>Hello!") == ("Plan: greet back.", "Hello!")
    assert split_think("Hello!") == ("", "Hello!")
    stream = ThinkStream()
    parts = [stream.feed(piece) for piece in ["<thi", "nk>Greet", " back.</th", "ink>\n\nHi", "!"]]
    parts.append(stream.finish())
    assert "".join(r for r, _ in parts) == "Greet back."
    assert "".join(c for _, c in parts) == "Hi!"


def test_a_finished_stream_refuses_more() -> None:
    stream = ThinkStream()
    stream.finish()
    with pytest.raises(UserError, match="finished"):
        stream.feed("x")
    with pytest.raises(UserError, match="already"):
        stream.finish()
