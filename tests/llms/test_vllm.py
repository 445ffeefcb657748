"""VllmModel / AsyncVllmModel against a fake ``vllm`` module (the real one needs a GPU).

The fake mirrors vLLM's public surface: ``LLM(model=..., tensor_parallel_size=...)``,
``LLM.generate(prompts, sampling_params, use_tqdm=...)`` -> ``RequestOutput`` list,
``LLM.llm_engine`` (``add_request``/``step``/``has_unfinished_requests``/``abort_request``),
``AsyncEngineArgs`` and ``AsyncLLMEngine.from_engine_args(...).generate(prompt, params, request_id)``
yielding cumulative ``RequestOutput``s, and ``abort(request_id)``.
"""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from _support import collect, resolve
from plait.agents.agent import AsyncStreamingAgent, StreamingAgent
from plait.events import ReasoningDelta, TextDelta
from plait.exceptions import LLMError, MissingDependencyError
from plait.llms import INTERNLM2_META
from plait.llms.vllm_wrapper import AsyncVllmModel, VllmModel, request_id, sampling_kwargs
from plait.schema import ModelStatusCode, Reasoning

HELLO = [{"role": "user", "content": "hi"}]
PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
REPLY = ["Hello", " there", ".", "<|im_end|>", " junk"]  # what the fake model "generates"


@dataclass
class CompletionOutput:
    text: str
    token_ids: list[int] = field(default_factory=list)


@dataclass
class RequestOutput:
    request_id: str
    prompt: str
    outputs: list[CompletionOutput]
    finished: bool


class SamplingParams:
    FIELDS: ClassVar[set[str]] = {
        "n",
        "max_tokens",
        "temperature",
        "top_p",
        "top_k",
        "repetition_penalty",
        "stop",
        "seed",
        "structured_outputs",
        "guided_decoding",
    }

    def __init__(self, **kwargs: Any) -> None:
        unknown = set(kwargs) - self.FIELDS
        if unknown:
            raise TypeError(f"unexpected keyword arguments {unknown}")
        self.kwargs = kwargs


def _pieces(params: SamplingParams) -> list[str]:
    """The cumulative texts of one request, honouring max_tokens and stop like vLLM."""
    texts, text = [], ""
    for piece in REPLY[: params.kwargs.get("max_tokens", len(REPLY))]:
        text += piece
        for stop in params.kwargs.get("stop", []):
            if stop in text:
                texts.append(text[: text.find(stop)])
                return texts
        texts.append(text)
    return texts


class LLMEngine:
    def __init__(self) -> None:
        self.requests: dict[str, Iterator[tuple[str, bool]]] = {}
        self.aborted: list[str] = []

    def add_request(self, request_id: str, prompt: str, params: SamplingParams) -> None:
        texts = _pieces(params)
        self.requests[request_id] = iter([(t, i == len(texts) - 1) for i, t in enumerate(texts)])
        self.prompt = prompt

    def has_unfinished_requests(self) -> bool:
        return bool(self.requests)

    def step(self) -> list[RequestOutput]:
        outs = []
        for rid, it in list(self.requests.items()):
            text, done = next(it)
            if done:
                del self.requests[rid]
            outs.append(RequestOutput(rid, self.prompt, [CompletionOutput(text)], done))
        return outs

    def abort_request(self, ids: list[str]) -> None:
        self.aborted.extend(ids)
        for rid in ids:
            self.requests.pop(rid, None)


class LLM:
    instances: ClassVar[list[LLM]] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.calls: list[tuple[list[str], SamplingParams, dict[str, Any]]] = []
        self.llm_engine = LLMEngine()
        LLM.instances.append(self)

    def generate(self, prompts: list[str], params: SamplingParams, **kwargs: Any) -> list[RequestOutput]:
        self.calls.append((prompts, params, kwargs))
        return [RequestOutput(str(i), p, [CompletionOutput(_pieces(params)[-1])], True) for i, p in enumerate(prompts)]


class AsyncEngineArgs:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


class AsyncLLMEngine:
    instances: ClassVar[list[AsyncLLMEngine]] = []

    def __init__(self, args: AsyncEngineArgs) -> None:
        self.args = args
        self.calls: list[tuple[str, SamplingParams, str]] = []
        self.aborted: list[str] = []
        AsyncLLMEngine.instances.append(self)

    @classmethod
    def from_engine_args(cls, args: AsyncEngineArgs) -> AsyncLLMEngine:
        return cls(args)

    async def generate(self, prompt: str, params: SamplingParams, request_id: str) -> AsyncIterator[RequestOutput]:
        self.calls.append((prompt, params, request_id))
        texts = _pieces(params)
        for i, text in enumerate(texts):
            await asyncio.sleep(0)
            yield RequestOutput(request_id, prompt, [CompletionOutput(text)], i == len(texts) - 1)

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)


@pytest.fixture(autouse=True)
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("vllm")
    for obj in (LLM, SamplingParams, AsyncEngineArgs, AsyncLLMEngine):
        setattr(module, obj.__name__, obj)
    monkeypatch.setitem(sys.modules, "vllm", module)
    LLM.instances.clear()
    AsyncLLMEngine.instances.clear()
    return module


def _make(mode: str, **kwargs: Any) -> VllmModel | AsyncVllmModel:
    kwargs.setdefault("meta_template", INTERNLM2_META)
    cls = AsyncVllmModel if mode == "async" else VllmModel
    return cls(path="Qwen/Qwen2-7B-Instruct", **kwargs)


def test_seed_constructor_and_engine_arguments(mode: str) -> None:
    llm = _make(mode, tp=2, top_k=1, temperature=1.0, stop_words=["<|im_end|>"], max_new_tokens=1024,
                vllm_cfg={"gpu_memory_utilization": 0.5})  # fmt: skip
    assert llm.gen_params["stop_words"] == ["<|im_end|>"]
    assert llm.gen_params["top_k"] == 1
    expected = {"model": "Qwen/Qwen2-7B-Instruct", "tensor_parallel_size": 2, "gpu_memory_utilization": 0.5}
    if mode == "async":
        assert AsyncLLMEngine.instances[0].args.kwargs == expected
    else:
        assert LLM.instances[0].kwargs == expected


def test_chat_renders_prompt_and_maps_params(mode: str) -> None:
    llm = _make(mode, top_k=1, temperature=1.0, stop_words=["<|im_end|>"], max_new_tokens=1024)
    assert resolve(llm.chat(HELLO)) == "Hello there."
    if mode == "async":
        prompt, params, _ = AsyncLLMEngine.instances[0].calls[-1]
    else:
        (prompts, params, kwargs), prompt = LLM.instances[0].calls[-1], None
        assert kwargs == {"use_tqdm": False}
        prompt = prompts[0]
    assert prompt == PROMPT
    assert params.kwargs == {
        "n": 1,
        "max_tokens": 1024,
        "top_p": 0.8,
        "top_k": 1,
        "temperature": 1.0,
        "repetition_penalty": 1.0,
        "stop": ["<|im_end|>"],
    }
    # per-call overrides, and appended stop words, reach the engine
    llm.gen_params["stop_words"].append(" there")
    assert resolve(llm.chat(HELLO, max_new_tokens=3, seed=7)) == "Hello"
    params = (AsyncLLMEngine.instances[0].calls if mode == "async" else LLM.instances[0].calls)[-1][1]
    assert params.kwargs["max_tokens"] == 3 and params.kwargs["seed"] == 7
    assert params.kwargs["stop"] == ["<|im_end|>", " there"]


def test_stream_is_cumulative_and_ends(mode: str) -> None:
    llm = _make(mode, stop_words=["<|im_end|>"])
    items = collect(llm.stream_chat(HELLO))
    assert [status for status, _, _ in items] == [ModelStatusCode.STREAM_ING] * 3 + [ModelStatusCode.END]
    assert [text for _, text, _ in items] == ["Hello", "Hello there", "Hello there.", "Hello there."]


def test_client_side_stop_words_apply_too(mode: str) -> None:
    llm = _make(mode)  # no stop words sent: the engine returns everything
    assert resolve(llm.chat(HELLO)) == "Hello there.<|im_end|> junk"
    assert resolve(llm.chat(HELLO, stop_words=["."])) == "Hello there"


def test_batch_chat(mode: str) -> None:
    llm = _make(mode, stop_words=["<|im_end|>"])
    other = [{"role": "user", "content": "bye"}]
    replies = resolve(llm.chat([HELLO, other], **({"session_ids": [3, 4]} if mode == "async" else {})))
    assert replies == ["Hello there.", "Hello there."]
    if mode == "async":
        calls = AsyncLLMEngine.instances[0].calls
        assert [c[0] for c in calls] == [PROMPT, PROMPT.replace("hi", "bye")]
        assert calls[0][2].startswith("session-3-") and calls[1][2].startswith("session-4-")
    else:
        assert len(LLM.instances[0].calls[-1][0]) == 2  # one batched engine call


def test_async_request_ids_are_unique_per_call() -> None:
    llm = _make("async", stop_words=["<|im_end|>"])

    async def main() -> None:
        await asyncio.gather(*(llm.chat(HELLO, session_ids=5) for _ in range(3)))

    asyncio.run(main())
    ids = [rid for _, _, rid in AsyncLLMEngine.instances[0].calls]
    assert len(set(ids)) == 3 and all(rid.startswith("session-5-") for rid in ids)


def test_abandoned_stream_aborts_request(mode: str) -> None:
    llm = _make(mode)
    stream = llm.stream_chat(HELLO)
    if mode == "async":

        async def first_then_close() -> None:
            agen: Any = stream
            await agen.__anext__()
            await agen.aclose()

        asyncio.run(first_then_close())
        engine: Any = AsyncLLMEngine.instances[0]
        assert engine.aborted == [engine.calls[0][2]]
    else:
        sync_stream: Any = stream
        next(sync_stream)
        sync_stream.close()
        assert len(LLM.instances[0].llm_engine.aborted) == 1
        assert not LLM.instances[0].llm_engine.requests
        assert resolve(llm.chat(HELLO)) == "Hello there.<|im_end|> junk"  # the lock was released


def test_sampling_kwargs_and_request_id() -> None:
    kwargs = sampling_kwargs({"max_new_tokens": 5, "stop_words": ("a",), "seed": None, "session_ids": 1, "min_p": 0.1})
    assert kwargs == {"n": 1, "max_tokens": 5, "stop": ["a"], "min_p": 0.1}
    ids = {request_id(None) for _ in range(100)}
    assert len(ids) == 100 and all(i.startswith("plait-") for i in ids)


def test_unknown_sampling_field_raises(mode: str) -> None:
    llm = _make(mode)
    with pytest.raises(TypeError, match="bogus"):
        resolve(llm.chat(HELLO, bogus=1))


def test_missing_vllm(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(MissingDependencyError, match=r"plait\[vllm\]"):
        _make(mode)


def test_generate_takes_raw_prompts(mode: str) -> None:
    llm = _make(mode, stop_words=["<|im_end|>"])
    assert resolve(llm.generate("raw prompt")) == "Hello there."
    assert resolve(llm.generate(["a", "b"])) == ["Hello there."] * 2


# -- structured outputs (issue 19) ------------------------------------------------------------


@dataclass
class StructuredOutputsParams:
    json: dict[str, Any] | None = None


@dataclass
class GuidedDecodingParams:
    json: dict[str, Any] | None = None


def _last_params(mode: str) -> SamplingParams:
    calls = AsyncLLMEngine.instances[0].calls if mode == "async" else LLM.instances[0].calls
    params: SamplingParams = calls[-1][1]
    return params


@pytest.mark.parametrize("spelling", ["structured_outputs", "guided_decoding"])
def test_a_response_format_constrains_decoding_in_this_vllms_spelling(
    mode: str, fake_vllm: types.ModuleType, spelling: str
) -> None:
    holder = types.ModuleType("vllm.sampling_params")
    cls = StructuredOutputsParams if spelling == "structured_outputs" else GuidedDecodingParams
    setattr(holder, cls.__name__, cls)
    fake_vllm.sampling_params = holder  # type: ignore[attr-defined]
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "X", "schema": schema, "strict": True}}
    resolve(_make(mode).chat(HELLO, response_format=fmt))
    params = _last_params(mode)
    assert params.kwargs[spelling] == cls(json=schema)
    assert "response_format" not in params.kwargs


def test_a_vllm_without_structured_outputs_says_so(mode: str, fake_vllm: types.ModuleType) -> None:
    fmt = {"type": "json_object"}
    with pytest.raises(LLMError, match="no structured outputs"):
        resolve(_make(mode).chat(HELLO, response_format=fmt))


# -- a thinking model (issue 37) ----------------------------------------------------------------

THINKING = ["<think>", "\nThe user", " greets me.", "\n</th", "ink>\n\n", "Hello", " there.", "<|im_end|>"]
"""A Qwen3 reply in thinking mode, token by token: vLLM's engines run no reasoning parser (that is its
OpenAI server's ``--reasoning-parser``), so the think block arrives in ``CompletionOutput.text``."""
THOUGHT = "The user greets me."


def _thinking(mode: str) -> VllmModel | AsyncVllmModel:
    cls = AsyncVllmModel if mode == "async" else VllmModel
    return cls(path="Qwen/Qwen3-8B", meta_template=INTERNLM2_META, stop_words=["<|im_end|>"])


def test_a_thinking_models_think_block_is_split_off_as_reasoning(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the engine seam: the fake engines return vLLM's documented ``RequestOutput`` shape
    (``outputs[0].text`` cumulative while streaming); vLLM itself needs a GPU. The reply is split as
    `GPTAPI` splits a server's (one splitter): `chat` is the answer alone, each stream item's extra is
    the reasoning so far, streamed before the answer, and the END item carries the whole reasoning."""
    monkeypatch.setitem(globals(), "REPLY", THINKING)
    llm = _thinking(mode)
    assert llm.think_tags == "closed"
    assert resolve(llm.chat(HELLO)) == "Hello there."
    assert resolve(llm.chat([HELLO, HELLO])) == ["Hello there.", "Hello there."]
    items = collect(llm.stream_chat(HELLO))
    assert all("think>" not in text and "greets" not in text and "<" not in text for _, text, _ in items)
    assert items[-1] == (ModelStatusCode.END, "Hello there.", Reasoning(THOUGHT))
    first_text = next(index for index, (_, text, _) in enumerate(items) if text)
    assert [extra for _, _, extra in items[:first_text]] == [Reasoning("The user"), Reasoning(THOUGHT)]
    llm.think_tags = "off"  # assignable: the text is kept as the engine made it
    assert resolve(llm.chat(HELLO)) == "".join(THINKING[:-1])


def test_a_streaming_agent_keeps_the_engines_reasoning_apart(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reasoning deltas come before the answer's; the agent's message and memory keep it beside the answer."""
    monkeypatch.setitem(globals(), "REPLY", THINKING)
    llm = _thinking(mode)
    agent: Any = (AsyncStreamingAgent if mode == "async" else StreamingAgent)(llm)

    async def events_async() -> list[Any]:
        return [event async for event in agent.stream_events("hi")]

    events = asyncio.run(events_async()) if mode == "async" else list(agent.stream_events("hi"))
    kinds = [type(event) for event in events]
    first_text = kinds.index(TextDelta)
    assert ReasoningDelta in kinds[:first_text] and ReasoningDelta not in kinds[first_text:]
    assert "".join(e.delta for e in events if isinstance(e, ReasoningDelta)) == THOUGHT
    assert "".join(e.delta for e in events if isinstance(e, TextDelta)) == "Hello there."
    reply = agent.memory.get_memory()[-1]
    assert (reply.content, reply.reasoning) == ("Hello there.", Reasoning(THOUGHT))
