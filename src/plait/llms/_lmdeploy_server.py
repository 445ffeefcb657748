"""LMDeploy's ``api_server`` as a model: clients over its OpenAI-compatible API, and a launcher.

`LMDeployClient` / `AsyncLMDeployClient` are `GPTAPI` / `AsyncGPTAPI` pointed at an
api_server (one IO path: pooled connections, retries, streaming, native tools), plus the
sampling fields LMDeploy accepts beyond OpenAI's (``top_k``, ``repetition_penalty``).
`LMDeployServer` / `AsyncLMDeployServer` first launch ``lmdeploy serve api_server`` as a
subprocess and wait, up to ``startup_timeout`` seconds, for it to answer.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Mapping, Sequence
from typing import IO, Any

from ..exceptions import LLMConnectionError, LLMError, LLMTimeoutError, MissingDependencyError, UserError
from ._openai_protocol import chat_completions_url
from .openai import GPTAPI, AsyncGPTAPI, _GPTAPICore
from .templates import MetaTemplate

__all__ = [
    "AsyncLMDeployClient",
    "AsyncLMDeployServer",
    "LMDeployClient",
    "LMDeployServer",
    "serve_command",
    "served_model",
]


def _models_url(url: str) -> str:
    return chat_completions_url(url).rsplit("/chat/completions", 1)[0] + "/models"


def served_model(url: str, key: str | None = None, timeout: float = 10.0) -> str:
    """The name of the first model an OpenAI-compatible server lists at ``/v1/models``."""
    request = urllib.request.Request(_models_url(url))
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            data = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise LLMConnectionError(f"could not list the models of {url!r}: {exc}") from exc
    models = data.get("data") if isinstance(data, Mapping) else None
    if not models:
        raise LLMError(f"the server at {url!r} lists no models")
    return str(models[0]["id"])


def serve_command(
    path: str,
    model_name: str | None = None,
    server_name: str = "127.0.0.1",
    server_port: int = 23333,
    tp: int = 1,
    log_level: str = "WARNING",
    serve_cfg: Mapping[str, object] | None = None,
    executable: str | Sequence[str] | None = None,
) -> list[str]:
    """The ``lmdeploy serve api_server`` command line.

    ``serve_cfg`` keys become flags (``cache_max_entry_count=0.5`` ->
    ``--cache-max-entry-count 0.5``; True -> a bare flag; False/None -> left out; a list ->
    several values). The executable is `executable`, else ``lmdeploy`` on the PATH, else
    LMDeploy's CLI run by this Python.
    """
    if executable is None:
        found = shutil.which("lmdeploy")
        if found is None and importlib.util.find_spec("lmdeploy") is None:
            raise MissingDependencyError("lmdeploy", extra="lmdeploy", feature="LMDeployServer")
        exe = [found] if found else [sys.executable, "-c", "from lmdeploy.cli import run; run()"]
    else:
        exe = [executable] if isinstance(executable, str) else list(executable)
    command = [*exe, "serve", "api_server", path, "--server-name", server_name, "--server-port", str(server_port)]
    command += ["--tp", str(tp), "--log-level", log_level]
    if model_name:
        command += ["--model-name", model_name]
    for key, value in (serve_cfg or {}).items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            command.append(flag)
        elif value is None or value is False:
            continue
        elif isinstance(value, (list, tuple)):
            command += [flag, *map(str, value)]
        else:
            command += [flag, str(value)]
    return command


class ServerProcess:
    """A launched api_server: readiness check with a deadline, output kept for errors, shutdown."""

    def __init__(self, command: Sequence[str], url: str, startup_timeout: float) -> None:
        self.command = list(command)
        self.url = url
        self.startup_timeout = startup_timeout
        self._log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the process)
        self.process = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT)
        self._ready = False
        self._lock = threading.Lock()

    def output(self, limit: int = 2000) -> str:
        """The last `limit` characters the server printed ("" once the server is closed)."""
        if self._log.closed:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", errors="replace")[-limit:]

    def wait_ready(self) -> None:
        """Block until the server lists its models; raise if it exits or the deadline passes."""
        with self._lock:
            if self._ready:
                return
            deadline = time.monotonic() + self.startup_timeout
            while True:
                code = self.process.poll()
                if code is not None:
                    raise LLMConnectionError(f"lmdeploy api_server exited with code {code}:\n{self.output()}")
                try:
                    served_model(self.url, timeout=2.0)
                except LLMError:
                    if time.monotonic() >= deadline:
                        printed = self.output()
                        self.close()
                        raise LLMTimeoutError(
                            f"lmdeploy api_server did not answer at {self.url} within {self.startup_timeout} s:\n"
                            f"{printed}"
                        ) from None
                    time.sleep(0.25)
                    continue
                self._ready = True
                return

    def close(self) -> None:
        """Stop the server (terminate, then kill after 10 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


class _LMDeployAPI(_GPTAPICore):
    """What the LMDeploy clients add to the OpenAI clients: the URL default, model discovery, extra fields.

    Args:
        url: The api_server's address (``http://127.0.0.1:23333``; ``/v1`` is added).
        model_name: The served model name; None asks the server (``/v1/models``).
        meta_template: Role mapping (`APITemplateParser`); the server applies the model's
            chat template to the messages.
        key: API key, when the server was started with ``--api-keys``.
        **kwargs: `GPTAPI` options (``retry``, ``timeout``...) and generation parameters;
            ``top_k`` and ``repetition_penalty`` are sent too (LMDeploy accepts them).
    """

    _extra_fields = ("top_k", "repetition_penalty", "skip_special_tokens", "ignore_eos", "min_p")

    def __init__(
        self,
        url: str = "http://127.0.0.1:23333",
        model_name: str | None = None,
        meta_template: MetaTemplate | None = None,
        key: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        first_key = key if isinstance(key, str) or key is None else next(iter(key), None)
        model = model_name or served_model(url, first_key)
        super().__init__(model, meta_template=meta_template, key=key, api_base=url, **kwargs)
        self.url = url
        self.model_name = model


class LMDeployClient(_LMDeployAPI, GPTAPI):
    """Synchronous client of a running LMDeploy api_server (see `_LMDeployAPI` for the arguments)."""


class AsyncLMDeployClient(_LMDeployAPI, AsyncGPTAPI):
    """Asynchronous client of a running LMDeploy api_server (see `_LMDeployAPI` for the arguments)."""


class _ServerMixin(_LMDeployAPI):
    """Launch arguments shared by `LMDeployServer` and `AsyncLMDeployServer`.

    Args:
        path: Model directory or hub id to serve.
        model_name: Name to serve it under (``--model-name``); default: the path's last part.
        server_name: Interface to bind (``0.0.0.0`` is reached through 127.0.0.1).
        server_port: Port to bind.
        tp: Tensor-parallel size (GPUs).
        log_level: The server's log level.
        serve_cfg: Extra ``api_server`` flags (see `serve_command`).
        startup_timeout: Longest wait, in seconds, for the server to answer.
        executable: The ``lmdeploy`` command (default: found on the PATH).
        **kwargs: Client options and generation parameters (see `_LMDeployAPI`).
    """

    server: ServerProcess

    def __init__(
        self,
        path: str,
        model_name: str | None = None,
        server_name: str = "127.0.0.1",
        server_port: int = 23333,
        tp: int = 1,
        log_level: str = "WARNING",
        serve_cfg: Mapping[str, object] | None = None,
        *,
        startup_timeout: float = 600.0,
        executable: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        if "url" in kwargs:
            raise UserError("LMDeployServer chooses its own url; use LMDeployClient for a running server")
        command = serve_command(path, model_name, server_name, server_port, tp, log_level, serve_cfg, executable)
        host = "127.0.0.1" if server_name in ("0.0.0.0", "") else server_name
        url = f"http://{host}:{server_port}"
        self.server = ServerProcess(command, url, startup_timeout)
        self._stop_server = weakref.finalize(self, self.server.close)
        super().__init__(url, model_name or path.rstrip("/").rsplit("/", 1)[-1], **kwargs)
        self.model_path = path

    def stop_server(self) -> None:
        """Stop the api_server process."""
        self._stop_server()


class LMDeployServer(_ServerMixin, LMDeployClient):
    """Launches ``lmdeploy serve api_server`` and talks to it (see `_ServerMixin` for the arguments).

    The constructor returns once the server answers (or raises `LLMConnectionError` if it
    exits, `LLMTimeoutError` after ``startup_timeout``). `close()` also stops the server.
    """

    def __init__(self, path: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(path, *args, **kwargs)
        try:
            self.wait_ready()
        except LLMError:
            self.close()
            raise

    def wait_ready(self) -> None:
        """Block until the server answers (returns at once after the first success)."""
        self.server.wait_ready()

    def close(self) -> None:
        """Close the connection pool and stop the server."""
        super().close()
        self.stop_server()


class AsyncLMDeployServer(_ServerMixin, AsyncLMDeployClient):
    """Launches ``lmdeploy serve api_server`` and talks to it asynchronously.

    The constructor only starts the process; every request (or ``await wait_ready()``)
    first waits for the server in a worker thread, so the event loop never blocks.
    """

    def _setup(self) -> None:
        # holds the server, not `self`: a bound method would keep `self` alive in a reference cycle
        self._transport.before_send = functools.partial(asyncio.to_thread, self.server.wait_ready)

    async def wait_ready(self) -> None:
        """Wait until the server answers (raises if it exits or ``startup_timeout`` passes)."""
        await asyncio.to_thread(self.server.wait_ready)

    async def aclose(self) -> None:
        """Close this loop's connection pool and stop the server."""
        await super().aclose()
        self.stop_server()
