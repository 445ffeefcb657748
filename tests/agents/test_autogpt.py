from __future__ import annotations

import json
from typing import Any

from _support import resolve
from plait.agents.autogpt import AsyncAutoGPT, AutoGPT, AutoGPTResponse
from plait.prompts import autogpt_prompts
from plait.schema import ActionStatusCode
from plait.testing import scripted_llm


def population(city: str) -> int:
    """Population of a city.

    Args:
        city: the city name
    """
    if city == "Nowhere":
        raise KeyError("Nowhere")
    return 522_000


def reply(name: str, **args: Any) -> str:
    thoughts = {"text": f"run {name}", "reasoning": "needed", "plan": ["- step"], "criticism": "", "speak": "ok"}
    return json.dumps({"thoughts": thoughts, "command": {"name": name, "args": args}})


def autogpt(mode: str, script: list[Any], **kwargs: Any) -> AutoGPT:
    cls = AutoGPT if mode == "sync" else AsyncAutoGPT
    return cls(scripted_llm(script, mode), [population], **kwargs)


def last_user(agent: AutoGPT, call: int) -> str:
    return str(agent.llm.calls[call].messages[-1]["content"])


def test_command_then_finish(mode: str) -> None:
    agent = autogpt(
        mode,
        [f"```json\n{reply('population', city='Lyon')}\n```", reply("finish", response="Lyon has 522,000 people.")],
        ai_name="Researcher",
        role_description="an assistant that finds facts.",
    )
    answer = resolve(agent("Find the population of Lyon."))
    assert answer.content == "Lyon has 522,000 people."
    first = agent.llm.calls[0].messages
    system = first[0]["content"]
    assert system.startswith("You are Researcher, an assistant that finds facts.")
    assert "1. population: Population of a city. Arguments: city (STRING, required): the city name." in system
    assert "2. finish:" in system and '"command": {' in system  # command list and JSON response format
    assert first[-1]["content"].endswith(autogpt_prompts.AUTOGPT_TRIGGER)
    assert last_user(agent, 1).startswith("Command population returned: 522000")
    [step] = answer.extra_info["intermediate_steps"]
    assert step["command"] == "population" and step["args"] == {"city": "Lyon"} and step["state"] == 0
    assert [m["sender"] for m in agent.state_dict()["memory"]] == ["user", agent.name, "ActionExecutor", agent.name]


def test_tool_error_is_reported_back(mode: str) -> None:
    agent = autogpt(mode, [reply("population", city="Nowhere"), reply("finish", response="unknown")])
    answer = resolve(agent("Population of Nowhere?"))
    assert answer.content == "unknown"
    assert last_user(agent, 1).startswith("Command population returned: KeyError: 'Nowhere'")
    assert answer.extra_info["intermediate_steps"][0]["state"] == ActionStatusCode.API_ERROR


def test_invalid_responses_get_the_validation_error(mode: str) -> None:
    missing_command = json.dumps({"thoughts": {"text": "hmm"}})
    agent = autogpt(mode, ["Let me think...", missing_command, reply("finish", response="done")])
    assert resolve(agent("go")).content == "done"
    not_json, invalid = last_user(agent, 1), last_user(agent, 2)
    assert not_json.startswith("Your reply could not be used: The reply is not valid JSON")
    assert "AutoGPTResponse: command: Field required" in invalid
    assert "population, finish" in invalid
    assert agent.llm.calls[2].messages[-2]["role"] == "assistant"  # the mistakes stay in the trajectory


def test_unknown_command_lists_the_valid_ones(mode: str) -> None:
    agent = autogpt(mode, [reply("google", query="x"), reply("finish", response="ok")])
    resolve(agent("go"))
    observation = last_user(agent, 1)
    assert observation.startswith("Command google returned: There is no tool named 'google'.")
    assert "Available tools: population" in observation


def test_out_of_turns_is_told_to_finish(mode: str) -> None:
    loop = reply("population", city="Lyon")
    agent = autogpt(mode, [loop, loop, reply("finish", response="522,000")], max_turn=3)
    answer = resolve(agent("go"))
    assert answer.content == "522,000" and answer.extra_info["forced_final_answer"] is True
    assert last_user(agent, 2).endswith(autogpt_prompts.AUTOGPT_FORCE)
    assert autogpt_prompts.AUTOGPT_TRIGGER not in last_user(agent, 2)


def test_out_of_turns_without_finish_returns_the_text(mode: str) -> None:
    agent = autogpt(mode, [reply("population", city="Lyon"), "About 522,000."], max_turn=2)
    assert resolve(agent("go")).content == "About 522,000."


def test_schema_is_a_json_schema() -> None:
    schema = AutoGPTResponse.model_json_schema()
    assert schema["required"] == ["thoughts", "command"]
    assert schema["$defs"]["AutoGPTCommand"]["required"] == ["name"]
