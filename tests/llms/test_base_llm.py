"""The shared model core: sibling sync/async bases, batching bases, and their helpers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from plait.exceptions import UserError
from plait.llms import AsyncBaseLLM, BaseLLM, LMTemplateParser
from plait.llms.base_llm import (
    AsyncBatchLLM,
    BatchLLM,
    GenParams,
    LLMCore,
    Prompt,
    aaccumulate,
    accumulate,
    engine_fields,
    is_chat_batch,
    is_prompt_batch,
)
from plait.llms.meta_template import INTERNLM2_META
from plait.schema import ModelStatusCode
from plait.types import SessionIds

HELLO = [{"role": "user", "content": "hi"}]


class Echo(BaseLLM):
    """A raw-completion model that answers with its prompt."""

    def generate(self, inputs: Prompt, **gen_params: Any) -> str:
        return f"<{inputs}>"


class AsyncEcho(AsyncBaseLLM):
    """The async twin of `Echo`; it records the session ids it is given."""

    def __init__(self) -> None:
        super().__init__(path="echo")
        self.sessions: list[SessionIds] = []

    async def generate(self, inputs: Prompt, session_ids: SessionIds = None, **gen_params: Any) -> str:
        self.sessions.append(session_ids)
        return f"<{inputs}>"


class Batched(BatchLLM):
    """Answers every prompt of a batch in one call, recording the batches."""

    def __init__(self, **gen_params: Any) -> None:
        super().__init__(path="batched", meta_template=INTERNLM2_META, **gen_params)
        self.batches: list[list[Prompt]] = []

    def _generate_batch(self, prompts: list[Prompt], params: GenParams) -> list[str]:
        self.batches.append(prompts)
        return [self._finish(f"reply to {len(str(p))} chars. END junk", params) for p in prompts]


class AsyncBatched(AsyncBatchLLM):
    """The async twin of `Batched`; it records the session ids of each batch."""

    def __init__(self, **gen_params: Any) -> None:
        super().__init__(path="batched", meta_template=INTERNLM2_META, **gen_params)
        self.batches: list[tuple[list[Prompt], SessionIds]] = []

    async def _generate_batch(self, prompts: list[Prompt], params: GenParams, session_ids: SessionIds) -> list[str]:
        self.batches.append((prompts, session_ids))
        return [self._finish(f"reply to {len(str(p))} chars. END junk", params) for p in prompts]


def test_the_sync_and_async_bases_are_siblings_over_one_core() -> None:
    assert issubclass(BaseLLM, LLMCore) and issubclass(AsyncBaseLLM, LLMCore)
    assert AsyncBaseLLM not in BaseLLM.__mro__ and BaseLLM not in AsyncBaseLLM.__mro__
    for name in ("generate", "stream_generate", "chat", "stream_chat"):
        assert name not in vars(LLMCore)


def test_user_subclasses_of_either_base_are_base_llms() -> None:
    assert isinstance(Echo(), BaseLLM) and not isinstance(Echo(), AsyncBaseLLM)
    assert isinstance(AsyncEcho(), BaseLLM) and isinstance(AsyncEcho(), AsyncBaseLLM)
    assert issubclass(AsyncBatched, BaseLLM) and not issubclass(Batched, AsyncBaseLLM)


def test_chat_renders_with_the_template_and_applies_stop_words() -> None:
    llm = Echo(meta_template=INTERNLM2_META, stop_words=["<|im_end|>"])
    assert llm.chat(HELLO) == "<<|im_start|>user\nhi"
    assert llm.chat("raw", stop_words="w") == "<ra"
    with pytest.raises(UserError, match="list of message dicts"):
        llm.chat(42)  # type: ignore[arg-type]


def test_async_chat_passes_session_ids_to_generate() -> None:
    llm = AsyncEcho()

    async def main() -> tuple[str, list[Any]]:
        reply = await llm.chat("raw", session_ids=7)
        items = [item async for item in llm.stream_chat("raw", 8)]
        return reply, items

    reply, items = asyncio.run(main())
    assert reply == "<raw>"
    assert items == [(ModelStatusCode.END, "<raw>", None)]
    assert llm.sessions == [7, 8]


def test_template_parser_may_be_a_class_or_a_callable() -> None:
    assert isinstance(Echo(template_parser=LMTemplateParser).template_parser, LMTemplateParser)

    def shout(messages: Sequence[Any]) -> str:
        return " ".join(str(m["content"]).upper() for m in messages)

    assert Echo(template_parser=shout).chat(HELLO) == "<HI>"


def test_batch_generate_and_chat() -> None:
    llm = Batched(stop_words=[" END"])
    assert llm.generate("abc") == "reply to 3 chars."
    assert llm.generate(["a", "bb"]) == ["reply to 1 chars.", "reply to 2 chars."]
    assert llm.generate([]) == []
    assert llm.chat(HELLO) == llm.chat([HELLO])[0]
    assert len(llm.chat([HELLO, HELLO, HELLO])) == 3
    assert [len(batch) for batch in llm.batches] == [1, 2, 0, 1, 1, 3]
    assert llm.batches[-1][0] == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_async_batch_generate_and_chat_pass_session_ids() -> None:
    llm = AsyncBatched(stop_words=[" END"])

    async def main() -> list[Any]:
        return [
            await llm.generate("abc", 1),
            await llm.generate(["a", "bb"], [2, 3]),
            await llm.chat(HELLO, session_ids=4),
            await llm.chat([HELLO, HELLO], session_ids=[5, 6]),
        ]

    one, two, single, pair = asyncio.run(main())
    assert one == "reply to 3 chars."
    assert two == ["reply to 1 chars.", "reply to 2 chars."]
    assert isinstance(single, str) and pair == [single, single]
    assert [sessions for _, sessions in llm.batches] == [1, [2, 3], 4, [5, 6]]


def test_a_batch_model_must_implement_its_batch_hook() -> None:
    class Incomplete(BatchLLM):
        pass

    with pytest.raises(TypeError, match="_generate_batch"):
        Incomplete()  # type: ignore[abstract]


def test_batch_detection() -> None:
    assert is_chat_batch([HELLO, HELLO]) and not is_chat_batch(HELLO) and not is_chat_batch("x")
    assert not is_chat_batch([])
    assert is_prompt_batch(["a", "b"]) and is_prompt_batch([HELLO]) and is_prompt_batch([])
    assert not is_prompt_batch("a") and not is_prompt_batch(HELLO)


def test_engine_fields() -> None:
    params = {"max_new_tokens": 5, "stop_words": ("a",), "seed": None, "session_ids": 1, "top_k": 2}
    assert engine_fields(params, {"max_new_tokens": "max_tokens"}) == {"max_tokens": 5, "stop_words": ["a"], "top_k": 2}


def test_accumulate_is_cumulative_with_stop_words() -> None:
    params = {"stop_words": ["!"]}
    expected = [
        (ModelStatusCode.STREAM_ING, "He", None),
        (ModelStatusCode.STREAM_ING, "Hello", None),
        (ModelStatusCode.STREAM_ING, "Hello", None),
        (ModelStatusCode.END, "Hello", None),
    ]
    assert list(accumulate(["He", "llo", "! there"], params)) == expected

    async def pieces() -> AsyncIterator[str]:
        for piece in ["He", "llo", "! there"]:
            yield piece

    async def main() -> list[Any]:
        return [item async for item in aaccumulate(pieces(), params)]

    assert asyncio.run(main()) == expected
