"""A catalogue model as an OpenAI-compatible HTTP endpoint for other apps (private; ``plait models serve``).

The server is llama.cpp's own (``xllamacpp.Server``, what ``llama-server`` runs):
``/v1/chat/completions`` with streaming, the model's jinja chat template and llama.cpp's own
tool-call parsing, ``/v1/completions``, ``/v1/models``, and its web page at ``/``. plait adds the
catalogue (a name, joined on first use) and the exposure rules of every plait server: loopback
by default, and an address beyond it only with a bearer token (``--token-file`` or
``$PLAIT_SERVER_TOKEN``) or ``--insecure`` (`plait.distributed.http_serve.access.check_exposure`).
With a token, llama.cpp answers 401 to a request without ``Authorization: Bearer <token>``
(only ``/health`` and the web page's files stay open). The token is handed to llama.cpp in memory: it is never on a
command line, in a repr or in what is printed.

```
$ plait models serve qwen2.5-coder-1.5b --port 8080
plait: serving qwen2.5-coder-1.5b (~/.cache/plait/models/qwen2.5-coder-1.5b-cc324af070c2.gguf) at http://127.0.0.1:8080/v1 (OpenAI-compatible; Ctrl-C stops)
```
"""  # noqa: E501

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TextIO

from ..distributed.http_serve.access import AccessControl, check_exposure
from ..exceptions import UserError
from ._llama_engine import Server, engine_params, start_engine
from .catalogue import get_model, resolve_model

__all__ = ["ModelServer", "hang_up"]

PROMPT_CACHE_MIB = 256
"""Host memory llama.cpp may keep past prompts' KV state in (8 GiB by default)."""


def hang_up(port: int) -> int:
    """Shut down every connection this process accepted on `port` (Linux; elsewhere none); how many.

    A request still running when llama.cpp's server is destroyed holds it until its client
    disconnects (xllamacpp 2026.10: the task loop ends first, so no result ever comes, and the
    HTTP server waits for its workers): a non-streamed one forever, a streamed one for 30 s.
    Hanging up first ends each such request within llama.cpp's one-second check of its
    connection. Only sockets whose local port is `port` and that have a peer are touched
    (through a duplicate of their descriptor), never the listening one. A request arriving in
    the instant between the hang-up and the server's stop can still hold it; a second signal
    then ends the process (`ModelServer.serve_forever`).
    """
    try:
        descriptors = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return 0
    closed = 0
    for descriptor in descriptors:
        try:
            sock = socket.socket(fileno=os.dup(descriptor))
        except OSError:  # gone, or not a socket
            continue
        with sock:
            if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
                continue
            try:
                if sock.getsockname()[1] != port:
                    continue
                sock.getpeername()  # the listening socket has none (OSError)
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                continue
            closed += 1
    return closed


class ModelServer:
    """llama.cpp's server on one catalogue model: start, stop, or serve until a signal.

    Settings are checked here, before anything is joined or loaded.

    Args:
        model: The catalogue name (``'qwen2.5-coder-1.5b'``).
        host: The address to listen on (loopback by default).
        port: The port (0: a free one, in `port` once started).
        token: The bearer token(s) clients must send (``{tenant: token}``: any of them); None: none.
        insecure: Serve a non-loopback `host` without a token (behind an authenticating proxy).
        n_ctx: The context size in tokens (one slot: requests take turns).
        threads: CPU threads for prompt and generation.

    Raises:
        UserError: An unknown name (naming the closest), an empty token, a non-loopback `host`
            without a token (and without `insecure`), or `n_ctx` / `threads` below 1.
    """

    def __init__(
        self,
        model: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | Mapping[str, str] | None = None,
        insecure: bool = False,
        n_ctx: int = 4096,
        threads: int = 1,
    ) -> None:
        self.model = get_model(model).name
        access = AccessControl(token)  # the token checks of every plait server
        check_exposure(host, has_token=access.enabled, insecure=insecure, what="use the model")
        if n_ctx < 1 or threads < 1:
            raise UserError(f"--n-ctx and --threads must be at least 1 (got {n_ctx} and {threads})")
        self.host = host
        self.port = port
        self.n_ctx = n_ctx
        self.threads = threads
        self.path: Path | None = None
        self._keys = [token] if isinstance(token, str) else list((token or {}).values())
        self._server: Server | None = None
        self._address = ""

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL (``http://127.0.0.1:PORT/v1``); meaningful once started."""
        return f"{self._address or f'http://{self.host}:{self.port}'}/v1"

    @property
    def running(self) -> bool:
        """Whether the server is listening."""
        return self._server is not None

    def start(self) -> ModelServer:
        """Join the model if it is its first use, load it and listen; returns once requests are answered.

        Raises:
            ModelNotInstalledError: The model's packages are not installed (naming the ``pip install``).
            CorruptModelError: Its parts do not make the pinned file.
            UserError: llama.cpp could not load the model or listen (its reason quoted).
        """
        if self._server is not None:
            return self
        self.path = resolve_model(self.model)
        params = engine_params(
            str(self.path), n_ctx=self.n_ctx, n_threads=self.threads, prompt_cache_mib=PROMPT_CACHE_MIB
        )
        params.hostnames = [self.host]
        params.port = self.port
        params.api_keys = self._keys  # llama.cpp answers 401 without one of them
        params.model_alias = {self.model}  # the name clients see in /v1/models and every response
        params.use_jinja = True  # the model's own template renders tools; llama.cpp parses the calls
        params.endpoint_slots = False  # /slots would show one client the prompts of another
        # llama.cpp answers any web page's cross-origin request (it reflects the Origin, with
        # credentials): a page open in the user's browser could use the model. No origin is allowed;
        # llama.cpp's own page at / is same-origin and needs none.
        params.cors_origins = ""
        params.cors_origins_explicit = True
        failure = (
            f"llama.cpp could not serve {self.model} on {self.host}:{self.port} (a port in use, "
            "an address of another machine, or a model it cannot load)"
        )
        self._server = start_engine(params, failure)
        self._address = str(self._server.listening_address)  # http://HOST:PORT
        self.port = int(self._address.rsplit(":", 1)[1])
        return self

    def stop(self) -> None:
        """Stop serving: requests still running are cut off; the port is free again when this returns."""
        server, self._server = self._server, None
        if server is None:
            return
        hang_up(self.port)
        del server  # xllamacpp stops the server and waits for its threads when the object goes

    def banner(self) -> str:
        """The line that says what is served and where (never the token)."""
        auth = "; clients send 'Authorization: Bearer <token>'" if self._keys else ""
        return f"plait: serving {self.model} ({self.path}) at {self.url} (OpenAI-compatible{auth}; Ctrl-C stops)"

    def serve_forever(self, out: TextIO) -> None:
        """Start, write `banner` to `out`, and serve until SIGINT (Ctrl-C) or SIGTERM; then stop cleanly.

        Call it from the main thread: it installs handlers for the two signals. While it stops,
        a second signal ends the process at once (the default action); the previous handlers are
        back when it returns.
        """
        stopping = threading.Event()

        def stop(signum: int, frame: FrameType | None) -> None:
            stopping.set()

        signals = (signal.SIGINT, signal.SIGTERM)
        previous = {signum: signal.signal(signum, stop) for signum in signals}
        try:
            self.start()
            if not stopping.is_set():
                out.write(self.banner() + "\n")
                out.flush()
            while not stopping.wait(3600):  # a signal's handler runs between waits, and ends this one
                pass
        finally:
            for signum in signals:
                signal.signal(signum, signal.SIG_DFL)
            self.stop()
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        auth = "token" if self._keys else "no token"
        return f"ModelServer({self.model!r}, {self.url}, {auth}, {state})"
