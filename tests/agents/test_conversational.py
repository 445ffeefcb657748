from __future__ import annotations

import json
from typing import Any

import pytest

from _support import resolve
from plait.agents.conversational import AsyncConversationalAgent, ConversationalAgent
from plait.exceptions import UserError
from plait.memory import Memory
from plait.prompts import conversational_prompts
from plait.testing import scripted_llm


class SearchError(Exception):
    pass


def Search(query: str) -> str:
    """Useful for questions about current events.

    Args:
        query: the search query
    """
    if query == "crash":
        raise SearchError("index unavailable")
    return f"Title: outlook 2024 Content: {query} looks good"


def blob(action: str, action_input: Any) -> str:
    return f"```json\n{json.dumps({'action': action, 'action_input': action_input}, ensure_ascii=False)}\n```"


def conversational(mode: str, script: list[Any], **kwargs: Any) -> ConversationalAgent:
    cls = ConversationalAgent if mode == "sync" else AsyncConversationalAgent
    return cls(scripted_llm(script, mode), [Search], **kwargs)


def test_tool_then_final_answer(mode: str) -> None:
    agent = conversational(mode, [blob("Search", "TMT sector"), blob("Final Answer", "TMT looks good.")])
    reply = resolve(agent("Which sector is better, clean energy or TMT?"))
    assert reply.content == "TMT looks good."
    first, second = agent.llm.calls
    assert [m["role"] for m in first.messages] == ["system", "user"]
    human = first.messages[1]["content"]
    assert human.startswith("TOOLS\n------")
    assert "> Search: Useful for questions about current events." in human and "one of: Search" in human
    assert human.endswith("Which sector is better, clean energy or TMT?")
    # the scratchpad: the model's reply, then the tool response
    assert second.messages[2] == {"role": "assistant", "content": blob("Search", "TMT sector")}
    assert second.messages[3]["content"].startswith(
        "TOOL RESPONSE:\n---------------------\nTitle: outlook 2024 Content: TMT sector looks good"
    )
    [step] = reply.extra_info["intermediate_steps"]
    assert step == {
        "tool": "Search",
        "tool_input": "TMT sector",
        "log": blob("Search", "TMT sector"),
        "observation": "Title: outlook 2024 Content: TMT sector looks good",
    }


def test_chat_history_is_remembered(mode: str) -> None:
    agent = conversational(mode, [blob("Final Answer", "Hello, Lai!"), blob("Final Answer", "You are Lai.")])
    resolve(agent("I am Lai."))
    reply = resolve(agent("Who am I?"))
    assert reply.content == "You are Lai."
    messages = agent.llm.calls[1].messages
    assert messages[1:3] == [{"role": "user", "content": "I am Lai."}, {"role": "assistant", "content": "Hello, Lai!"}]
    assert messages[3]["content"].endswith("Who am I?")
    assert [m.content for m in agent.memory.get_memory()] == ["I am Lai.", "Hello, Lai!", "Who am I?", "You are Lai."]


def test_history_window_follows_the_memory_config(mode: str) -> None:
    script = [blob("Final Answer", str(i)) for i in range(3)]
    agent = conversational(mode, script, memory={"type": Memory, "recent_n": 3})
    for question in ("a", "b", "c"):
        resolve(agent(question))
    contents = [m["content"] for m in agent.llm.calls[2].messages[1:-1]]
    assert contents == ["b", "1"]


def test_tool_error_is_an_observation(mode: str) -> None:
    agent = conversational(mode, [blob("Search", "crash"), blob("Final Answer", "Search is down.")])
    reply = resolve(agent("news?"))
    assert reply.content == "Search is down."
    assert "SearchError: index unavailable" in agent.llm.calls[1].messages[-1]["content"]


def test_unknown_tool_lists_the_valid_ones(mode: str) -> None:
    agent = conversational(mode, [blob("Google", "x"), blob("Final Answer", "ok")])
    reply = resolve(agent("x"))
    observation = reply.extra_info["intermediate_steps"][0]["observation"]
    assert observation == "There is no tool named 'Google'. Available tools: Search."
    assert observation in agent.llm.calls[1].messages[-1]["content"]


def test_unparseable_output_gets_one_fix_up_retry(mode: str) -> None:
    agent = conversational(mode, ["Sure! The answer is 4.", blob("Final Answer", "4")])
    reply = resolve(agent("2 + 2?"))
    assert reply.content == "4" and reply.extra_info["intermediate_steps"] == []
    fix = agent.llm.calls[1].messages
    assert fix[-2] == {"role": "assistant", "content": "Sure! The answer is 4."}
    assert fix[-1]["content"].startswith("Your last reply could not be parsed: The reply is not valid JSON")


def test_failed_fix_up_becomes_an_exception_step(mode: str) -> None:
    agent = conversational(mode, ["nope", '{"input": 1}', blob("Final Answer", "done")])
    reply = resolve(agent("?"))
    assert reply.content == "done"
    [step] = reply.extra_info["intermediate_steps"]
    assert step["tool"] == "_Exception" and step["log"] == '{"input": 1}'
    assert "action: Field required" in step["observation"]
    third = agent.llm.calls[2].messages
    assert third[-2] == {"role": "assistant", "content": '{"input": 1}'}  # the fix-up exchange is not kept
    assert "nope" not in [m["content"] for m in third]


def test_iteration_limit_force(mode: str) -> None:
    loop = blob("Search", "again")
    agent = conversational(mode, [loop, loop], max_iterations=2)
    reply = resolve(agent("loop"))
    assert reply.content == conversational_prompts.CONVERSATIONAL_STOPPED.format(max_iterations=2)
    assert reply.extra_info["stopped"] == "force" and len(reply.extra_info["intermediate_steps"]) == 2
    agent.llm.assert_complete()


def test_iteration_limit_generate(mode: str) -> None:
    loop = blob("Search", "again")
    agent = conversational(
        mode, [loop, loop, blob("Final Answer", "best guess")], max_iterations=2, early_stopping_method="generate"
    )
    reply = resolve(agent("loop"))
    assert reply.content == "best guess" and reply.extra_info["stopped"] == "generate"
    assert len(reply.extra_info["intermediate_steps"]) == 2  # two tool steps, then the call for the answer
    last = agent.llm.calls[2].messages
    assert last[-1]["content"] == conversational_prompts.CONVERSATIONAL_GENERATE
    assert last[-2]["content"].startswith("TOOL RESPONSE:")


def test_generate_falls_back_to_the_raw_text(mode: str) -> None:
    agent = conversational(
        mode, [blob("Search", "x"), "plain answer"], max_iterations=1, early_stopping_method="generate"
    )
    assert resolve(agent("?")).content == "plain answer"


def test_object_inputs_and_answers(mode: str) -> None:
    agent = conversational(mode, [blob("Search", {"query": "AI"}), blob("Final Answer", {"sector": "AI"})])
    reply = resolve(agent("?"))
    assert reply.extra_info["intermediate_steps"][0]["observation"].endswith("AI looks good")
    assert json.loads(reply.content) == {"sector": "AI"}


def test_construction_errors() -> None:
    with pytest.raises(UserError, match="early_stopping_method"):
        ConversationalAgent(None, [Search], early_stopping_method="stop")
    with pytest.raises(UserError, match="human_template"):
        ConversationalAgent(None, [Search], human_template="{question}")
    agent = ConversationalAgent(None, [Search], max_iterations=3)
    assert agent.max_iterations == 3


def test_max_iterations_counts_tool_steps_before_the_generated_answer_as_langchain_does(mode: str) -> None:
    """Seed 004: two searches, then the answer, with ``max_iterations=2`` and ``'generate'``."""
    script = [blob("Search", "TMT 前景"), blob("Search", "清洁 服务"), blob("Final Answer", "TMT")]
    agent = conversational(mode, script, max_iterations=2, early_stopping_method="generate")
    reply = resolve(agent("Which sector?"))
    assert [step["tool_input"] for step in reply.extra_info["intermediate_steps"]] == ["TMT 前景", "清洁 服务"]
    assert reply.content == "TMT" and len(agent.llm.calls) == 3
