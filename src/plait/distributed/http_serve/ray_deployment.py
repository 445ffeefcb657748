"""``plait serve --ray``: the agent server as a Ray Serve deployment, its replicas sharing one session store.

Ray Serve is the engine: its HTTP proxy takes the requests on ``host:port`` and routes each to
one replica; plait adds no scheduler. Each replica (`AgentReplica`) builds the agent, binds it
to the store (``shared=True``: any replica may take any turn of a session, see
`plait.memory.backend`), and runs the ordinary `AgentAPIServer` on a loopback port of its own;
the replica hands each request to it and the answer back, streamed when it streams (SSE). So
the HTTP API, the OpenAI route, tokens, limits and error shapes are exactly `plait serve`'s.

```python
from plait.distributed.http_serve.ray_deployment import run_deployment

run_deployment(build, replicas=2, store="postgresql://plait@db/plait", port=8090)  # until SIGTERM
```

`build` is a picklable callable (a module-level function, or a `functools.partial` of one)
that returns the agent: Ray starts it in each replica's process. Needs the ``ray-serve`` extra
(``pip install 'plait[ray-serve]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ...exceptions import MissingDependencyError
from .access import check_exposure

if TYPE_CHECKING:
    from .requests import ServerLimits

__all__ = ["PROXY_TRIES", "AgentReplica", "run_deployment"]

logger = logging.getLogger(__name__)

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"}
)


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise MissingDependencyError("ray[serve]", extra="ray-serve", feature="plait serve --ray") from None


class AgentReplica:
    """One replica: the agent behind its own `AgentAPIServer` on loopback, requests handed over.

    Args:
        build: Returns the agent (called in the replica's process).
        store: The session store (`plait.distributed.http_serve.workers.open_store`), opened shared.
        token: The bearer token(s) requests need, as `AgentAPIServer` takes them.
        limits: The server's limits.
        a2a: Serve over A2A 1.0 too.
        model_name: The name OpenAI clients see the agent under (None: the server's default).
    """

    def __init__(
        self,
        build: Callable[[], Any],
        store: str | None = None,
        token: str | Mapping[str, str] | None = None,
        limits: ServerLimits | None = None,
        a2a: bool = False,
        model_name: str | None = None,
    ) -> None:
        from .app import AgentAPIServer
        from .workers import open_store

        agent = build()
        if store:
            open_store(store, shared=True).attach(agent)
        from .openai_route import DEFAULT_MODEL_NAME

        name = model_name or DEFAULT_MODEL_NAME
        self.server = AgentAPIServer(
            agent, "127.0.0.1", 0, token=token, limits=limits, a2a=a2a, model_name=name
        ).start()
        self.base = self.server.url
        self._http: Any = None

    def _client(self) -> Any:
        if self._http is None:  # made on the replica's running loop
            aiohttp = importlib.import_module("aiohttp")
            self._http = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None), connector=aiohttp.TCPConnector(limit=0)
            )
        return self._http

    async def __call__(self, request: Any) -> Any:
        """Hand a Starlette request to the replica's server; its answer (streamed when it is SSE)."""
        responses = _import("starlette.responses")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        target = self.base + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        answer = await self._client().request(
            request.method, target, data=await request.body(), headers=headers, allow_redirects=False
        )
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_BY_HOP}
        if answer.headers.get("Content-Type", "").startswith("text/event-stream"):

            async def chunks() -> AsyncIterator[bytes]:
                try:
                    async for chunk in answer.content.iter_any():
                        yield chunk
                finally:
                    answer.release()

            return responses.StreamingResponse(chunks(), status_code=answer.status, headers=kept)
        body = await answer.read()
        answer.release()
        return responses.Response(body, status_code=answer.status, headers=kept)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.server.stop()


PROXY_TRIES = 5
"""How often to wait for Ray Serve's HTTP proxy (60 s each, Ray's own constant) on a busy machine."""


def _start_proxies(ray: ModuleType, serve: ModuleType, host: str, port: int) -> None:
    """``serve.start`` on `host`:`port`, waiting again while the proxy actor is slow to come up.

    Ray waits 60 s for its proxy and then kills it; on a loaded machine the controller starts
    another, and asking again waits for that one.
    """
    for attempt in range(1, PROXY_TRIES + 1):
        try:
            serve.start(http_options={"host": host, "port": port})
            return
        except (TimeoutError, ray.exceptions.RayActorError) as exc:
            if attempt == PROXY_TRIES:
                raise
            logger.warning("Ray Serve's HTTP proxy is not up yet (%s); waiting again", type(exc).__name__)


SERVED_S = 600.0
"""How long the deployment may take to answer through Ray's proxy once deployed."""


def _wait_until_served(host: str, port: int, timeout: float = SERVED_S) -> None:
    """Wait until the proxy hands requests to a replica (the agent server answers: 200, or 401 without a token).

    Raises:
        TimeoutError: It did not within `timeout` seconds.
    """
    address = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host  # the wildcard is asked on loopback
    url = f"http://{address}:{port}/health_check"
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:  # our own http URL
                if answer.status == 200:
                    return
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the Ray Serve deployment did not answer on {url} within {timeout:.0f} s")
        time.sleep(0.5)


def run_deployment(
    build: Callable[[], Any],
    *,
    replicas: int = 1,
    store: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8090,
    token: str | Mapping[str, str] | None = None,
    limits: ServerLimits | None = None,
    insecure: bool = False,
    a2a: bool = False,
    ready: Callable[[], None] | None = None,
    model_name: str | None = None,
) -> None:
    """Serve the agent `build` returns through Ray Serve until SIGTERM or Ctrl-C (see the module docstring).

    Args:
        build: Returns the agent (a picklable callable: it runs in each replica).
        replicas: How many replicas.
        store: The session store every replica shares (needed for more than one replica).
        host: The address Ray Serve's proxy listens on.
        port: Its port.
        token: The bearer token(s) requests need.
        limits: The server's limits.
        insecure: Serve an address beyond loopback without a token.
        a2a: Serve over A2A 1.0 too.
        ready: Called once the deployment answers (default: print where it runs).
        model_name: The name OpenAI clients see the agent under (None: the server's default).

    Raises:
        MissingDependencyError: Ray Serve is not installed.
        UserError: An exposed address without a token.
    """
    check_exposure(host, has_token=bool(token), insecure=insecure, what="use the agent")
    ray = _import("ray")
    serve = _import("ray.serve")
    if not ray.is_initialized():
        if os.environ.get("RAY_ADDRESS"):  # a cluster to join (`ray start --head`, then workers)
            ray.init(log_to_driver=False)
        else:  # a runtime of its own on this machine, gone with the server
            ray.init(address="local", include_dashboard=False, log_to_driver=False)
    _start_proxies(ray, serve, host, port)
    deployment = serve.deployment(AgentReplica, name="plait-agent", num_replicas=replicas, max_ongoing_requests=256)
    serve.run(
        deployment.bind(build, store, token, limits, a2a, model_name), name="plait", route_prefix="/", blocking=False
    )
    _wait_until_served(host, port)
    if ready is not None:
        ready()
    else:
        sys.stdout.write(f"plait agent server running on http://{host}:{port} ({replicas} Ray Serve replicas)\n")
        sys.stdout.flush()
    stop = asyncio.Event()

    async def wait() -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()

    try:
        asyncio.run(wait())
    finally:
        serve.shutdown()
        ray.shutdown()
