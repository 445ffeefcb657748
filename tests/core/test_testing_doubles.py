from __future__ import annotations

import asyncio
from typing import Any

import pytest

from _support import collect, resolve
from plait.exceptions import ScriptError
from plait.llms.response import ModelResponse, ToolCall
from plait.schema import ModelStatusCode
from plait.testing import AsyncFunctionLLM, FunctionLLM, scripted_llm

MESSAGES = [{"role": "user", "content": "hi"}]


def test_script_serves_chat_stream_and_complete_in_order(mode: str) -> None:
    call = ModelResponse(tool_calls=[ToolCall("c1", "add", '{"a": 1}')], finish_reason="tool_calls")
    llm = scripted_llm(["one two three", ["pie", "ces"], call, ValueError("boom")], mode)
    assert resolve(llm.chat(MESSAGES)) == "one two three"
    chunks = collect(llm.stream_chat(MESSAGES))
    assert [c[1] for c in chunks] == ["pie", "pieces", "pieces"]
    assert [c[0] for c in chunks] == [ModelStatusCode.STREAM_ING, ModelStatusCode.STREAM_ING, ModelStatusCode.END]
    response = resolve(llm.complete(MESSAGES))
    assert response.tool_calls[0].parsed_arguments() == {"a": 1}
    with pytest.raises(ValueError, match="boom"):
        resolve(llm.chat(MESSAGES))
    assert [c.method for c in llm.calls] == ["chat", "stream_chat", "complete", "chat"]
    llm.assert_complete()


def test_script_running_out_fails_loudly(mode: str) -> None:
    llm = scripted_llm(["only"], mode)
    resolve(llm.chat(MESSAGES))
    with pytest.raises(ScriptError, match="called 2 times but its script had only 1"):
        resolve(llm.chat(MESSAGES))
    unused = scripted_llm(["a", "b"], mode)
    resolve(unused.chat(MESSAGES))
    with pytest.raises(ScriptError, match="1 unused"):
        unused.assert_complete()


def test_stop_words_cut_replies_and_streams(mode: str) -> None:
    llm = scripted_llm(["code\n```\nmore", "alpha beta STOP gamma"], mode, stop_words=["\n```\n"])
    assert resolve(llm.chat(MESSAGES)) == "code"
    chunks = collect(llm.stream_chat(MESSAGES, stop_words=["STOP"]))
    assert chunks[-1] == (ModelStatusCode.END, "alpha beta ", None)
    assert all("STOP" not in text for _, text, _ in chunks)


def test_function_llms_see_messages_and_params() -> None:
    seen: list[Any] = []

    def reply(messages: Any, params: dict[str, Any]) -> str:
        seen.append(params["temperature"])
        return f"echo {messages[-1]['content']}"

    llm = FunctionLLM(reply, temperature=0.0)
    assert llm.chat(MESSAGES) == "echo hi" and llm.chat(MESSAGES, temperature=0.5) == "echo hi"
    assert seen == [0.0, 0.5] and llm.remaining == 0

    async def areply(messages: Any, params: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        return "async " + messages[-1]["content"]

    assert asyncio.run(AsyncFunctionLLM(areply).chat(MESSAGES)) == "async hi"
