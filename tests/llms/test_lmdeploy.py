"""LMDeploy backends.

* The pipelines run against a fake ``lmdeploy`` module (the real one needs a GPU) that
  mirrors its public surface: ``pipeline(path, backend_config=..., chat_template_config=...)``,
  ``pipe(prompts, gen_config=..., do_preprocess=...)`` -> ``Response`` list, and
  ``pipe.stream_infer(...)`` yielding ``Response`` text deltas.
* The clients talk to `FakeOpenAIServer` over HTTP; the servers launch a fake
  ``lmdeploy serve api_server`` subprocess that serves the same OpenAI-compatible API.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import textwrap
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import pytest

from _support import collect, resolve
from plait.exceptions import LLMConnectionError, LLMTimeoutError, MissingDependencyError, UserError
from plait.llms import INTERNLM2_META
from plait.llms._lmdeploy_server import ServerProcess
from plait.llms.lmdeploy_wrapper import (
    AsyncLMDeployClient,
    AsyncLMDeployPipeline,
    AsyncLMDeployServer,
    LMDeployClient,
    LMDeployPipeline,
    LMDeployServer,
    gen_config_kwargs,
    serve_command,
)
from plait.schema import ModelStatusCode, Reasoning
from plait.testing.fake_openai import FakeOpenAIServer, Reply

HELLO = [{"role": "user", "content": "hi"}]
PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
PIECES = ["Hel", "lo", " there", ".", "<|im_end|>"]

# -- the fake lmdeploy module ---------------------------------------------------------------


@dataclass
class GenerationConfig:  # strict, like LMDeploy's dataclass: unknown fields raise TypeError
    n: int = 1
    max_new_tokens: int = 512
    do_sample: bool = False
    top_p: float = 1.0
    top_k: int = 50
    temperature: float = 0.8
    repetition_penalty: float = 1.0
    random_seed: int | None = None
    stop_words: list[str] | None = None
    skip_special_tokens: bool = True
    response_format: dict[str, Any] | None = None


@dataclass
class Response:
    text: str
    generate_token_len: int = 0
    input_token_len: int = 0
    finish_reason: str | None = None
    index: int = 0


class TurbomindEngineConfig:
    def __init__(self, tp: int = 1) -> None:
        self.tp = tp


class ChatTemplateConfig:
    def __init__(self, model_name: str) -> None:
        self.model_name = model_name


def _pieces(gen_config: GenerationConfig) -> list[str]:
    out: list[str] = []
    for piece in PIECES[: gen_config.max_new_tokens]:
        if piece in (gen_config.stop_words or []):
            break
        out.append(piece)
    return out


class Pipeline:
    instances: ClassVar[list[Pipeline]] = []

    def __init__(self, path: str, **kwargs: Any) -> None:
        self.path, self.kwargs = path, kwargs
        self.calls: list[tuple[str, list[Any], GenerationConfig, bool]] = []
        self.closed_streams = 0
        self.pieces_sent = 0
        self.delay = 0.0
        Pipeline.instances.append(self)

    def __call__(self, prompts: list[Any], gen_config: GenerationConfig, do_preprocess: bool = True) -> list[Response]:
        self.calls.append(("infer", prompts, gen_config, do_preprocess))
        return [Response("".join(_pieces(gen_config)), index=i) for i, _ in enumerate(prompts)]

    def stream_infer(
        self, prompts: list[Any], gen_config: GenerationConfig, do_preprocess: bool = True
    ) -> Iterator[Response]:
        self.calls.append(("stream", prompts, gen_config, do_preprocess))
        try:
            for piece in _pieces(gen_config):
                time.sleep(self.delay)
                self.pieces_sent += 1
                yield Response(piece)
            yield Response("", finish_reason="stop")
        finally:
            self.closed_streams += 1


@pytest.fixture(autouse=True)
def fake_lmdeploy(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("lmdeploy")
    module.pipeline = Pipeline  # type: ignore[attr-defined]
    for obj in (GenerationConfig, TurbomindEngineConfig, ChatTemplateConfig):
        setattr(module, obj.__name__, obj)
    monkeypatch.setitem(sys.modules, "lmdeploy", module)
    Pipeline.instances.clear()
    return module


def _pipe(mode: str, **kwargs: Any) -> LMDeployPipeline | AsyncLMDeployPipeline:
    cls = AsyncLMDeployPipeline if mode == "async" else LMDeployPipeline
    return cls("internlm/internlm2_5-7b-chat", **kwargs)


# -- pipelines --------------------------------------------------------------------------------


def test_pipeline_construction(mode: str) -> None:
    _pipe(mode, model_name="internlm2", tp=2, pipeline_cfg={"log_level": "ERROR"})
    pipe = Pipeline.instances[0]
    assert pipe.path == "internlm/internlm2_5-7b-chat"
    assert pipe.kwargs["backend_config"].tp == 2
    assert pipe.kwargs["chat_template_config"].model_name == "internlm2"
    assert pipe.kwargs["log_level"] == "ERROR"


def test_pipeline_chat_with_meta_template(mode: str) -> None:
    llm = _pipe(mode, meta_template=INTERNLM2_META, top_k=1, temperature=1.0, stop_words=["<|im_end|>"])
    assert resolve(llm.chat(HELLO)) == "Hello there."
    _, prompts, config, preprocess = Pipeline.instances[0].calls[-1]
    assert prompts == [PROMPT] and preprocess is False  # rendered here: LMDeploy's template is skipped
    assert (config.do_sample, config.top_k, config.temperature, config.stop_words) == (True, 1, 1.0, ["<|im_end|>"])
    assert resolve(llm.chat(HELLO, temperature=0, max_new_tokens=2)) == "Hello"
    config = Pipeline.instances[0].calls[-1][2]
    assert (config.do_sample, config.max_new_tokens) == (False, 2)


def test_pipeline_without_meta_template_sends_messages(mode: str) -> None:
    llm = _pipe(mode, stop_words=["."])
    assert resolve(llm.chat(HELLO)) == "Hello there"  # client-side stop words apply as well
    _, prompts, _, preprocess = Pipeline.instances[0].calls[-1]
    assert prompts == [HELLO] and preprocess is True


def test_pipeline_stream(mode: str) -> None:
    llm = _pipe(mode, meta_template=INTERNLM2_META, stop_words=["<|im_end|>"])
    items = collect(llm.stream_chat(HELLO))
    assert [s for s, _, _ in items] == [ModelStatusCode.STREAM_ING] * 4 + [ModelStatusCode.END]
    assert [t for _, t, _ in items] == ["Hel", "Hello", "Hello there", "Hello there.", "Hello there."]
    assert Pipeline.instances[0].calls[-1][0] == "stream"
    assert Pipeline.instances[0].closed_streams == 1


def test_pipeline_batch(mode: str) -> None:
    llm = _pipe(mode, meta_template=INTERNLM2_META, stop_words=["<|im_end|>"])
    assert resolve(llm.chat([HELLO, HELLO])) == ["Hello there.", "Hello there."]


def test_pipeline_seed_and_unknown_fields(mode: str) -> None:
    llm = _pipe(mode, seed=3)
    resolve(llm.chat(HELLO))
    assert Pipeline.instances[0].calls[-1][2].random_seed == 3
    with pytest.raises(TypeError, match="bogus"):
        resolve(llm.chat(HELLO, bogus=1))


def test_async_pipeline_cancel_stops_stream() -> None:
    llm = _pipe("async")
    pipeline = Pipeline.instances[0]
    pipeline.delay = 0.5  # the stream takes seconds: the cancel comes while it runs

    async def main() -> None:
        task = asyncio.create_task(llm.chat(HELLO))
        for _ in range(6000):  # until the stream runs (at most 60 s on a crowded machine)
            if pipeline.calls:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    deadline = time.monotonic() + 60  # a wait, not a bound: it ends as soon as the stream is closed
    while pipeline.closed_streams == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pipeline.closed_streams == 1
    assert pipeline.pieces_sent < len(_pieces(pipeline.calls[0][2]))  # closed by the cancel, not finished


def test_gen_config_kwargs() -> None:
    assert gen_config_kwargs({"temperature": 0, "stop_words": ("x",), "session_ids": 1}) == {
        "n": 1,
        "temperature": 0,
        "stop_words": ["x"],
        "do_sample": False,
    }
    assert gen_config_kwargs({"temperature": 0.7, "do_sample": False})["do_sample"] is False
    names = {f.name for f in fields(GenerationConfig)}
    assert set(gen_config_kwargs({"max_new_tokens": 1, "top_p": 0.5, "top_k": 2, "seed": 1})) <= names


def test_missing_lmdeploy(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "lmdeploy", None)
    with pytest.raises(MissingDependencyError, match=r"plait\[lmdeploy\]"):
        _pipe(mode)


# -- clients ----------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer(model="internlm2_5-7b-chat").start()
    yield srv
    srv.stop()


def _client(mode: str, url: str, **kwargs: Any) -> Any:
    kwargs.setdefault("retry", 1)
    return (AsyncLMDeployClient if mode == "async" else LMDeployClient)(url, **kwargs)


def test_client_discovers_model_and_sends_lmdeploy_fields(mode: str, server: FakeOpenAIServer) -> None:
    bare = f"http://127.0.0.1:{server.port}"  # LMDeploy's usual address: /v1 is added
    llm = _client(mode, bare, top_k=1, repetition_penalty=1.05, stop_words=["<|im_end|>"], max_new_tokens=64)
    assert llm.model_name == "internlm2_5-7b-chat"
    server.push(Reply("Hello there."))
    assert resolve(llm.chat(HELLO)) == "Hello there."
    body = server.requests[-1]
    assert body["model"] == "internlm2_5-7b-chat"
    assert (body["top_k"], body["repetition_penalty"]) == (1, 1.05)
    assert (body["stop"], body["max_tokens"]) == (["<|im_end|>"], 64)
    if isinstance(llm, LMDeployClient):
        llm.close()


def test_client_streams(mode: str, server: FakeOpenAIServer) -> None:
    llm = _client(mode, server.base_url, model_name="named")
    server.push(Reply("one two three"))
    items = collect(llm.stream_chat(HELLO))
    assert items[-1][0] == ModelStatusCode.END and items[-1][1] == "one two three"
    assert len(items) >= 3 and server.requests[-1]["model"] == "named"
    if isinstance(llm, LMDeployClient):
        llm.close()


def test_client_unreachable_server_is_a_clear_error(mode: str) -> None:
    with pytest.raises(LLMConnectionError, match="could not list the models"):
        _client(mode, f"http://127.0.0.1:{_free_port()}")


# -- servers (a fake `lmdeploy serve api_server` subprocess) -----------------------------------

FAKE_API_SERVER = textwrap.dedent(
    """
    import json, sys
    from aiohttp import web

    args = sys.argv[1:]
    assert args[:2] == ["serve", "api_server"], args
    port = int(args[args.index("--server-port") + 1])
    name = args[args.index("--model-name") + 1] if "--model-name" in args else args[2]
    print("fake api_server starting", args, flush=True)

    async def models(request):
        return web.json_response({"object": "list", "data": [{"id": name, "object": "model"}]})

    async def chat(request):
        body = await request.json()
        text = "served " + body["messages"][-1]["content"]
        if body.get("stream"):
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for piece in (text[:6], text[6:]):
                chunk = {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                await resp.write(f"data: {json.dumps(chunk)}\\n\\n".encode())
            done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            await resp.write(f"data: {json.dumps(done)}\\n\\ndata: [DONE]\\n\\n".encode())
            return resp
        message = {"role": "assistant", "content": text}
        return web.json_response({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=port, print=None)
    """
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def fake_cli(tmp_path: Path) -> list[str]:
    script = tmp_path / "fake_lmdeploy.py"
    script.write_text(FAKE_API_SERVER)
    return [sys.executable, str(script)]


def _server(mode: str, executable: list[str], **kwargs: Any) -> Any:
    cls = AsyncLMDeployServer if mode == "async" else LMDeployServer
    return cls("/models/internlm2_5-7b-chat", server_port=_free_port(), executable=executable, retry=1, **kwargs)


def _stop(llm: Any) -> None:
    if isinstance(llm, LMDeployServer):
        llm.close()
    else:
        asyncio.run(llm.aclose())


def test_server_launches_chats_streams_and_stops(mode: str, fake_cli: list[str]) -> None:
    llm = _server(mode, fake_cli, startup_timeout=30, serve_cfg={"cache_max_entry_count": 0.2})
    try:
        assert llm.model_name == "internlm2_5-7b-chat"
        assert "--cache-max-entry-count" in llm.server.command
        assert resolve(llm.chat(HELLO)) == "served hi"
        items = collect(llm.stream_chat(HELLO))
        assert [t for _, t, _ in items] == ["served", "served hi", "served hi"]
    finally:
        _stop(llm)
    assert llm.server.process.wait(10) is not None


def test_server_that_exits_reports_its_output(mode: str, tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text("import sys\nprint('CUDA error: no kernel image', flush=True)\nsys.exit(3)\n")
    with pytest.raises(LLMConnectionError, match=r"(?s)code 3.*no kernel image"):
        llm = _server(mode, [sys.executable, str(script)], startup_timeout=30)  # sync: waits here
        resolve(llm.wait_ready())  # async: waits on first use


def test_server_startup_times_out(mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "silent.py"
    script.write_text("import time\nprint('loading weights', flush=True)\ntime.sleep(60)\n")
    launched: list[Any] = []
    real_init = ServerProcess.__init__

    def recording_init(self: ServerProcess, *args: Any) -> None:
        real_init(self, *args)
        launched.append(self)

    monkeypatch.setattr(ServerProcess, "__init__", recording_init)
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError, match=r"(?s)within 1.0 s.*loading weights"):
        llm = _server(mode, [sys.executable, str(script)], startup_timeout=1.0)
        resolve(llm.wait_ready())
    assert time.monotonic() - started < 50  # the 1.0 s limit ended it, not the 60 s the script sleeps
    assert launched[0].process.poll() is not None  # the silent server was stopped


def test_serve_command() -> None:
    command = serve_command(
        "/m",
        "name",
        server_port=1,
        serve_cfg={"cache_max_entry_count": 0.5, "enable_prefix_caching": True, "quiet": False, "adapters": ["a", "b"]},
        executable="lmdeploy",
    )
    assert command == [
        "lmdeploy", "serve", "api_server", "/m", "--server-name", "127.0.0.1", "--server-port", "1",
        "--tp", "1", "--log-level", "WARNING", "--model-name", "name",
        "--cache-max-entry-count", "0.5", "--enable-prefix-caching", "--adapters", "a", "b",
    ]  # fmt: skip


def test_server_rejects_url(fake_cli: list[str]) -> None:
    with pytest.raises(UserError, match="LMDeployClient"):
        LMDeployServer("/m", executable=fake_cli, url="http://127.0.0.1:1")


def test_a_response_format_reaches_the_generation_config_as_guided_decoding(mode: str) -> None:
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "X", "schema": schema, "strict": True}}
    resolve(_pipe(mode, meta_template=INTERNLM2_META).chat(HELLO, response_format=fmt))
    _, prompts, config, _ = Pipeline.instances[0].calls[-1]
    assert config.response_format == {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
    assert "JSON Schema" not in str(prompts)  # constrained, not told in words


# -- a thinking model (issue 37) ----------------------------------------------------------------

THINKING = ["<think>", "\nThe user", " greets me.", "\n</th", "ink>\n\n", "Hello", " there.", "<|im_end|>"]
"""A Qwen3 reply in thinking mode, as ``stream_infer``'s ``Response.text`` deltas: LMDeploy's pipeline runs
no reasoning parser (that is its api_server's ``--reasoning-parser``), so the think block is in the text."""
THOUGHT = "The user greets me."


def test_a_thinking_models_think_block_is_split_off_as_reasoning(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the pipeline seam: the fake pipeline returns LMDeploy's documented ``Response`` shape (``text``,
    ``generate_token_len``, ``input_token_len``, ``finish_reason``, ``index``); LMDeploy itself needs a GPU.
    The reply is split as `GPTAPI` splits a server's (one splitter): `chat` is the answer alone, each
    stream item's extra is the reasoning so far, before the answer, and the END item carries all of it."""
    monkeypatch.setitem(globals(), "PIECES", THINKING)
    cls = AsyncLMDeployPipeline if mode == "async" else LMDeployPipeline
    llm = cls("Qwen/Qwen3-8B", meta_template=INTERNLM2_META, stop_words=["<|im_end|>"])
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
