"""The ``plait`` command: ask an agent one question, chat with it, serve it, or evaluate it.

```
plait run "What is 37 * 91?"                 # embedded local model, Calculator tool
plait run --api-base http://127.0.0.1:8000/v1 --model qwen2.5 "..."   # any OpenAI-compatible server
plait chat --session chat.json               # REPL: /help, /reset, /save FILE, /load FILE, /tools, /quit
plait chat --mcp "npx -y @modelcontextprotocol/server-filesystem ."   # add an MCP server's tools
plait web --port 8501                        # the web demo (streamlit) on http://127.0.0.1:8501
plait mcp-serve my_tools:server              # plait tools to MCP clients (stdio; --transport streamable-http)
plait eval data.jsonl --agent my_agent:make --out runs/1   # score an agent over a data set (resumable)
plait export runs/1 -o train.jsonl --only-passed          # its trajectories as fine-tuning data
plait serve --port 8090 --store s.db         # the agent over HTTP (OpenAI-compatible at /v1), sessions kept
plait chat --agent my_agent:build            # your own agent (or a function making it), also on run and serve
plait run --model qwen2.5-coder-1.5b "..."   # a catalogue model of the embedded engine; plait models lists them
PLAIT_SERVER_TOKEN=... plait serve --host 0.0.0.0   # beyond loopback: clients send 'Authorization: Bearer ...'
```

Settings come from the flags, else the environment: the model from ``--model`` /
``$PLAIT_MODEL`` (for the embedded engine a catalogue name, a file or a Hub file; without one
``plait run`` uses SmolLM2-135M and the apps ``chat``, ``web`` and ``serve`` the best installed
catalogue model, saying which on stderr); the server from ``--api-base`` / ``$PLAIT_API_BASE`` / ``$OPENAI_BASE_URL``
(none: the embedded model); the API key from the variable ``--api-key-env`` names (default
``OPENAI_API_KEY``) — never from the command line, where every user of the machine could
read it. Settings are checked before anything runs: a missing model file, an unknown tool,
an async-only tool or a tool whose extra is not installed is one line on stderr and exit
status 2.

The answer is streamed as the model writes it; tool calls and their results are shown as
they happen; an answer cut at ``--max-new-tokens`` says so. Errors while running go to
stderr with exit status 1; Ctrl-C stops ``plait run`` with status 130 and returns ``plait
chat`` to its prompt, the conversation kept.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TextIO

from typing_extensions import TypedDict

from ._cli_agent import (
    add_agent_flags,
    build_agent,
    cli_tools,
    setup as _setup,
)
from ._version import __version__
from .exceptions import PlaitError, UserError

if TYPE_CHECKING:
    from .agents.module import AgentModule
    from .distributed.http_serve.requests import ServerLimits
    from .hooks.usage import UsageMeter
    from .llms.llama_cpp import LlamaCppModel
    from .llms.openai import GPTAPI
    from .repl import Printer

SETTINGS_ERROR = 2
"""The exit status of settings that cannot work (checked before anything runs)."""


__all__ = ["app_model", "build_agent", "build_llm", "cli_tools", "embedded_model", "main"]

DEFAULT_SYSTEM = (
    "You are a helpful assistant. When a question needs exact computation or outside information, "
    "call one of your tools, then answer the user briefly using the tool's result."
)


def build_llm(model: str | None, api_base: str | None, api_key: str | None, **gen: Any) -> GPTAPI | LlamaCppModel:
    """The model the options name: an OpenAI-compatible server when `api_base` is given, else the embedded one.

    Raises:
        UserError: For the embedded model, `model` is neither a catalogue name, nor an existing
            file, nor ``hf:OWNER/REPO/FILE.gguf`` (see `embedded_model`); or the catalogue
            model is not installed or its parts are corrupt.
    """
    if api_base:
        from .llms.openai import GPTAPI

        return GPTAPI(model_type=model or "default", api_base=api_base, key=api_key or "ENV", **gen)
    from .llms.llama_cpp import LlamaCppModel

    return LlamaCppModel(**embedded_model(model), **gen)


class EmbeddedModel(TypedDict, total=False):
    """The argument of `LlamaCppModel` that names its model (none: the default)."""

    model: str
    path: str


def embedded_model(model: str | None) -> EmbeddedModel:
    """The `LlamaCppModel` argument ``--model`` names: none (the default), ``model=`` or ``path=``.

    A catalogue name (``plait models``) is ``model=``; an existing file or
    ``hf:OWNER/REPO/FILE.gguf`` is ``path=``.

    Raises:
        UserError: A path that does not exist, or an unknown name (the message names the
            closest catalogue entry).
    """
    if not model:
        return {}
    from .llms._hub import is_hub_spec
    from .llms.catalogue import catalogue, get_model

    if model.strip().lower() in {entry.name for entry in catalogue()}:
        return {"model": get_model(model).name}
    if is_hub_spec(model) or os.path.isfile(model):
        return {"path": model}
    if model.endswith(".gguf") or any(sep and sep in model for sep in (os.sep, os.altsep)):
        raise UserError(
            f"model file not found: {model} (without --api-base, --model is a catalogue name (plait models), "
            "a .gguf file or hf:OWNER/REPO/FILE.gguf)"
        )
    return {"model": get_model(model).name}  # raises, naming the closest entry


def app_model(model: str | None, api_base: str | None, err: TextIO) -> str | None:
    """The model an app (``plait chat``, ``web``, ``serve``) runs: `model`, else the best installed catalogue model.

    Says which on `err` when it chose; None (the default model) when no catalogue model is installed.
    """
    if model or api_base:
        return model
    from .llms.catalogue import best_installed

    best = best_installed()
    if best is None:
        return None
    err.write(f"plait: model {best.name}, the best installed (plait models lists them; --model NAME chooses)\n")
    return best.name


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="plait", description="Run plait agents from the command line.")
    parser.add_argument("--version", action="version", version=f"plait {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv: debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="only errors in the log output")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--model",
        default=os.environ.get("PLAIT_MODEL") or None,
        help="model name on the server, or for the embedded model a catalogue name (plait models), a .gguf path or "
        "hf:OWNER/REPO/FILE.gguf (downloaded from the Hugging Face Hub) (default: $PLAIT_MODEL; else plait run uses "
        "smollm2-135m, and chat and serve the best installed catalogue model)",
    )
    common.add_argument(
        "--api-base",
        default=os.environ.get("PLAIT_API_BASE") or os.environ.get("OPENAI_BASE_URL") or None,
        help="base URL of an OpenAI-compatible server (default: $PLAIT_API_BASE, $OPENAI_BASE_URL, "
        "else the embedded model)",
    )
    common.add_argument(
        "--api-key-env",
        metavar="NAME",
        default="OPENAI_API_KEY",
        help="environment variable holding the API key (default: OPENAI_API_KEY); keys never go on a command line",
    )
    common.add_argument("--api-key", help=argparse.SUPPRESS)  # refused with a pointer to --api-key-env
    common.add_argument("--tools", default="Calculator", help="comma-separated tool names (default: Calculator)")
    add_agent_flags(common)  # --agent MODULE:NAME, --tools-from FILE
    common.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="SERVER",
        help="an MCP server whose tools to add: a command line (stdio) or an http(s) URL; repeatable",
    )
    common.add_argument("--system", default=DEFAULT_SYSTEM, help="system prompt")
    common.add_argument(
        "--session",
        metavar="FILE",
        help="JSON file to continue the conversation from and save it to (chat: /reset clears it too)",
    )
    common.add_argument("--max-turn", type=int, default=3, help="tool rounds before a final answer is forced")
    common.add_argument(
        "--context",
        choices=["auto", "trim", "summarise", "error", "off"],
        default="auto",
        help="a conversation longer than the model's context: fold the oldest turns into a summary (summarise), "
        "leave them out of requests (trim), stop with an error, or send it whole (off); auto (the default): "
        "summarise, trim on the embedded model",
    )
    common.add_argument(
        "--tool-choice",
        choices=["routed", "auto", "required", "none"],
        default="routed",
        help="when the model must, may or may not call a tool; routed (default): the calculator for arithmetic, "
        "no tool for small talk when it is the only tool, else auto",
    )
    common.add_argument(
        "--max-new-tokens", type=int, default=1024, help="longest answer, in tokens (default: 1024); a cut is shown"
    )
    common.add_argument("--temperature", type=float, default=0.0)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", parents=[common], help="answer one question and exit")
    run.add_argument("question")
    sub.add_parser("chat", parents=[common], help="interactive chat (REPL)")
    serve = sub.add_parser("serve", parents=[common], help="serve the agent over HTTP (OpenAI-compatible too)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8090, help="port to listen on (default: 8090)")
    serve.add_argument(
        "--store",
        metavar="DB",
        help="keep every session in this SQLite file or postgresql:// URL, no password (default: $PLAIT_STORE)",
    )
    serve.add_argument(
        "--workers", type=int, default=1, help="server processes (or Ray Serve replicas) sharing --store (default: 1)"
    )
    serve.add_argument("--ray", action="store_true", help="serve as a Ray Serve deployment of --workers replicas")
    serve.add_argument(
        "--token-file",
        metavar="FILE",
        help="bearer token(s) clients must send, mode 0600: one token, or 'name:token' lines, one tenant each "
        "(default: $PLAIT_SERVER_TOKEN); required off loopback",
    )
    serve.add_argument(
        "--insecure", action="store_true", help="serve a non-loopback address without a token (behind an auth proxy)"
    )
    serve.add_argument(
        "--a2a", action="store_true", help="serve over A2A 1.0 too (Agent Card at /.well-known/agent-card.json)"
    )
    serve.add_argument(
        "--model-name",
        default="plait-agent",
        help="the name OpenAI clients see the agent under (/v1/models, each reply's model; default: plait-agent)",
    )
    add_server_limit_flags(serve)
    mcp = sub.add_parser("mcp-serve", help="serve tools over MCP: MODULE:ATTR names an MCPServer, tools or an agent")
    mcp.add_argument("target", metavar="MODULE:ATTR", help="a module (or .py file) and the attribute to serve")
    mcp.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="address to listen on (HTTP; default: 127.0.0.1)")
    mcp.add_argument("--port", type=int, default=8000, help="port to listen on (HTTP; default: 8000)")
    mcp.add_argument("--token-file", metavar="FILE", help="bearer token, mode 0600 (default: $PLAIT_SERVER_TOKEN)")
    mcp.add_argument("--insecure", action="store_true", help="serve a non-loopback address without a token")
    mcp.add_argument(
        "--allowed-host",
        action="append",
        metavar="HOST",
        help="a Host (and Origin) name the HTTP server answers, NAME or NAME:PORT, '*' for any; repeatable "
        "(default: localhost, 127.0.0.1, [::1] and --host; others get 403: DNS-rebinding protection)",
    )
    web = sub.add_parser("web", help="serve the web demo (needs the 'web' extra)")
    web.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    web.add_argument("--port", type=int, default=8501, help="port to listen on (default: 8501)")
    web.add_argument("--api-base", help="preselect this OpenAI-compatible server (default: embedded model)")
    web.add_argument(
        "--model",
        help="model name on the server, or for the embedded model a catalogue name or .gguf path "
        "(default: the best installed catalogue model)",
    )
    web.add_argument("--agent", choices=["function_calling", "internlm2", "react"], help="agent type at start")
    web.add_argument("--tools", help="comma-separated plugins selected at start (default: Calculator)")
    web.add_argument(
        "--tools-from", action="append", default=[], metavar="MODULE", help="module or .py file with extra tools"
    )
    web.add_argument("--work-dir", help="where session folders (uploads, images) are kept")
    web.add_argument(
        "--mcp", action="append", default=[], metavar="SERVER", help="an MCP server offered at start; repeatable"
    )
    from .eval.cli import add_parsers as add_eval_parsers  # plait eval / plait export (their own settings)
    from .llms._models_cli import add_parser as add_models_parser
    from .trajectories.proxy_cli import add_parser as add_proxy_parser

    add_eval_parsers(sub)
    add_models_parser(sub)
    add_proxy_parser(sub)
    return parser


def add_server_limit_flags(parser: argparse.ArgumentParser) -> None:
    """A server program's flags for how long sessions stay in memory and how many connections one client may hold.

    Unset flags keep `ServerLimits`' defaults (see `server_limits`).
    """
    parser.add_argument(
        "--session-ttl",
        type=float,
        metavar="SECONDS",
        help="drop a session from memory after this long unused (default: 3600; 0: never); with --store it stays "
        "stored and comes back on its next request, without a store it is forgotten",
    )
    parser.add_argument(
        "--max-sessions-per-tenant",
        type=int,
        metavar="N",
        help="sessions one tenant (token) keeps in memory; beyond it its least recently used one is dropped "
        "(default: no cap)",
    )
    parser.add_argument(
        "--max-stored-responses",
        type=int,
        metavar="N",
        help="responses of /v1/responses one tenant keeps for previous_response_id and GET; beyond it its "
        "oldest is dropped (default: 2048; 0: none stored)",
    )
    parser.add_argument(
        "--max-connections-per-client",
        type=int,
        metavar="N",
        help="open connections from one client address (default: 64); behind a reverse proxy every client "
        "has the proxy's address: raise it to 512",
    )


def server_limits(args: argparse.Namespace) -> ServerLimits:
    """The `ServerLimits` that the flags of `add_server_limit_flags` ask for.

    Raises:
        UserError: A value out of range.
    """
    from .distributed.http_serve.requests import ServerLimits

    given: dict[str, Any] = {}
    if args.session_ttl is not None:
        given["session_ttl"] = args.session_ttl or None  # 0: never
    if args.max_sessions_per_tenant is not None:
        given["max_sessions_per_tenant"] = args.max_sessions_per_tenant
    if args.max_stored_responses is not None:
        given["max_stored_responses"] = args.max_stored_responses
    if args.max_connections_per_client is not None:
        given["max_connections_per_client"] = args.max_connections_per_client
    return ServerLimits(**given)


def _own_settings_command(args: argparse.Namespace) -> int:
    """``plait mcp-serve``, ``eval``, ``export``, ``models``: commands with settings of their own (UserError: 2)."""
    if args.command == "mcp-serve":
        from .actions.mcp._cli import mcp_serve

        return mcp_serve(args)
    if args.command == "models":
        from .llms._models_cli import run as run_models

        return run_models(args, sys.stdout)
    if args.command == "record-proxy":
        from .trajectories.proxy_cli import run as run_proxy

        return run_proxy(args)
    from .eval.cli import run as run_eval

    return run_eval(args)


def _web_settings(args: argparse.Namespace) -> None:
    """Check ``plait web``'s tool modules; settle its model (the flags, the app's environment, the best installed).

    Raises:
        UserError: An embedded model that cannot work, or a ``--tools-from`` module that does not
            import (fails here, not later in the browser).
    """
    from .web.settings import import_tool_modules, preset

    problems = import_tool_modules(",".join(args.tools_from))
    if problems:
        raise UserError(problems[0])
    start = preset()
    api_base, model = args.api_base or start["api_base"], args.model or start["model"]
    if not api_base:
        args.model = app_model(model, api_base, sys.stderr)
        embedded_model(args.model)


def _web(args: argparse.Namespace) -> int:
    from .web.launcher import launch

    return launch(
        args.host,
        args.port,
        api_base=args.api_base,
        model=args.model,
        agent=args.agent,
        tools=args.tools,
        tool_modules=args.tools_from,
        work_dir=args.work_dir,
        mcp=args.mcp,
    )


def _log_level(args: argparse.Namespace) -> int:
    if args.quiet:
        return logging.ERROR
    return (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]


def main(argv: Sequence[str] | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Entry point of the ``plait`` console script; returns the exit status.

    0 done; 1 an error while running; 2 settings that cannot work; 130 interrupted (Ctrl-C).
    """
    out = stdout or sys.stdout
    args = _parser().parse_args(argv)
    logging.basicConfig(level=_log_level(args), format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "web":
            try:
                _web_settings(args)
            except UserError as exc:
                sys.stderr.write(f"plait: error: {exc}\n")
                return SETTINGS_ERROR
            return _web(args)
        if args.command in ("mcp-serve", "eval", "export", "models", "record-proxy"):
            try:
                return _own_settings_command(args)
            except UserError as exc:  # settings that cannot work, found before anything ran
                sys.stderr.write(f"plait: error: {exc}\n")
                return SETTINGS_ERROR
        from .repl import Printer

        printer = Printer(sys.stderr if args.command == "serve" else out)
        try:
            if args.command == "serve" and _supervising(args):
                from .distributed.http_serve.workers import supervise

                command = sys.argv[1:] if argv is None else list(argv)
                return supervise(args, command, _server_token(args), server_limits(args), partial(_agent_for, args))
            agent, meter = _setup(args, printer)
            token = _server_token(args) if args.command == "serve" else None
            limits = server_limits(args) if args.command == "serve" else None
        except UserError as exc:
            sys.stderr.write(f"plait: error: {exc}\n")
            return SETTINGS_ERROR
        if args.command == "serve":
            assert limits is not None
            _serve(agent, args, token, limits)
        elif args.command == "run":
            _run(agent, args.question, args, printer, meter, stdin or sys.stdin)
        else:
            from .repl import chat

            source = stdin or sys.stdin
            turn = lambda text: _run(agent, text, args, printer, meter, source)  # noqa: E731
            chat(agent, source, printer, turn, session=args.session_file)
    except PlaitError as exc:
        sys.stderr.write(f"plait: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _run(
    agent: AgentModule,
    question: str,
    args: argparse.Namespace,
    printer: Printer,
    meter: UsageMeter,
    stdin: TextIO,
) -> None:
    from .repl import approval_prompt, ask

    policy = getattr(agent, "context_policy", None)  # None: your own agent (--agent) may have none
    before = (policy.trimmed.get(0, 0), policy.summarised.get(0, 0)) if policy is not None else (0, 0)
    try:
        approve = approval_prompt(stdin, printer)
        ask(agent, question, printer, meter, args.max_new_tokens, approve)
        if policy is not None and policy.summarised.get(0, 0) > before[1]:
            printer.notice("(older turns were folded into a summary to fit the model's context; /context)")
        elif policy is not None and policy.trimmed.get(0, 0) > before[0]:
            printer.notice("(older turns were left out of the request to fit the model's context; /context)")
    finally:
        if args.session_file is not None:
            args.session_file.save(agent)


def _server_token(args: argparse.Namespace) -> str | dict[str, str] | None:
    from .distributed.http_serve.app import server_token

    return server_token(args.token_file)


def _agent_for(args: argparse.Namespace) -> AgentModule:
    """The agent ``plait serve``'s settings describe, as each worker or Ray Serve replica builds it."""
    from .repl import Printer

    return _setup(args, Printer(sys.stderr))[0]


def _supervising(args: argparse.Namespace) -> bool:
    """Whether this ``plait serve`` starts workers or a Ray Serve deployment (and is not one of its workers)."""
    from .distributed.http_serve.workers import WORKER_ENV, store_setting

    if args.workers < 1:
        raise UserError(f"--workers must be at least 1, got {args.workers}")
    store_setting(args)  # a password on the command line is refused before anything starts
    return (args.workers > 1 or args.ray) and WORKER_ENV not in os.environ


def _serve(
    agent: AgentModule,
    args: argparse.Namespace,
    token: str | dict[str, str] | None,
    limits: ServerLimits,
) -> None:
    from .distributed.http_serve.workers import serve

    serve(agent, args, token, limits)


if __name__ == "__main__":
    sys.exit(main())
