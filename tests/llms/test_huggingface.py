"""HFTransformer family on a tiny randomly initialised Llama built inside the test (no hub).

The model's replies are random words: the tests assert structure (types, streaming,
stop words, parameters reaching ``generate``), never content.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from _support import collect, resolve  # noqa: E402
from plait.exceptions import MissingDependencyError, UserError  # noqa: E402
from plait.llms import huggingface as hf  # noqa: E402
from plait.llms.huggingface import (  # noqa: E402
    AsyncHFTransformer,
    AsyncHFTransformerChat,
    HFTransformer,
    HFTransformerCasualLM,
    HFTransformerCausalLM,
    HFTransformerChat,
    generation_kwargs,
)
from plait.llms.meta_template import INTERNLM2_META  # noqa: E402
from plait.schema import ModelStatusCode  # noqa: E402

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
WORDS += ["india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"]
SPECIAL = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }} {{ m['content'] }}<|im_end|>{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant {% endif %}"
)
HELLO = [{"role": "user", "content": "alpha bravo"}]


def _build(path: Path, chat_template: bool) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    # "abcdef" is the probe transformers' stop-string matcher tokenizes to read the vocabulary
    vocab = {tok: i for i, tok in enumerate([*SPECIAL, *WORDS, "user", "assistant", "system", "abcdef"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
    )
    if chat_template:
        fast.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=1,
        eos_token_id=2,
    )
    model = transformers.LlamaForCausalLM(config)
    model.generation_config.suppress_tokens = list(range(len(SPECIAL)))  # replies run to max_new_tokens
    model.save_pretrained(path)
    fast.save_pretrained(path)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny-llama")
    _build(path, chat_template=True)
    return path


@pytest.fixture(scope="module")
def plain_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny-llama-plain")
    _build(path, chat_template=False)
    return path


def _make(mode: str, path: Path, chat: bool = False, **kwargs: Any) -> Any:
    kwargs.setdefault("max_new_tokens", 12)
    kwargs.setdefault("temperature", 0)
    if chat:
        return (AsyncHFTransformerChat if mode == "async" else HFTransformerChat)(str(path), **kwargs)
    return (AsyncHFTransformer if mode == "async" else HFTransformerCasualLM)(str(path), **kwargs)


def test_names_and_device(model_dir: Path) -> None:
    assert HFTransformerCausalLM is HFTransformerCasualLM
    assert issubclass(HFTransformerCasualLM, HFTransformer)
    llm = HFTransformerCasualLM(str(model_dir), meta_template=INTERNLM2_META)
    # `device` is where the weights are, as torch names it ('cuda:0' on a GPU); pick_device names the type
    assert llm.device == str(next(llm.model.parameters()).device)
    assert torch.device(llm.device).type == hf.pick_device(torch)
    assert llm.gen_params["stop_words"] == []
    assert "HFTransformerCasualLM" in repr(llm)


def test_chat_returns_text(mode: str, model_dir: Path) -> None:
    llm = _make(mode, model_dir, meta_template=INTERNLM2_META)
    reply = resolve(llm.chat(HELLO))
    assert isinstance(reply, str)
    words = reply.split()
    assert 1 <= len(words) <= 12
    assert set(words) <= set(WORDS) | {"user", "assistant", "system", "abcdef"}
    # greedy decoding is deterministic
    assert resolve(llm.chat(HELLO)) == reply


def test_stream_is_cumulative_and_ends(mode: str, model_dir: Path) -> None:
    llm = _make(mode, model_dir, meta_template=INTERNLM2_META)
    items = collect(llm.stream_chat(HELLO))
    assert len(items) >= 3
    assert items[-1][0] == ModelStatusCode.END
    assert all(status == ModelStatusCode.STREAM_ING for status, _, _ in items[:-1])
    texts = [text for _, text, _ in items]
    for earlier, later in itertools.pairwise(texts):
        assert later.startswith(earlier)
    assert texts[-1] == resolve(llm.chat(HELLO))


def test_stop_words_truncate(mode: str, model_dir: Path) -> None:
    llm = _make(mode, model_dir, meta_template=INTERNLM2_META)
    full = resolve(llm.chat(HELLO))
    words = full.split()
    stop = f"{words[1]} {words[2]}"  # two tokens: goes through transformers' stop_strings
    expected = full[: full.find(stop)]
    assert resolve(llm.chat(HELLO, stop_words=[stop])) == expected
    llm.gen_params["stop_words"].append(words[1])  # one token: becomes an eos id
    assert resolve(llm.chat(HELLO)) == full[: full.find(words[1])]
    streamed = collect(llm.stream_chat(HELLO))
    assert streamed[-1][1] == full[: full.find(words[1])]


def test_gen_params_reach_generate(mode: str, model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    llm = _make(mode, model_dir, meta_template=INTERNLM2_META, top_k=7, top_p=0.5, repetition_penalty=1.3)
    seen: list[dict[str, Any]] = []
    original = llm.model.generate

    def spy(**kwargs: Any) -> Any:
        seen.append(kwargs)
        return original(**kwargs)

    monkeypatch.setattr(llm.model, "generate", spy)
    resolve(llm.chat(HELLO, temperature=0.7, max_new_tokens=5, stop_words=["golf hotel"]))
    config = seen[-1]["generation_config"]
    assert (config.do_sample, config.temperature, config.top_k, config.top_p) == (True, 0.7, 7, 0.5)
    assert (config.max_new_tokens, config.repetition_penalty) == (5, 1.3)
    assert config.stop_strings == ["golf hotel"]
    assert seen[-1]["tokenizer"] is llm.tokenizer
    resolve(llm.chat(HELLO))  # per-call overrides did not stick
    config = seen[-1]["generation_config"]
    assert (config.do_sample, config.max_new_tokens, config.temperature) == (False, 12, 1.0)


def test_unknown_generate_argument_raises(mode: str, model_dir: Path) -> None:
    llm = _make(mode, model_dir)
    with pytest.raises(ValueError, match="no_such_option"):
        resolve(llm.chat(HELLO, no_such_option=3))


def test_batch_chat(mode: str, model_dir: Path) -> None:
    llm = _make(mode, model_dir, meta_template=INTERNLM2_META)
    single = resolve(llm.chat(HELLO))
    other = [{"role": "user", "content": "kilo lima mike november"}]
    replies = resolve(llm.chat([HELLO, other]))
    assert isinstance(replies, list) and len(replies) == 2
    assert replies[0] == single  # left padding leaves the shorter prompt's reply unchanged


def test_chat_template_class(mode: str, model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    llm = _make(mode, model_dir, chat=True)
    prompts: list[str] = []
    original = llm._generate_texts
    monkeypatch.setattr(llm, "_generate_texts", lambda p, *a: prompts.extend(p) or original(p, *a))
    assert isinstance(resolve(llm.chat(HELLO)), str)
    assert prompts == ["<|im_start|>user alpha bravo<|im_end|><|im_start|>assistant "]


def test_chat_class_needs_a_chat_template(plain_dir: Path) -> None:
    with pytest.raises(UserError, match="no chat template"):
        HFTransformerChat(str(plain_dir))


def test_tokenizer_only_cannot_generate(mode: str, model_dir: Path) -> None:
    llm = _make(mode, model_dir, tokenizer_only=True)
    assert llm.model is None and llm.tokenizer is not None
    with pytest.raises(UserError, match="tokenizer_only"):
        resolve(llm.chat(HELLO))


CONVERSATIONS = [
    HELLO,
    [{"role": "system", "content": "kilo lima"}, *HELLO],
    [*HELLO, {"role": "assistant", "content": "charlie delta echo"}, {"role": "user", "content": "foxtrot"}],
    [{"role": "user", "content": "words the vocabulary lacks become <unk>"}],
]


@pytest.mark.parametrize("chat", [True, False], ids=["chat-template", "meta-template"])
def test_count_tokens_is_what_reaches_generate(
    mode: str, model_dir: Path, chat: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = _make(mode, model_dir, chat=chat, meta_template=None if chat else INTERNLM2_META, max_new_tokens=1)
    fed: list[int] = []
    original = llm.model.generate

    def spy(**kwargs: Any) -> Any:
        fed.append(kwargs["input_ids"].shape[1])
        return original(**kwargs)

    monkeypatch.setattr(llm.model, "generate", spy)
    counts = [llm.count_tokens(messages) for messages in CONVERSATIONS]  # synchronous on the async class too
    for messages in CONVERSATIONS:
        resolve(llm.chat(messages))
    assert counts == fed
    assert len(set(counts)) == len(counts)  # the conversations differ in length: the counts are not a constant
    tokenizer_only = _make(mode, model_dir, chat=chat, meta_template=llm.meta_template, tokenizer_only=True)
    assert [tokenizer_only.count_tokens(messages) for messages in CONVERSATIONS] == counts


def test_context_window(mode: str, model_dir: Path, tmp_path: Path) -> None:
    assert _make(mode, model_dir).context_window == 128  # the config's max_position_embeddings
    assert _make(mode, model_dir, tokenizer_only=True).context_window == 128  # read with AutoConfig
    assert _make(mode, model_dir, chat=True, context_window=64).context_window == 64
    # no model config: the tokenizer's model_max_length when it is a real limit, else 4096
    transformers.AutoTokenizer.from_pretrained(str(model_dir)).save_pretrained(tmp_path)
    assert _make(mode, tmp_path, tokenizer_only=True).context_window == 4096
    sized = _make(mode, tmp_path, tokenizer_only=True, tokenizer_kwargs={"model_max_length": 256})
    assert sized.context_window == 256
    with pytest.raises(UserError, match="context_window"):
        _make(mode, model_dir, tokenizer_only=True, context_window=0)


def test_context_window_fields() -> None:
    gpt2 = transformers.GPT2Config(n_positions=512)
    assert hf._config_context_window(gpt2) == 512
    qwen_like = transformers.PretrainedConfig(max_position_embeddings=32768, seq_length=8192)
    assert hf._config_context_window(qwen_like) == 8192  # the smaller of the stated sizes
    multimodal = transformers.LlavaConfig(text_config={"model_type": "llama", "max_position_embeddings": 1000})
    assert hf._config_context_window(multimodal) == 1000  # its text part's
    assert hf._config_context_window(transformers.PretrainedConfig()) is None
    assert hf._config_context_window(None) is None


def test_errors_in_streaming_thread_are_raised(mode: str, model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    llm = _make(mode, model_dir)

    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(llm.model, "generate", broken)
    with pytest.raises(RuntimeError, match="out of memory"):
        collect(llm.stream_chat(HELLO))


def test_abandoned_stream_stops_generation(model_dir: Path) -> None:
    llm = _make("sync", model_dir, max_new_tokens=100)
    finished = threading.Event()
    original = llm.model.generate

    def watched(**kwargs: Any) -> Any:
        out = original(**kwargs)
        finished.set()
        return out

    llm.model.generate = watched
    stream = llm.stream_chat(HELLO)
    next(stream)
    stream.close()  # the consumer leaves: the cancel criterion stops generation
    assert finished.wait(10)


def test_async_generate_does_not_block_loop(model_dir: Path) -> None:
    llm = _make("async", model_dir, max_new_tokens=40)

    async def main() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await llm.chat(HELLO)
        task.cancel()
        return ticks

    assert asyncio.run(main()) > 1


def test_generation_kwargs() -> None:
    assert generation_kwargs({"temperature": 0, "top_p": 0.8, "top_k": 40, "repetition_penalty": 1.0}) == {
        "do_sample": False,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 50,
    }
    sampled = generation_kwargs({"temperature": 1.0, "top_k": 1, "num_beams": 2, "stop_words": ["x"]})
    assert sampled == {"do_sample": True, "temperature": 1.0, "top_p": None, "top_k": 1, "num_beams": 2}
    assert generation_kwargs({"temperature": 0.5, "do_sample": False})["do_sample"] is False


def test_deltas_hold_back_incomplete_characters() -> None:
    pieces = {1: b"\xe4", 2: b"\xbd", 3: b"\xa0", 4: b"ok"}  # "你" split over three byte tokens

    def decode(ids: list[int]) -> str:
        return b"".join(pieces[i] for i in ids).decode("utf-8", errors="replace")

    deltas = hf._Deltas(decode)
    assert [deltas.feed([1]), deltas.feed([2]), deltas.feed([3]), deltas.feed([4])] == ["", "", "你", "ok"]
    assert deltas.flush() == ""


def test_missing_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "transformers":
            raise ImportError("No module named 'transformers'", name="transformers")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(MissingDependencyError, match=r"plait\[hf\]"):
        HFTransformer("anything")
