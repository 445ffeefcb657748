from __future__ import annotations

import json
from typing import Any

import pytest

from _support import resolve
from plait.agents._react_text import ReActTextParser
from plait.agents.react import AsyncReAct, ReAct
from plait.exceptions import ParseError, UserError
from plait.prompts import react_prompts
from plait.schema import ActionReturn, ActionStatusCode
from plait.testing import scripted_llm


def weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: the city name
    """
    return f"sunny, 21C in {city}"


def convert(amount: float, currency: str) -> str:
    """Convert euros to another currency.

    Args:
        amount: how many euros
        currency: the target currency
    """
    if currency != "USD":
        raise RuntimeError(f"no rate for {currency}")
    return f"{amount * 1.1:.2f} USD"


def react(mode: str, script: list[Any], **kwargs: Any) -> ReAct:
    cls = ReAct if mode == "sync" else AsyncReAct
    return cls(scripted_llm(script, mode), [weather, convert], **kwargs)


def user_turns(agent: ReAct, call: int) -> list[str]:
    return [m["content"] for m in agent.llm.calls[call].messages if m["role"] == "user"]


def test_tool_then_final_answer(mode: str) -> None:
    agent = react(
        mode,
        [
            'Thought: I need the weather.\nAction: weather\nAction Input: {"city": "Paris"}\nObservation: invented',
            "Thought: I know it now.\nFinal Answer: It is sunny in Paris.",
        ],
    )
    reply = resolve(agent("Weather in Paris?"))
    assert reply.content == "It is sunny in Paris."
    first, second = agent.llm.calls
    system = first.messages[0]["content"]
    assert '"name": "weather"' in system and "[weather, convert]" in system  # descriptions and valid names
    assert "Observation:" in first.params["stop_words"]
    # the invented observation was cut; the real one follows the model's turn
    assert second.messages[-2] == {
        "role": "assistant",
        "content": 'Thought: I need the weather.\nAction: weather\nAction Input: {"city": "Paris"}',
    }
    assert second.messages[-1] == {"role": "user", "content": "Observation: sunny, 21C in Paris"}
    [step] = reply.extra_info["intermediate_steps"]
    assert step["action"] == "weather" and step["observation"] == "sunny, 21C in Paris" and step["state"] == 0
    senders = [m["sender"] for m in agent.state_dict()["memory"]]
    assert senders == ["user", agent.name, "ActionExecutor", agent.name]
    agent.llm.assert_complete()


def test_plain_text_input_goes_to_the_single_parameter(mode: str) -> None:
    agent = react(mode, ["Action: weather\nAction Input: Rome", "Final Answer: ok"])
    resolve(agent("Rome?"))
    assert user_turns(agent, 1)[-1] == "Observation: sunny, 21C in Rome"


def test_tool_error_is_an_observation(mode: str) -> None:
    agent = react(
        mode,
        [
            'Thought: convert\nAction: convert\nAction Input: {"amount": 10, "currency": "GBP"}',
            "Final Answer: I could not convert.",
        ],
    )
    reply = resolve(agent("10 EUR in GBP?"))
    assert reply.content == "I could not convert."
    assert "no rate for GBP" in user_turns(agent, 1)[-1]
    [step] = reply.extra_info["intermediate_steps"]
    assert step["state"] == ActionStatusCode.API_ERROR
    stored = [m for m in agent.memory.get_memory() if m.sender == "ActionExecutor"]
    assert isinstance(stored[0].content, ActionReturn) and stored[0].content.errmsg


def test_malformed_output_gets_a_format_correction(mode: str) -> None:
    agent = react(mode, ["I think it is sunny.", "Thought: right.\nFinal Answer: sunny"])
    reply = resolve(agent("Weather?"))
    assert reply.content == "sunny"
    correction = user_turns(agent, 1)[-1]
    assert correction.startswith("Observation: your reply could not be used")
    assert "'Action:'" in correction and "'Final Answer:'" in correction
    assert reply.extra_info["intermediate_steps"][0]["action"] is None


def test_unknown_tool_names_the_valid_ones(mode: str) -> None:
    agent = react(mode, ["Action: wether\nAction Input: Paris", "Final Answer: done"])
    reply = resolve(agent("Weather?"))
    observation = user_turns(agent, 1)[-1]
    assert "There is no tool named 'wether'" in observation
    assert "Did you mean 'weather'?" in observation and "convert" in observation
    assert reply.extra_info["intermediate_steps"][0]["state"] == ActionStatusCode.API_ERROR


def test_out_of_turns_asks_for_the_final_answer(mode: str) -> None:
    """max_turn counts model calls: two tool rounds, then the third (last) call asks for the answer."""
    loop = "Thought: again\nAction: weather\nAction Input: Oslo"
    agent = react(mode, [loop, loop, "Thought: enough\nFinal Answer: Oslo is sunny."], max_turn=3)
    reply = resolve(agent("Weather in Oslo?"))
    assert reply.content == "Oslo is sunny."
    assert reply.extra_info["forced_final_answer"] is True
    assert len(reply.extra_info["intermediate_steps"]) == 2
    assert user_turns(agent, 2)[-1].endswith(react_prompts.REACT_FORCE_TEXT_EN)
    agent.llm.assert_complete()


def test_forced_answer_without_the_marker_is_returned_as_text(mode: str) -> None:
    agent = react(mode, ["Action: weather\nAction Input: Oslo", "  It is sunny.  "], max_turn=2)
    reply = resolve(agent("Oslo?"))
    assert reply.content == "It is sunny." and reply.formatted is None


def test_memory_carries_the_trajectory_to_the_next_call(mode: str) -> None:
    script = [
        "Action: weather\nAction Input: Paris",
        "Final Answer: sunny",
        "Final Answer: still sunny",
        "Final Answer: ?",
    ]
    agent = react(mode, script)
    resolve(agent("Paris?"))
    resolve(agent("And now?"))
    messages = agent.llm.calls[2].messages
    assert {"role": "assistant", "content": "Final Answer: sunny"} in messages  # replayed in the protocol
    assert messages[-1] == {"role": "user", "content": "And now?"}
    resolve(agent("Fresh session", session_id="s2"))
    assert [m["role"] for m in agent.llm.calls[3].messages] == ["system", "user"]  # sessions are isolated


def test_json_variant(mode: str) -> None:
    call = {"thought_process": "need data", "action": {"name": "weather", "parameters": {"city": "Nice"}}}
    finish = {"thought_process": "done", "conclusion": "Nice is sunny."}
    agent = react(
        mode, [f"```json\n{json.dumps(call)}\n```", "not json at all", json.dumps(finish)], output_format="json"
    )
    reply = resolve(agent("Nice?"))
    assert reply.content == "Nice is sunny." and reply.formatted["conclusion"] == "Nice is sunny."
    system = agent.llm.calls[0].messages[0]["content"]
    assert '"thought_process"' in system and '"conclusion"' in system  # the JSON formats are in the prompt
    assert "stop_words" not in agent.llm.calls[0].params or not agent.llm.calls[0].params["stop_words"]
    assert user_turns(agent, 1)[-1] == "Observation: sunny, 21C in Nice"
    assert "not valid JSON" in user_turns(agent, 2)[-1]
    assert json.loads(agent.llm.calls[1].messages[-2]["content"])["action"]["name"] == "weather"


def test_lagent_head_style_construction(mode: str) -> None:
    from plait.agents.react import ActionFormat, FinishFormat
    from plait.prompts.parsers import JSONParser

    parser = JSONParser("Answer as JSON: {action} or {finish}", action=ActionFormat, finish=FinishFormat)
    template = "Tools: {action_info}\n{output_format}"
    cls = ReAct if mode == "sync" else AsyncReAct
    llm = scripted_llm(['{"conclusion": "42"}'], mode)
    agent = cls(llm, [weather], template=template, output_format=parser, max_turn=3)
    assert resolve(agent("?")).content == "42"
    system = llm.calls[0].messages[0]["content"]
    assert system.startswith("Tools: {") and "Answer as JSON:" in system
    assert len(llm.calls[0].messages) == 2  # the format instruction is not repeated


def test_chinese_prompts(mode: str) -> None:
    agent = react(mode, ["Action: nope\nAction Input: x", "Final Answer: 好"], language="cn", max_turn=2)
    assert resolve(agent("天气？")).content == "好"
    assert "可用的工具" in agent.llm.calls[0].messages[0]["content"]


def test_construction_errors() -> None:
    with pytest.raises(UserError, match="unknown placeholder"):
        ReAct(None, [weather], template="{tools}")
    with pytest.raises(UserError, match="language"):
        ReAct(None, [weather], language="fr")
    with pytest.raises(UserError, match="max_turn"):
        ReAct(None, [weather], max_turn=-1)


# -- the text protocol parser -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Thought: t\nAction: weather\nAction Input: Paris", {"name": "weather", "parameters": "Paris"}),
        ('**Action:** `weather`\n**Action Input:** {"city": "X"}', {"name": "weather", "parameters": '{"city": "X"}'}),
        (
            'action: "weather"\naction input: ```json\n{"city": "Y"}\n```',
            {"name": "weather", "parameters": '{"city": "Y"}'},
        ),
        ("Action: weather[Lyon]", {"name": "weather", "parameters": "Lyon"}),
        ("Action: weather\nAction Input: A\nObservation: B\nFinal Answer: C", {"name": "weather", "parameters": "A"}),
        ("Action: weather", {"name": "weather", "parameters": ""}),
    ],
)
def test_text_parser_actions(text: str, expected: dict[str, Any]) -> None:
    assert ReActTextParser().parse_response(text)["action"] == expected


def test_text_parser_final_answer_and_errors() -> None:
    parser = ReActTextParser()
    parsed = parser.parse_response("Thought: easy\nFinal Answer: line one\nline two")
    assert parsed == {"thought_process": "easy", "conclusion": "line one\nline two"}
    assert parser.format_response(parsed) == "Thought: easy\nFinal Answer: line one\nline two"
    assert "conclusion" in parser.parse_response("Final Answer: x\nAction: weather")  # the first marker wins
    with pytest.raises(ParseError, match="neither"):
        parser.parse_response("just text")
    with pytest.raises(ParseError, match="names no tool"):
        parser.parse_response("Action:\nAction Input: x")


def test_async_tools_are_awaited() -> None:
    import asyncio

    async def shout(text: str) -> str:
        """Upper-case a text.

        Args:
            text: the text
        """
        await asyncio.sleep(0)
        return text.upper()

    agent = AsyncReAct(scripted_llm(["Action: shout\nAction Input: hi", "Final Answer: HI"], "async"), [shout])
    reply = asyncio.run(agent("shout hi"))
    assert reply.extra_info["intermediate_steps"][0]["observation"] == "HI"
    stored = [m.content for m in agent.memory.get_memory() if m.sender == "ActionExecutor"]
    assert stored[0].thought is None and stored[0].result == [{"type": "text", "content": "HI"}]


@pytest.mark.parametrize(
    ("tool", "raw", "expected"),
    [
        ("weather", {"city": "A"}, {"city": "A"}),
        ("weather", '{"city": "A"}', {"city": "A"}),
        ("weather", "Paris", {"city": "Paris"}),
        ("weather", '"Paris"', {"city": "Paris"}),
        ("weather", "'Paris'", {"city": "Paris"}),
        ("weather", "42", {"city": "42"}),
        ("weather", "  ", {}),
        ("weather", None, {}),
        ("convert", "10 GBP", "10 GBP"),
        ("nope", "x", "x"),
    ],
)
def test_tool_parameters(tool: str, raw: Any, expected: Any) -> None:
    from plait.actions import ActionExecutor
    from plait.agents._react_base import tool_parameters

    def square(n: int) -> int:
        """Square a number.

        Args:
            n: the number
        """
        return n * n

    executor = ActionExecutor([weather, convert, square])
    assert tool_parameters(executor, tool, raw) == expected
    assert tool_parameters(executor, "square", "7") == {"n": 7}


def test_saved_state_resumes_with_the_same_prompt(mode: str) -> None:
    agent = react(mode, ["Action: weather\nAction Input: Paris", "Final Answer: sunny", "Final Answer: again"])
    resolve(agent("Paris?"))
    state = json.loads(json.dumps(agent.state_dict()))
    fresh = react(mode, ["Final Answer: again"])
    fresh.load_state_dict(state)
    resolve(fresh("And now?"))
    assert fresh.llm.calls[0].messages[1:] == [*agent.get_prompt()[1:], {"role": "user", "content": "And now?"}]
    assert {"role": "user", "content": "Observation: sunny, 21C in Paris"} in fresh.llm.calls[0].messages
