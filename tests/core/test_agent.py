from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from _support import collect, resolve
from plait.agents import (
    Agent,
    AgentDict,
    AgentList,
    AsyncAgent,
    AsyncSequential,
    AsyncStreamingAgent,
    AsyncStreamingSequential,
    Sequential,
    StreamingAgent,
    StreamingSequential,
)
from plait.agents.aggregator import DefaultAggregator
from plait.exceptions import LLMConnectionError, StateDictError, UserError
from plait.hooks import Hook
from plait.memory import Memory
from plait.schema import AgentMessage, AgentStatusCode
from plait.testing import AsyncFunctionLLM, FunctionLLM, scripted_llm


def agent_cls(mode: str) -> type[Agent]:
    return Agent if mode == "sync" else AsyncAgent


def stream_cls(mode: str) -> type[Agent]:
    return StreamingAgent if mode == "sync" else AsyncStreamingAgent


def seq_cls(mode: str) -> type[Sequential]:
    return Sequential if mode == "sync" else AsyncSequential


SYSTEM = "你的回答只能从“典”、“孝”、“急”三个字中选一个。"


def test_models_as_agents_seed(mode: str) -> None:
    llm = scripted_llm(["急"], mode)
    agent = agent_cls(mode)(llm, SYSTEM)
    bot_msg = resolve(agent(AgentMessage(sender="user", content="今天天气情况")))
    sender = agent_cls(mode).__name__  # the default name is the class name
    assert str(bot_msg) == (
        f"content='急' sender='{sender}' formatted=None extra_info=None type=None receiver=None "
        "stream_state=<AgentStatusCode.END: 0>"
    )
    assert llm.calls[0].messages == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "今天天气情况"},
    ]
    memory = agent.memory.get_memory()
    assert [m.content for m in memory] == ["今天天气情况", "急"]
    dumped = agent.state_dict()
    assert dumped["memory"] == [m.model_dump() for m in memory]
    assert dumped["memory"][1]["stream_state"] is AgentStatusCode.END
    json.dumps(dumped, ensure_ascii=False)  # plain JSON
    agent.memory.reset()
    assert agent.memory.get_memory() == []


def test_fewshot_aggregator_seed(mode: str) -> None:
    class FewshotAggregator(DefaultAggregator):
        def __init__(self, few_shot: list[dict] | None = None):
            self.few_shot = few_shot or []

        def aggregate(self, messages: Memory, name: str, parser: Any = None, system_instruction: Any = None):
            _message = []
            if system_instruction:
                _message.extend(self.aggregate_system_intruction(system_instruction))
            _message.extend(self.few_shot)
            messages = messages.get_memory()
            for message in messages:
                if message.sender == name:
                    _message.append(dict(role="assistant", content=str(message.content)))
                else:
                    user_message = message.content
                    if len(_message) > 0 and _message[-1]["role"] == "user":
                        _message[-1]["content"] += user_message
                    else:
                        _message.append(dict(role="user", content=user_message))
            return _message

    llm = scripted_llm(["【多云转晴,夜间有轻微降温】"], mode)
    agent = agent_cls(mode)(
        llm,
        aggregator=FewshotAggregator(
            [
                {"role": "user", "content": "今天天气"},
                {"role": "assistant", "content": "【晴】"},
            ]
        ),
    )
    bot_msg = resolve(agent(AgentMessage(sender="user", content="昨天天气")))
    assert bot_msg.content == "【多云转晴,夜间有轻微降温】" and bot_msg.sender == agent_cls(mode).__name__
    assert llm.calls[0].messages == [
        {"role": "user", "content": "今天天气"},
        {"role": "assistant", "content": "【晴】"},
        {"role": "user", "content": "昨天天气"},
    ]


def test_strings_become_user_messages_and_kwargs_reach_the_llm(mode: str) -> None:
    llm = scripted_llm(["answer```\nignored", "second"], mode, stop_words=["<|im_end|>"])
    agent = agent_cls(mode)(llm)
    reply = resolve(agent("q1", "q2", stop_words=["```\n"]))
    assert reply.content == "answer"
    assert llm.calls[0].params["stop_words"] == ["```\n"]
    assert llm.calls[0].messages == [{"role": "user", "content": "q1\nq2"}]
    llm.gen_params["stop_words"].append("\n```\n")
    resolve(agent("q3"))
    assert llm.calls[1].params["stop_words"] == ["<|im_end|>", "\n```\n"]


def test_config_dicts_are_accepted(mode: str) -> None:
    llm_cls = type(scripted_llm([], mode))
    agent = agent_cls(mode)(
        llm=dict(type=llm_cls, script=["ok"]),
        memory=dict(type="plait.memory.Memory", recent_n=1),
        aggregator=dict(type=DefaultAggregator),
        hooks=[dict(type=Hook)],
    )
    assert resolve(agent("hi")).content == "ok"
    assert agent.memory.get(0).recent_n == 1


class Recorder(Hook):
    def __init__(self, log: list[str], tag: str, use_async: bool = False) -> None:
        self.log, self.tag, self.use_async = log, tag, use_async

    def before_agent(self, agent: Any, messages: list[AgentMessage], session_id: Any) -> Any:
        self.log.append(f"{self.tag}:before:{messages[0].content}")
        return None

    def after_agent(self, agent: Any, message: AgentMessage, session_id: Any) -> Any:
        self.log.append(f"{self.tag}:after:{message.content}")
        return None


class AsyncReplacer(Hook):
    async def before_agent(self, agent: Any, messages: list[AgentMessage], session_id: Any) -> Any:
        await asyncio.sleep(0)
        return [AgentMessage(sender="user", content="replaced")]

    async def after_agent(self, agent: Any, message: AgentMessage, session_id: Any) -> Any:
        message.content = message.content.upper()
        return message


class SyncReplacer(Hook):
    def before_agent(self, agent: Any, messages: list[AgentMessage], session_id: Any) -> Any:
        return [AgentMessage(sender="user", content="replaced")]

    def after_agent(self, agent: Any, message: AgentMessage, session_id: Any) -> Any:
        message.content = message.content.upper()
        return message


def test_hooks_order_replacement_and_memory(mode: str) -> None:
    log: list[str] = []
    llm = scripted_llm(["reply", "again"], mode)
    replacer = AsyncReplacer() if mode == "async" else SyncReplacer()
    agent = agent_cls(mode)(llm, hooks=[Recorder(log, "a"), replacer, Recorder(log, "b")])
    out = resolve(agent("original"))
    assert log == ["a:before:original", "b:before:replaced", "a:after:reply", "b:after:REPLY"]
    assert out.content == "REPLY"
    # memory keeps what forward produced; hooks' changes after storage do not leak back
    assert [m.content for m in agent.memory.get_memory()] == ["replaced", "reply"]
    assert llm.calls[0].messages == [{"role": "user", "content": "replaced"}]


def test_hook_handles_remove_idempotently_and_as_context_managers(mode: str) -> None:
    log: list[str] = []
    agent = agent_cls(mode)(scripted_llm(["1", "2", "3"], mode))
    handle = agent.register_hook(Recorder(log, "h"))
    resolve(agent("x"))
    handle.remove()
    handle.remove()
    resolve(agent("y"))
    with agent.register_hook(Recorder(log, "ctx")):
        resolve(agent("z"))
    assert log == ["h:before:x", "h:after:1", "ctx:before:z", "ctx:after:3"]
    assert agent._hooks == {}


def test_async_hook_on_sync_agent_is_a_clear_error() -> None:
    agent = Agent(scripted_llm(["x"], "sync"), hooks=[AsyncReplacer()])
    with pytest.raises(UserError, match="AsyncAgent"):
        agent("hi")


def test_caller_messages_are_not_mutated_by_hooks(mode: str) -> None:
    class Prefix(Hook):
        def before_agent(self, agent: Any, messages: list[AgentMessage], session_id: Any) -> None:
            for message in messages:
                message.content = "P:" + message.content

    agent = agent_cls(mode)(scripted_llm(["ok"], mode), hooks=[Prefix()])
    original = AgentMessage(sender="writer", content="draft")
    resolve(agent(original))
    assert original.content == "draft"
    assert agent.memory.get_memory()[0].content == "P:draft"


def test_failed_forward_leaves_memory_unchanged(mode: str) -> None:
    llm = scripted_llm(["first", LLMConnectionError("server went away", attempts=3), "third"], mode)
    agent = agent_cls(mode)(llm)
    resolve(agent("one"))
    before = agent.state_dict()
    with pytest.raises(LLMConnectionError):
        resolve(agent("two"))
    assert agent.state_dict() == before
    assert resolve(agent("three")).content == "third"
    assert [m.content for m in agent.memory.get_memory()] == ["one", "first", "three", "third"]


def test_forward_returning_plain_values_is_wrapped(mode: str) -> None:
    if mode == "sync":

        class Echo(Agent):
            def forward(self, *message: AgentMessage, session_id: Any = 0, **kwargs: Any) -> str:
                return f"echo {message[0].content} {session_id}"
    else:

        class Echo(AsyncAgent):  # type: ignore[no-redef]
            async def forward(self, *message: AgentMessage, session_id: Any = 0, **kwargs: Any) -> str:
                return f"echo {message[0].content} {session_id}"

    agent = Echo(name="echo")
    reply = resolve(agent("hi", session_id="s"))
    assert (reply.sender, reply.content) == ("echo", "echo hi s")
    assert agent.state_dict("s")["memory"][1]["content"] == "echo hi s"


def test_parse_errors_are_data_not_exceptions(mode: str) -> None:
    from plait.exceptions import ParseError

    class StrictParser:
        def parse_response(self, text: str) -> dict[str, Any]:
            if not text.startswith("{"):
                raise ParseError("expected a JSON object", raw=text)
            return json.loads(text)

    agent = agent_cls(mode)(scripted_llm(["not json", '{"a": 1}'], mode), output_format=StrictParser())
    bad = resolve(agent("x"))
    assert bad.formatted is None and bad.extra_info == {"parse_error": "expected a JSON object"}
    assert resolve(agent("y")).formatted == {"a": 1}


class Team(Agent):
    def __init__(self, mode: str) -> None:
        super().__init__(memory=None)
        self.writer = agent_cls(mode)(scripted_llm([], mode), name="writer")
        self.crew = AgentList([agent_cls(mode)(scripted_llm([], mode), name="c0")])
        self.board = AgentDict({"lead": agent_cls(mode)(scripted_llm([], mode), name="lead")})


def test_registration_traversal_and_repr(mode: str) -> None:
    team = Team(mode)
    names = [name for name, _ in team.named_agents()]
    assert names == ["", "writer", "crew", "crew.0", "board", "board.lead"]
    assert team.get_agent("crew.0").name == "c0"
    cls = agent_cls(mode).__name__
    assert repr(team) == (
        "Team(name='Team')(\n"  # Lagent 0.5's tree: the name, then the children in parentheses
        f"  (writer): {cls}(name='writer')\n"
        "  (crew): AgentList(\n"
        f"    (0): {cls}(name='c0')\n"
        "  )\n"
        "  (board): AgentDict(\n"
        f"    (lead): {cls}(name='lead')\n"
        "  )\n"
        ")"
    )
    team.writer = "not an agent"  # reassignment unregisters
    assert "writer" not in dict(team.named_children())
    del team.board
    assert [n for n, _ in team.named_children()] == ["crew"]
    with pytest.raises(UserError):
        team.get_agent("nope")


def test_assigning_before_super_init_is_a_clear_error() -> None:
    class Early(Agent):
        def __init__(self) -> None:
            self.inner = Agent()
            super().__init__()

    with pytest.raises(UserError, match="super"):
        Early()


def test_state_dict_round_trip_strictness_and_reset(mode: str, tmp_path: Any) -> None:
    team = Team(mode)
    team.writer.update_memory(["hello", AgentMessage(sender="writer", content="hi")], session_id=3)
    team.crew[0].update_memory("q", session_id=3)
    state = team.state_dict(session_id=3)
    assert set(state) == {"writer.memory", "crew.0.memory", "board.lead.memory"}
    assert state["board.lead.memory"] == []

    other = Team(mode)
    assert other.load_state_dict(state, session_id=9) == ([], [])
    assert other.state_dict(9) == state
    with pytest.raises(StateDictError) as info:
        other.load_state_dict({"writer.memory": [], "ghost.memory": []})
    assert info.value.missing_keys == ["board.lead.memory", "crew.0.memory"]
    assert info.value.unexpected_keys == ["ghost.memory"]
    result = other.load_state_dict({"writer.memory": [], "ghost.memory": []}, session_id=9, strict=False)
    assert result.unexpected_keys == ["ghost.memory"]
    assert other.state_dict(9)["writer.memory"] == []

    path = tmp_path / "state.json"
    team.save_state(path, session_id=3)
    fresh = Team(mode)
    fresh.load_state(path, session_id=0)
    assert fresh.state_dict(0) == state
    envelope = json.loads(path.read_text())
    assert envelope["version"] == 1
    envelope["version"] = 99
    with pytest.raises(StateDictError, match="version"):
        fresh.load_state_dict(envelope)

    fresh.reset(keypath="crew.0")
    assert fresh.state_dict(0)["crew.0.memory"] == [] and fresh.state_dict(0)["writer.memory"]
    fresh.reset(recursive=True)
    assert all(v == [] for v in fresh.state_dict(0).values())


def test_agent_reset_clears_session_zero_only(mode: str) -> None:
    agent = agent_cls(mode)(scripted_llm(["a", "b"], mode))
    resolve(agent("x"))
    resolve(agent("y", session_id=1))
    agent.reset()
    assert agent.memory.get_memory() == [] and len(agent.memory.get_memory(1)) == 2


def test_streaming_yields_one_final_that_matches_non_streaming(mode: str) -> None:
    text = "The answer is 42, computed carefully."
    plain = resolve(agent_cls(mode)(scripted_llm([text], mode), name="bot")("q"))
    streaming = stream_cls(mode)(scripted_llm([text], mode), name="bot")
    chunks = collect(streaming("q"))
    finals = [c for c in chunks if c.stream_state == AgentStatusCode.END]
    assert len(finals) == 1 and chunks[-1] is finals[0]
    assert len(chunks) > 3
    assert all(c.stream_state == AgentStatusCode.STREAM_ING for c in chunks[:-1])
    assert [c.content for c in chunks[:-1]] == sorted((c.content for c in chunks[:-1]), key=len)
    assert finals[0].model_dump() == plain.model_dump()
    assert [m.content for m in streaming.memory.get_memory()] == ["q", text]


def test_streaming_after_hooks_shape_the_final(mode: str) -> None:
    replacer = AsyncReplacer() if mode == "async" else SyncReplacer()
    streaming = stream_cls(mode)(scripted_llm(["quiet words"], mode), hooks=[replacer])
    chunks = collect(streaming("q"))
    assert chunks[-1].content == "QUIET WORDS"
    assert streaming.memory.get_memory()[-1].content == "quiet words"


def test_streaming_failure_rolls_back(mode: str) -> None:
    def boom(messages: Any, params: Any) -> str:
        raise LLMConnectionError("down")

    llm = FunctionLLM(boom) if mode == "sync" else AsyncFunctionLLM(boom)
    streaming = stream_cls(mode)(llm)
    with pytest.raises(LLMConnectionError):
        collect(streaming("q"))
    assert streaming.memory.get_memory() == []


def test_sequential_pipes_and_exit_at(mode: str) -> None:
    a = agent_cls(mode)(scripted_llm(["from a", "a again"], mode), name="a")
    b = agent_cls(mode)(scripted_llm(["from b"], mode), name="b")
    seq = seq_cls(mode)(a, b)
    assert len(seq) == 2 and seq[0] is a and seq[-1] is b and seq["1"] is b
    out = resolve(seq("start"))
    assert (out.sender, out.content) == ("b", "from b")
    assert b.llm.calls[0].messages == [{"role": "user", "content": "from a"}]
    assert [m.content for m in seq.memory.get_memory()] == ["start", "from b"]
    out = resolve(seq("again", exit_at=0, session_id=5))
    assert out.content == "a again"
    with pytest.raises(UserError):
        resolve(seq_cls(mode)()("x"))
    named = seq_cls(mode)({"first": agent_cls(mode)(scripted_llm([], mode))})
    assert [n for n, _ in named.named_children()] == ["first"]


def test_streaming_sequential_streams_every_member(mode: str) -> None:
    cls = StreamingSequential if mode == "sync" else AsyncStreamingSequential
    a = stream_cls(mode)(scripted_llm(["alpha beta"], mode), name="a")
    b = stream_cls(mode)(scripted_llm(["gamma delta"], mode), name="b")
    chunks = collect(cls(a, b)("go"))
    senders = [c.sender for c in chunks]
    assert senders[0] == "a" and senders[-1] == "b" and "b" in senders[:-1]
    assert [c.stream_state for c in chunks].count(AgentStatusCode.END) == 1
    assert chunks[-1].content == "gamma delta"


def test_concurrent_sessions_keep_separate_memories() -> None:
    async def reply(messages: Any, params: Any) -> str:
        await asyncio.sleep(0)
        return f"seen {messages[-1]['content']}"

    agent = AsyncAgent(AsyncFunctionLLM(reply))

    async def session(i: int) -> None:
        for turn in range(3):
            await agent(f"s{i}-t{turn}", session_id=i)

    async def main() -> None:
        await asyncio.gather(*(session(i) for i in range(256)))

    asyncio.run(main())
    for i in range(256):
        contents = [m["content"] for m in agent.state_dict(session_id=i)["memory"]]
        assert contents == [x for t in range(3) for x in (f"s{i}-t{t}", f"seen s{i}-t{t}")]


def test_async_agent_runs_sync_llm_in_a_thread() -> None:
    import threading

    threads: list[str] = []

    def reply(messages: Any, params: Any) -> str:
        threads.append(threading.current_thread().name)
        return "ok"

    agent = AsyncAgent(FunctionLLM(reply))
    assert asyncio.run(agent("x")).content == "ok"
    assert threads and threads[0] != threading.main_thread().name


def test_memoryless_agent_cannot_prompt(mode: str) -> None:
    agent = agent_cls(mode)(scripted_llm(["x"], mode), memory=None)
    with pytest.raises(UserError, match="memory=None"):
        resolve(agent("hi"))
    with pytest.raises(UserError, match="no llm"):
        resolve(agent_cls(mode)()("hi"))


def test_memory_is_typed_for_agents_that_have_it_and_absent_for_those_that_do_not() -> None:
    """``agent.memory`` is a `MemoryManager` (not Optional: mypy --strict accepts ``agent.memory.get_memory()``);
    an agent built with ``memory=None`` has none: ``getattr(agent, 'memory', None)`` is None."""
    from plait.agents import AgentList
    from plait.memory import MemoryManager

    agent = Agent(scripted_llm(["hi"], "sync"))
    agent("hello")
    assert isinstance(agent.memory, MemoryManager) and len(agent.memory.get_memory(0)) == 2
    plain = Agent(scripted_llm(["x"], "sync"), memory=None)
    assert getattr(plain, "memory", None) is None and not hasattr(plain, "memory")
    with pytest.raises(AttributeError, match="built with memory=None"):
        plain.memory.get_memory(0)
    assert getattr(AgentList([agent]), "memory", None) is None  # containers keep no history of their own
    plain.memory = MemoryManager()  # assignable, as an attribute
    assert plain.memory.get_memory(0) == []
