"""Issue 37: reasoning kept apart from content, read from every form, sent back per model profile, and kept.

The wire formats of real servers have their own tests (test_reasoning_fixtures.py); these pin
the pieces: the profile table, the replay policies, each reply form, and that reasoning
survives state_dict -> JSON, a SessionStore restart and record/replay, and never reaches an
output parser or a typed output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from _support import resolve
from plait.agents import Agent, AsyncAgent, FunctionCallingAgent
from plait.exceptions import UserError
from plait.llms import GPTAPI, AsyncGPTAPI
from plait.llms._openai_protocol import StreamAccumulator, build_payload, parse_completion
from plait.llms.profiles import ModelProfile, profile_for
from plait.memory import SessionStore
from plait.replay import record, replay
from plait.schema import AgentMessage, Reasoning
from plait.testing.fake_openai import FakeOpenAIServer, Reply


@pytest.mark.parametrize(
    ("name", "family", "replay_policy", "think"),
    [
        ("deepseek-reasoner", "deepseek", "field", "closed"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "deepseek", "drop", "opened"),
        ("Qwen/Qwen3-8B", "qwen3", "drop", "closed"),
        ("qwen3:30b-a3b-thinking-2507", "qwen3", "drop", "opened"),
        ("Qwen/QwQ-32B", "qwen3", "drop", "opened"),
        ("qwen2.5-7b-instruct", "qwen2.5", "drop", "closed"),
        ("internlm/internlm3-8b-instruct", "internlm", "drop", "closed"),
        ("zai-org/GLM-4.5-Air", "glm", "drop", "closed"),
        ("kimi-k2-thinking", "kimi", "field", "closed"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3", "drop", "closed"),
        ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", "mistral", "drop", "closed"),
        ("gpt-4o-mini", "default", "drop", "closed"),
    ],
)
def test_profile_for_matches_the_family_from_the_name(name: str, family: str, replay_policy: str, think: str) -> None:
    profile = profile_for(name)
    assert (profile.family, profile.reasoning_replay, profile.think_tags) == (family, replay_policy, think)
    assert profile.tool_protocol == "native"


def test_profile_for_reads_a_local_template_when_the_name_says_nothing() -> None:
    template = "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{% endfor %}"
    assert profile_for("/models/model-q4.gguf", template).family == "llama3"
    assert profile_for("deepseek-chat").supports_required_tool_choice is False
    assert profile_for("llama3.2").parallel_tool_calls is False


def test_bad_profiles_and_overrides_fail_at_construction() -> None:
    with pytest.raises(UserError, match="reasoning_replay must be one of"):
        GPTAPI("m", api_base="http://127.0.0.1:9/v1", key=None, reasoning_replay="keep")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="needs a reasoning_field"):
        ModelProfile("mine", reasoning_replay="field")
    with pytest.raises(UserError, match="profile must be a ModelProfile"):
        GPTAPI("m", api_base="http://127.0.0.1:9/v1", key=None, profile="deepseek")  # type: ignore[arg-type]
    llm = GPTAPI("Qwen/Qwen3-8B", api_base="http://127.0.0.1:9/v1", key=None, reasoning_replay="tags")
    assert llm.profile.family == "qwen3" and llm.profile.reasoning_replay == "tags"
    llm.close()


HISTORY = [
    {"role": "user", "content": "Oslo?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}],
        "reasoning": {"text": "Call the tool.", "signature": "sig"},
    },
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    {"role": "assistant", "content": "Sunny.", "reasoning": {"text": "Answer now."}},
]


@pytest.mark.parametrize(
    ("policy", "field", "expected"),
    [
        ("field", "reasoning_content", {"reasoning_content": "Call the tool.", "content": ""}),
        ("field", "reasoning", {"reasoning": "Call the tool.", "content": ""}),
        ("tags", None, {"content": "<think>\nCall the tool.\n</think>\n\n"}),
        ("drop", None, {"content": ""}),
    ],
)
def test_replay_policies_send_tool_call_turns_reasoning_only(
    policy: Any, field: str | None, expected: dict[str, str]
) -> None:
    payload = build_payload("m", HISTORY, {}, reasoning_replay=policy, reasoning_field=field)
    messages = payload["messages"]
    assert isinstance(messages, list)
    call_turn, answer = messages[1], messages[3]
    assert {k: v for k, v in call_turn.items() if k not in ("role", "tool_calls")} == expected
    assert answer == {"role": "assistant", "content": "Sunny."}  # a turn without calls sends none back
    assert "reasoning" not in json.dumps(messages[:1] + messages[2:])
    assert HISTORY[1]["reasoning"] == {"text": "Call the tool.", "signature": "sig"}  # the caller's messages untouched


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "content": "Hi!", "reasoning_content": "Greet."},
        {"role": "assistant", "content": "Hi!", "reasoning": "Greet."},
        {"role": "assistant", "content": "Hi!", "thinking": "Greet."},  # Ollama's native field
        {"role": "assistant", "content": "<think>\nGreet.\n</think>\n\nHi!"},
        {"role": "assistant", "content": "Greet.</think>\n\nHi!"},  # the prompt opened the block
        {"role": "assistant", "content": "Hi!", "reasoning_content": "Greet.", "reasoning": "Greet."},  # read once
    ],
)
def test_every_reply_form_gives_the_same_reasoning_and_content(message: dict[str, str]) -> None:
    response = parse_completion({"choices": [{"message": message, "finish_reason": "stop"}]})
    assert (response.content, response.reasoning) == ("Hi!", Reasoning("Greet."))


def _sse_feed(acc: StreamAccumulator, deltas: list[dict[str, str]]) -> list[str]:
    shown = []
    for delta in deltas:
        acc.feed({"choices": [{"index": 0, "delta": delta}]})
        shown.append(acc.text)
    return shown


def test_a_stream_never_shows_a_think_block_and_ends_as_the_whole_reply_splits() -> None:
    acc = StreamAccumulator("closed")
    shown = _sse_feed(acc, [{"content": p} for p in ["<thi", "nk>Plan", " it.</th", "ink>\n\nDo", "ne."]])
    assert all("think" not in text and "Plan" not in text for text in shown)
    response = acc.response()
    assert (response.content, response.reasoning) == ("Done.", Reasoning("Plan it."))


def test_an_opened_profile_streams_the_start_as_reasoning_unless_a_field_came_first() -> None:
    opened = StreamAccumulator("opened")
    shown = _sse_feed(opened, [{"content": "Think"}, {"content": " more.</think>"}, {"content": "Answer."}])
    assert shown[:2] == ["", ""] and opened.reasoning == "Think more."
    assert opened.response().content == "Answer."
    parsed = StreamAccumulator("opened")  # the server has a reasoning parser: content is the answer
    _sse_feed(parsed, [{"reasoning_content": "Think."}, {"content": "Answer."}])
    assert (parsed.text, parsed.response().reasoning) == ("Answer.", Reasoning("Think."))


def test_plain_content_streams_as_it_did() -> None:
    acc = StreamAccumulator()
    shown = _sse_feed(acc, [{"content": "a "}, {"content": "b\n"}, {"content": "c"}])
    assert shown == ["a ", "a b\n", "a b\nc"]


class City(BaseModel):
    name: str


def test_typed_output_and_content_never_see_think_text(mode: str) -> None:
    reply_text = '<think>\nThe user wants JSON.\n</think>\n\n{"name": "Oslo"}'
    with FakeOpenAIServer([Reply(reply_text)]) as server:
        llm = (AsyncGPTAPI if mode == "async" else GPTAPI)("Qwen/Qwen3-8B", api_base=server.base_url, key=None)
        agent = (AsyncAgent if mode == "async" else Agent)(llm, output_type=City)
        reply = resolve(agent("Oslo?"))
    assert reply.content == '{"name": "Oslo"}' and reply.formatted == City(name="Oslo")


def _tool_loop_agent(server: FakeOpenAIServer, **kwargs: Any) -> FunctionCallingAgent:
    def weather(city: str) -> str:
        """Weather of a city.

        Args:
            city: the city
        """
        return "sunny"

    llm = GPTAPI("deepseek-reasoner", api_base=server.base_url, key=None, retry=1)
    return FunctionCallingAgent(llm, [weather], "Use tools.", **kwargs)


def _script() -> list[Any]:
    return [
        {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": "",
                        "reasoning_content": "Look it up.",
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        },
        {"choices": [{"message": {"role": "assistant", "content": "Sunny.", "reasoning_content": "Done."}}]},
    ]


def test_reasoning_survives_state_dict_json_and_load_state_dict() -> None:
    with FakeOpenAIServer(_script()) as server:
        agent = _tool_loop_agent(server)
        agent("Oslo?")
        state = json.loads(json.dumps(agent.state_dict(), default=str))
        fresh = _tool_loop_agent(server)
        fresh.load_state_dict(state)
    memory = [AgentMessage(**m) for m in fresh.state_dict()["memory"]]
    assert [m.reasoning for m in memory if m.reasoning] == [Reasoning("Look it up."), Reasoning("Done.")]
    assert repr(AgentMessage(content="x")).endswith("stream_state=<AgentStatusCode.END: 0>)")


def test_reasoning_survives_a_session_store_restart(tmp_path: Path) -> None:
    with FakeOpenAIServer(_script()) as server:
        store = SessionStore(tmp_path / "sessions.db")
        store.attach(_tool_loop_agent(server))("Oslo?", session_id="u")
        store.close()
        reopened = SessionStore(tmp_path / "sessions.db")
        agent = reopened.attach(_tool_loop_agent(server))
        messages = agent.state_dict("u")["memory"]
        reopened.close()
    assert [m["reasoning"]["text"] for m in messages if m.get("reasoning")] == ["Look it up.", "Done."]


def test_reasoning_survives_record_and_replay(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    with FakeOpenAIServer(_script()) as server:
        agent = _tool_loop_agent(server)
        with record(agent, log):
            agent("Oslo?")
    with FakeOpenAIServer([]) as idle:
        again = _tool_loop_agent(idle)
        with replay(again, log):
            reply = again("Oslo?")
        assert idle.requests == []
    assert reply.reasoning == Reasoning("Done.")
    kept = [m["reasoning"]["text"] for m in again.state_dict()["memory"] if m.get("reasoning")]
    assert kept == ["Look it up.", "Done."]


def test_export_leaves_reasoning_out_of_both_formats_and_never_in_the_answer() -> None:
    from plait.trajectories.export import to_openai, to_sharegpt, to_xtuner
    from plait.trajectories.from_eval import from_eval

    call = {"id": "c1", "name": "weather", "arguments": '{"city": "Oslo"}'}
    trajectory: list[Any] = [
        {"content": "Oslo?", "sender": "user"},
        {"content": "", "sender": "A", "formatted": {"tool_calls": [call]}, "reasoning": {"text": "Look it up."}},
        {"content": "sunny", "sender": "ActionExecutor", "extra_info": {"tool_call_id": "c1", "name": "weather"}},
        {"content": "Sunny.", "sender": "A", "reasoning": {"text": "Done.", "signature": "sig"}},
        {"content": "And Bergen?", "sender": "user", "reasoning": 5},  # hostile: left out, as malformed messages are
    ]
    converted = from_eval({"id": 1, "trajectory": trajectory, "score": 1.0}, {"name": "A", "tools": []})
    assert converted is not None  # the trajectory keeps the reasoning apart; the fine-tuning formats have no field
    assert [m.get("reasoning_content") for m in converted.messages] == [None, "Look it up.", None, "Done."]
    line = to_openai(converted)
    assert [m["role"] for m in line["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert line["messages"][3] == {"role": "assistant", "content": "Sunny."}
    assert "Look it up" not in json.dumps(line) and "Done." not in json.dumps(line)
    for other in (to_sharegpt(converted), to_xtuner(converted)):
        assert "Look it up" not in json.dumps(other) and "Done." not in json.dumps(other)


def test_a_plain_agent_keeps_the_reasoning_of_its_answers(mode: str) -> None:
    """`Agent` (not streaming) asks with ``complete``: the reply's reasoning is kept in memory, not dropped."""
    answer = {"choices": [{"message": {"role": "assistant", "content": "Oslo.", "reasoning_content": "Norway."}}]}
    with FakeOpenAIServer([answer, Reply("<think>Sweden.</think>Stockholm.")]) as server:
        llm = (AsyncGPTAPI if mode == "async" else GPTAPI)("Qwen/Qwen3-8B", api_base=server.base_url, key=None)
        agent = (AsyncAgent if mode == "async" else Agent)(llm)
        first = resolve(agent("Capital of Norway?"))
        second = resolve(agent("And of Sweden?"))
    assert (first.content, first.reasoning) == ("Oslo.", Reasoning("Norway."))
    assert (second.content, second.reasoning) == ("Stockholm.", Reasoning("Sweden."))
    kept = [(m.content, m.reasoning) for m in agent.memory.get_memory(0) if m.reasoning]
    assert kept == [("Oslo.", Reasoning("Norway.")), ("Stockholm.", Reasoning("Sweden."))]
    assert first.extra_info is None  # the reply's shape is the same as before (usage goes to the meter)


def test_a_run_log_recorded_when_agents_asked_with_chat_still_replays(tmp_path: Path) -> None:
    """Logs written before `Agent` asked with ``complete`` hold ``chat`` entries: replay serves them as the reply."""
    from plait.replay import RunLog, _request

    prompt = [{"role": "user", "content": "ping"}]
    log = RunLog(tmp_path / "old.jsonl")
    log.open_for_writing()
    log.add({"kind": "llm", "key": _request("chat", prompt, {})[0], "method": "chat", "reply": "pong"})
    log.close()
    with FakeOpenAIServer([]) as idle:
        agent = Agent(GPTAPI("m", api_base=idle.base_url, key=None))
        with replay(agent, tmp_path / "old.jsonl"):
            assert agent("ping").content == "pong"
        assert idle.requests == []
