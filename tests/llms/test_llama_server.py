"""plait's OpenAI-compatible clients against llama.cpp's own HTTP server (the real wire format).

The server (`llama_server`, tests/_llama_server.py) is llama.cpp's, started in-process by
xllamacpp on 127.0.0.1 with the default 135M model; every behaviour runs with `GPTAPI` and
`AsyncGPTAPI` from one body (the `mode` fixture). The assertions are about structure: a call
that names a tool with arguments that parse, a loop that ends, an object that validates,
usage that is counted; never about how good the answers are. Replies are kept short (the
machine running the suite may be busy).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field
from test_llama_cpp import ASK, HELLO, WEATHER

from _llama_server import LlamaServer, PortGate
from _support import collect, resolve
from plait.actions import BaseAction, tool_api
from plait.agents import (
    Agent,
    AgentForInternLM,
    AsyncAgent,
    AsyncAgentForInternLM,
    AsyncFunctionCallingAgent,
    AsyncReAct,
    FunctionCallingAgent,
    ReAct,
)
from plait.context import ContextPolicy
from plait.exceptions import LLMAPIError
from plait.llms.response import ModelResponse
from plait.schema import AgentMessage, ModelStatusCode

pytestmark = pytest.mark.slow


class Weather(BaseAction):
    """Reports the weather in a city."""

    def __init__(self) -> None:
        super().__init__()
        self.cities: list[str] = []

    @tool_api
    def run(self, city: str) -> str:
        """Get the current weather in a city.

        Args:
            city: The city name.
        """
        self.cities.append(city)
        return f"Sunny, 21 C in {city}."


class Forecast(BaseModel):
    city: str = Field(max_length=12)
    celsius: int = Field(ge=-50, le=50)


@pytest.fixture
def server(llama_server: LlamaServer) -> LlamaServer:
    """The session's llama.cpp server, running (a test that stopped it and failed does not leave it down)."""
    return llama_server.start()


@pytest.fixture
def llm(make_llm: Callable[..., Any], server: LlamaServer) -> Any:
    """A client for the server in this test's mode: greedy, short replies."""
    return make_llm(server, temperature=0.0, max_new_tokens=12, timeout=300)


# -- chat and streaming ------------------------------------------------------------------------


def test_chat_returns_text_with_the_servers_usage(llm: Any) -> None:
    response = resolve(llm.complete(HELLO))
    assert isinstance(response, ModelResponse)
    assert response.content.strip() and not response.tool_calls
    assert response.finish_reason in ("stop", "length")
    assert response.usage is not None and response.usage.prompt_tokens > 0
    assert 0 < response.usage.completion_tokens <= 12
    assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens
    assert llm.usage == response.usage  # the client's running total counted the one reply
    text = resolve(llm.chat(HELLO))
    assert isinstance(text, str) and text.strip()


def test_stream_grows_then_ends_with_the_whole_reply_and_its_usage(llm: Any) -> None:
    items = collect(llm.stream_chat(HELLO))
    *chunks, (status, text, response) = items
    assert chunks and all(s == ModelStatusCode.STREAM_ING for s, _, _ in chunks)
    texts = [t for _, t, _ in chunks]
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))  # each item extends the last
    assert status == ModelStatusCode.END and text == texts[-1] == response.content
    assert response.finish_reason in ("stop", "length")
    assert response.usage is not None and 0 < response.usage.completion_tokens <= 12  # the usage chunk
    assert llm.usage == response.usage


# -- native tool calls -------------------------------------------------------------------------


def _valid_call(response: ModelResponse) -> dict[str, Any]:
    assert response.tool_calls, f"no tool call in {response!r}"
    call = response.tool_calls[0]
    assert call.name == "get_weather" and call.id
    arguments = call.parsed_arguments()
    assert isinstance(arguments, dict) and isinstance(arguments.get("city"), str)
    assert "<tool_call>" not in response.content  # llama.cpp parsed the call out of the text
    return arguments


def test_required_tool_choice_gives_a_parsed_call(llm: Any) -> None:
    response = resolve(llm.complete(ASK, tools=[WEATHER], tool_choice="required", max_new_tokens=32))
    _valid_call(response)
    assert response.usage is not None and response.usage.prompt_tokens > 0


def test_streamed_tool_call_deltas_fold_into_one_call(llm: Any) -> None:
    items = collect(llm.stream_chat(ASK, tools=[WEATHER], tool_choice="required", max_new_tokens=32))
    status, text, response = items[-1]
    assert status == ModelStatusCode.END and "<tool_call>" not in text
    _valid_call(response)
    assert response.usage is not None and response.usage.completion_tokens > 0


def test_function_calling_agent_runs_the_tool_and_ends(mode: str, llm: Any) -> None:
    weather = Weather()
    cls = AsyncFunctionCallingAgent if mode == "async" else FunctionCallingAgent
    agent = cls(llm, [weather], max_turn=3, tool_choice="required", reset_tool_choice="none")
    reply = resolve(agent("What is the weather in Paris?", session_id="s", max_new_tokens=28))
    assert isinstance(reply, AgentMessage) and isinstance(reply.content, str)
    assert len(weather.cities) >= 1 and all(isinstance(city, str) for city in weather.cities)
    senders = [m.sender for m in agent.memory.get("s").get_memory()]
    assert "ActionExecutor" in senders  # the result went back to the model
    assert senders[-1] == agent.name  # the loop ended on the model's answer


# -- text-protocol agents ----------------------------------------------------------------------


def test_react_ends_within_its_turns(mode: str, llm: Any) -> None:
    cls = AsyncReAct if mode == "async" else ReAct
    agent = cls(llm, [Weather()], max_turn=2)
    reply = resolve(agent("What is the weather in Paris?", session_id="s"))
    assert isinstance(reply, AgentMessage) and isinstance(reply.content, str)
    replies = [m for m in agent.memory.get("s").get_memory() if m.sender == agent.name]
    assert 1 <= len(replies) <= 2  # the loop ended within max_turn model calls


def test_internlm_agent_ends_within_its_turns(mode: str, llm: Any) -> None:
    cls = AsyncAgentForInternLM if mode == "async" else AgentForInternLM
    agent = cls(llm, plugins=[Weather()], max_turn=2)
    reply = resolve(agent("What is the weather in Paris?", session_id="s"))
    assert isinstance(reply, AgentMessage) and isinstance(reply.content, str)
    replies = [m for m in agent.agent.memory.get("s").get_memory() if m.sender == agent.name]
    assert 1 <= len(replies) <= 2


# -- typed output ------------------------------------------------------------------------------


def test_typed_output_through_response_format_validates(mode: str, llm: Any) -> None:
    agent = (AsyncAgent if mode == "async" else Agent)(llm, output_type=Forecast)
    reply = resolve(agent("Forecast for Paris as JSON.", session_id="s", max_new_tokens=48))
    assert isinstance(reply.formatted, Forecast)
    assert Forecast.model_validate_json(reply.content) == reply.formatted


# -- the context policy on the server's counts ---------------------------------------------------


def test_context_policy_counts_with_the_servers_usage(mode: str, llm: Any) -> None:
    window, reserve = 160, 8
    policy = ContextPolicy("trim", context_window=window, reserve=reserve)
    agent = (AsyncAgent if mode == "async" else Agent)(llm, context_policy=policy)
    prompts: list[int] = []
    for i in range(3):
        before = llm.usage.prompt_tokens
        question = f"Question {i}: " + "tell me about the sea and the ships on it " * 4
        resolve(agent(question, session_id="s", max_new_tokens=reserve))
        prompts.append(llm.usage.prompt_tokens - before)  # the server's own count of this request
    budget = window - reserve
    assert all(0 < tokens <= budget for tokens in prompts), prompts
    assert policy.trimmed.get("s", 0) >= 1  # the history outgrew the window: older turns were left out
    reported = policy.calibration._reported["s"][id(llm)]
    assert reported.tokens == prompts[-1]  # the last request's count is the server's, not an estimate


def test_the_context_window_read_from_the_server_is_its_n_ctx(llm: Any, server: LlamaServer) -> None:
    assert resolve(llm.fetch_context_window()) == server.n_ctx


# -- errors and retries --------------------------------------------------------------------------


def test_an_error_status_quotes_the_servers_message_and_is_not_retried(llm: Any, server: LlamaServer) -> None:
    too_long = [{"role": "user", "content": "sea " * (server.n_ctx + 100)}]
    with pytest.raises(LLMAPIError) as caught:
        resolve(llm.complete(too_long))
    assert caught.value.status == 400 and caught.value.attempts == 1
    assert "exceeds the available context size" in str(caught.value)
    assert json.loads(caught.value.body)["error"]["type"] == "exceed_context_size_error"


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    not_a_model = tmp_path / "broken.gguf"
    not_a_model.write_bytes(b"GGUF but not really")
    with pytest.raises(RuntimeError, match=r"llama\.cpp's server did not start on .*broken\.gguf"):
        LlamaServer(str(not_a_model)).start()


def test_a_request_is_retried_until_the_restarted_server_answers(mode: str, make_llm: Any, server: LlamaServer) -> None:
    llm = make_llm(server, temperature=0.0, max_new_tokens=4, retry=60, backoff_base=0.2, backoff_max=1.0)
    assert resolve(llm.chat(HELLO)).strip()
    server.stop()
    gate = PortGate(server.port)  # the port is bound, but nothing answers: connections break
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["reply"] = resolve(llm.complete(HELLO))
        except BaseException as exc:  # reported below, with the test's assertions
            outcome["error"] = exc

    caller = threading.Thread(target=call, name="retrying-call")
    caller.start()
    try:
        assert gate.wait_for(1, timeout=120), "the client never tried the stopped server"
    finally:
        gate.close()
        server.start()  # the same port again
    caller.join(timeout=300)
    assert not caller.is_alive()
    assert "error" not in outcome, outcome.get("error")
    reply = outcome["reply"]
    assert reply.content.strip() and reply.usage is not None
    assert gate.connections >= 1  # an attempt failed on the stopped server: the answer came from a retry
