"""`TrajectoryBook` and `conversation`: continuing, branching, sessions, ending (sans-IO, a test clock)."""

from __future__ import annotations

from typing import Any

import pytest

from plait.trajectories import Trajectory, TurnTokens, conversation
from plait.trajectories.grouping import TrajectoryBook

S = {"role": "system", "content": "sys"}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def bot(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def by_id(trajectories: list[Trajectory]) -> dict[str, Trajectory]:
    return {t.id: t for t in trajectories}


def test_a_reply_sent_back_with_other_fields_continues_its_trajectory() -> None:
    book = TrajectoryBook()
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    first = book.record([S, user("q")], {"role": "assistant", "content": None, "tool_calls": [call]})
    sent_back = {"role": "assistant", "content": "", "tool_calls": [call], "refusal": None}
    second = book.record([S, user("q"), sent_back, {"role": "tool", "tool_call_id": "c1", "content": "1"}], bot("a"))
    assert first == second
    (trajectory,) = book.ended(all_open=True)
    assert [m["role"] for m in trajectory.messages] == ["system", "user", "assistant", "tool", "assistant"]


def test_branches_of_branches_rebuild_and_point_at_the_holder_of_the_shared_turns() -> None:
    book = TrajectoryBook()
    book.record([S, user("1")], bot("a1"))
    book.record([S, user("1"), bot("a1"), user("2")], bot("a2"))
    b1 = book.record([S, user("1"), bot("a1"), user("2'")], bot("b2"))  # branch at 3
    book.record([S, user("1"), bot("a1"), user("2'"), bot("b2"), user("3")], bot("b3"))  # continues b1
    b2 = book.record([S, user("1"), bot("a1"), user("2''")], bot("c2"))  # shares 3: the root holds them
    b3 = book.record([S, user("1"), bot("a1"), user("2'"), bot("b2"), user("3'")], bot("d3"))  # branch of b1
    trajectories = book.ended(all_open=True)
    table = by_id(trajectories)
    root = trajectories[0].id
    assert table[b1].metadata == {"parent": root, "branch_at": 3}
    assert table[b2].metadata == {"parent": root, "branch_at": 3}
    assert table[b3].metadata == {"parent": b1, "branch_at": 5}
    assert table[b3].messages == [user("3'"), bot("d3")]
    assert conversation(table[b3], table) == [S, user("1"), bot("a1"), user("2'"), bot("b2"), user("3'"), bot("d3")]


def test_sharing_only_the_prompt_is_not_a_branch_and_sessions_and_tenants_stay_apart() -> None:
    book = TrajectoryBook()
    ids = [
        book.record([S, user("q")], bot("one")),
        book.record([S, user("q")], bot("two")),  # a resample of the same prompt: its own trajectory
        book.record([S, user("q"), bot("one"), user("more")], bot("x"), session="s"),
        book.record([S, user("q"), bot("one"), user("more")], bot("x"), tenant="bob"),
    ]
    assert len(set(ids)) == 4
    assert all("parent" not in t.metadata for t in book.ended(all_open=True))


def test_idle_trajectories_end_once_and_tokens_point_at_their_reply() -> None:
    clock = Clock()
    book = TrajectoryBook(idle_s=10, clock=clock)
    tokens = TurnTokens(message=0, completion_ids=[5, 6], logprobs=[-0.1, -0.2])
    a = book.record([user("q")], bot("a"), tokens=tokens)
    clock.now = 5
    book.record([user("q"), bot("a"), user("r")], bot("b"), tokens=tokens)
    book.record([user("other")], bot("c"))
    clock.now = 12
    assert book.ended() == []  # both used 7 s ago
    clock.now = 15
    (ended, other) = book.ended()
    assert ended.id == a and [t.message for t in ended.tokens] == [1, 3] and ended.token_exact
    assert not other.token_exact and book.ended(all_open=True) == []


def test_continuing_a_written_trajectory_branches_at_its_end_and_old_ones_are_forgotten() -> None:
    book = TrajectoryBook(remember=1)
    book.record([user("q")], bot("a"))
    (first,) = book.ended(all_open=True)
    book.record([user("q"), bot("a"), user("r")], bot("b"))  # the first one is written: never appended to
    book.record([user("z")], bot("y"))
    child, _other = book.ended(all_open=True)
    assert child.metadata == {"parent": first.id, "branch_at": 2} and child.messages == [user("r"), bot("b")]
    assert conversation(child, by_id([first, child])) == [user("q"), bot("a"), user("r"), bot("b")]
    assert len(book) == 1  # written ones beyond `remember` are forgotten (open ones never)


def test_a_parent_chain_that_loops_is_refused() -> None:
    a = Trajectory(id="a", messages=[bot("x")], metadata={"parent": "b", "branch_at": 1})
    b = Trajectory(id="b", messages=[bot("y")], metadata={"parent": "a", "branch_at": 1})
    with pytest.raises(ValueError, match="own ancestor"):
        conversation(a, {"a": a, "b": b})


def test_odd_shapes_from_clients_and_servers_are_filed_not_raised() -> None:
    book = TrajectoryBook()
    odd = {"role": "assistant", "content": [{"type": "text", "text": "a"}, 5], "tool_calls": 5}
    first = book.record([user("q")], odd)
    assert book.record([user("q"), {"role": "assistant", "content": "a"}, user("r")], bot("b")) == first
