"""``plait record-proxy``: the command-line side of `plait.trajectories.proxy`.

```
plait record-proxy --upstream http://127.0.0.1:8080/v1 [--port 8091] [--out trajectories.jsonl] [--tokens]
                   [--idle-timeout S] [--api-key-env NAME] [--host H] [--token-file F] [--insecure]
```

The upstream's API key comes from the variable ``--api-key-env`` names (default
``OPENAI_API_KEY``), never from the command line. The proxy's own token comes from
``$PLAIT_SERVER_TOKEN`` or ``--token-file``, as for ``plait serve``.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..exceptions import UserError

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``record-proxy`` to the ``plait`` parser's subparsers `sub`."""
    proxy: argparse.ArgumentParser = sub.add_parser(
        "record-proxy", help="an OpenAI-compatible proxy to a model server that records trajectories for training"
    )
    proxy.add_argument("--upstream", required=True, metavar="URL", help="the model server's base URL (…/v1)")
    proxy.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    proxy.add_argument("--port", type=int, default=8091, help="port to listen on (default: 8091)")
    proxy.add_argument("--out", default="trajectories.jsonl", metavar="FILE", help="JSON Lines file to append to")
    proxy.add_argument("--tokens", action="store_true", help="ask the upstream for token ids and logprobs")
    proxy.add_argument(
        "--idle-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="a trajectory with no request for this long is written (default: 300)",
    )
    proxy.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="NAME",
        help="environment variable holding the upstream's API key (default: OPENAI_API_KEY)",
    )
    proxy.add_argument("--token-file", help="the proxy's bearer token(s), mode 0600 (default: $PLAIT_SERVER_TOKEN)")
    proxy.add_argument("--insecure", action="store_true", help="serve a non-loopback address without a token")
    return proxy


def run(args: argparse.Namespace) -> int:
    """Run the proxy until Ctrl-C or SIGTERM (open trajectories are written then); the exit status.

    Raises:
        UserError: Settings that cannot work (``plait`` prints it and exits with status 2).
    """
    from ..distributed.http_serve.app import server_token
    from .proxy import RecordProxy

    if args.idle_timeout <= 0:
        raise UserError(f"--idle-timeout must be positive, got {args.idle_timeout}")
    if not args.upstream.startswith(("http://", "https://")):
        raise UserError(f"--upstream must be an http(s) URL, got {args.upstream!r}")
    proxy = RecordProxy(
        args.upstream,
        args.out,
        host=args.host,
        port=args.port,
        token=server_token(args.token_file),
        upstream_key=os.environ.get(args.api_key_env) or None,
        insecure=args.insecure,
        tokens=args.tokens,
        idle_s=args.idle_timeout,
    )
    proxy.serve_forever()
    return 0
