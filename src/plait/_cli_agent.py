"""The agent of ``plait run``, ``plait chat`` and ``plait serve``: the built-in one, or yours (private).

Without ``--agent`` the flags build a streaming native function-calling agent (`build_agent`)
over the tools ``--tools`` names (``--tools-from FILE`` imports more of them first) and the
MCP servers ``--mcp`` names, on the model ``--model`` / ``--api-base`` name.

``--agent MODULE:NAME`` names your own agent instead, loaded the way ``plait eval --agent``
and ``plait mcp-serve`` load theirs (`plait.utils.loading.load_object`): an agent (any
`AgentModule`, sync or async), or a zero-argument callable that returns one. Your agent
brings its own model, tools and prompt, so the flags that build the built-in agent
(`BUILTIN_FLAGS`) are refused beside it (exit status 2, naming the flag) rather than
silently ignored; ``--session`` and the server's flags apply to it as to the built-in one.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .exceptions import UserError
from .utils.loading import load_object

if TYPE_CHECKING:
    from .actions import BaseAction
    from .agents.function_calling import StreamingFunctionCallingAgent
    from .agents.module import AgentModule
    from .context import ContextPolicy, PolicyName
    from .hooks.usage import UsageMeter
    from .repl import Printer

__all__ = ["BUILTIN_FLAGS", "add_agent_flags", "build_agent", "cli_tools", "load_agent", "setup"]

BUILTIN_FLAGS = (
    "model",
    "api_base",
    "api_key_env",
    "tools",
    "tools_from",
    "mcp",
    "system",
    "max_turn",
    "context",
    "tool_choice",
    "max_new_tokens",
    "temperature",
)
"""The settings (argparse names) that build the built-in agent: refused beside ``--agent``."""


def add_agent_flags(parser: argparse.ArgumentParser) -> None:
    """``--agent MODULE:NAME`` and ``--tools-from FILE`` (the flags of `setup` not in `plait.cli`'s list)."""
    parser.add_argument(
        "--agent",
        metavar="MODULE:NAME",
        help="your own agent instead of the built-in one: an agent, or a function returning one, in a module or "
        ".py file (as plait eval --agent); it brings its own model and tools, so the flags that build the built-in "
        "agent (--model, --tools, --system...) are refused beside it",
    )
    parser.add_argument(
        "--tools-from",
        action="append",
        default=[],
        metavar="FILE",
        help="a module or .py file whose tools --tools may then name (importing it registers them); repeatable",
    )


def cli_tools() -> dict[str, type[BaseAction]]:
    """The tools ``--tools`` offers (`plait.actions._registry.user_tools`)."""
    from .actions import calculator  # noqa: F401  (registers the default tool)
    from .actions._registry import user_tools

    return user_tools()


def _tool(name: str) -> BaseAction:
    """The tool `name` names (any case), checked.

    Raises:
        UserError: Unknown, async-only, or its optional dependency is not installed.
    """
    tools = cli_tools()
    known = {tool.lower(): tool for tool in tools}
    canonical = known.get(name.strip().lower())
    if canonical is None:
        sync_name = name.strip().removeprefix("Async")
        if name.strip().startswith("Async") and sync_name.lower() in known:
            raise UserError(
                f"{name} is for async agents; the CLI's agent is synchronous: use {known[sync_name.lower()]}"
            )
        raise UserError(f"unknown tool {name!r}; tools: {', '.join(sorted(tools))}")
    from .actions import get_tool
    from .actions.base_action import check_dependencies

    check_dependencies(tools[canonical])
    return get_tool(canonical)


def build_agent(
    llm: object,
    tools: Sequence[str | BaseAction],
    system: str,
    max_turn: int,
    mcp: Sequence[str] = (),
    context_policy: PolicyName | ContextPolicy | None = "trim",
    tool_choice: str = "routed",
) -> StreamingFunctionCallingAgent:
    """A streaming native function-calling agent over `tools` (tools, or registry names) and MCP servers.

    Its tool choice is ``'routed'`` by default (`plait.agents.routing`): the Calculator for
    arithmetic, no tool for small talk, decided per question.
    """
    from .actions.mcp import MCPToolkit
    from .agents.function_calling import StreamingFunctionCallingAgent

    chosen = [_tool(tool) if isinstance(tool, str) else tool for tool in tools]
    actions = [*chosen, *(MCPToolkit.from_spec(server, elicit="approval") for server in mcp)]
    return StreamingFunctionCallingAgent(
        llm, actions, system, max_turn=max_turn, tool_choice=tool_choice, context_policy=context_policy
    )


def load_agent(spec: str) -> AgentModule:
    """The agent ``MODULE:NAME`` names: the agent itself, or what the zero-argument callable there returns.

    Raises:
        UserError: `spec` is not ``MODULE:NAME``, does not import or name anything (the messages of
            ``plait eval --agent``), is neither an agent nor a callable, the callable raises, or it
            returns something other than an agent.
    """
    from .agents.module import AgentModule

    found = load_object(spec, "--agent")
    if isinstance(found, AgentModule):
        return found
    if not callable(found):
        raise UserError(f"--agent {spec!r} is not a callable that returns an agent")
    try:
        agent = found()
    except Exception as exc:  # the user's factory: whatever it raises is a settings error
        raise UserError(f"--agent {spec!r} raised {type(exc).__name__}: {exc}") from None
    if not isinstance(agent, AgentModule):
        raise UserError(f"the agent factory returned {type(agent).__name__}, not an agent")
    return agent


def _refuse_builtin_flags(args: argparse.Namespace) -> None:
    """Refuse the flags that build the built-in agent beside ``--agent`` (defaults pass, even from the environment).

    Raises:
        UserError: The first such flag given, named.
    """
    from .cli import _parser

    defaults = _parser().parse_args([args.command, *(["-"] if args.command == "run" else [])])
    for name in BUILTIN_FLAGS:
        if getattr(args, name) != getattr(defaults, name):
            flag = "--" + name.replace("_", "-")
            raise UserError(
                f"{flag} builds the built-in agent; --agent {args.agent} brings its own (set it there, or drop {flag})"
            )


def _api_key(args: argparse.Namespace) -> str | None:
    """The API key, from the environment variable ``--api-key-env`` names.

    Raises:
        UserError: ``--api-key`` was given (a command line is visible to every user of the machine).
    """
    if args.api_key is not None:
        raise UserError(
            "--api-key would show the key to every user of this machine (ps); export it and pass --api-key-env NAME"
        )
    return os.environ.get(args.api_key_env) or None


def _builtin(args: argparse.Namespace) -> AgentModule:
    """The built-in agent the flags describe (its tools and session file checked before the model loads)."""
    from ._session_file import SessionFile
    from .cli import app_model, build_llm, embedded_model

    if args.command in ("chat", "serve"):
        args.model = app_model(args.model, args.api_base, sys.stderr)
    if args.max_new_tokens < 1 or args.max_turn < 1:
        raise UserError("--max-new-tokens and --max-turn must be at least 1")
    if args.tools_from:
        from .web.settings import import_tool_modules

        problems = import_tool_modules(",".join(args.tools_from))
        if problems:
            raise UserError(problems[0])
    tools = [_tool(name) for name in args.tools.split(",") if name.strip()]  # checked before the model loads
    args.session_file = SessionFile(args.session) if args.session else None  # so is the session file
    if args.api_base is None:
        from .llms._models_cli import announce_join

        announce_join(embedded_model(args.model).get("model"), sys.stderr)
    llm = build_llm(
        args.model, args.api_base, _api_key(args), max_new_tokens=args.max_new_tokens, temperature=args.temperature
    )
    from .context import app_policy

    policy = app_policy(args.context, embedded=args.api_base is None)
    return build_agent(llm, tools, args.system, args.max_turn, args.mcp, policy, args.tool_choice)


def setup(args: argparse.Namespace, printer: Printer) -> tuple[AgentModule, UsageMeter]:
    """The agent the settings describe (built-in or ``--agent``'s), tool lines shown by `printer`, and a usage meter.

    Raises:
        UserError: A setting that cannot work (see `plait.cli`'s docstring), or a flag of the
            built-in agent beside ``--agent``.
    """
    from ._session_file import SessionFile
    from .hooks.usage import UsageMeter
    from .interceptors import register_interceptor
    from .repl import ToolEcho

    if args.agent:
        _api_key(args)  # a key on the command line is refused whatever the agent
        _refuse_builtin_flags(args)
        args.session_file = SessionFile(args.session) if args.session else None  # checked before the agent loads
        agent = load_agent(args.agent)
    else:
        agent = _builtin(args)
    executor = getattr(agent, "executor", None)
    if args.command == "serve" and executor is not None:  # run and chat show tool lines from the events (`repl.ask`)
        executor.register_hook(ToolEcho(printer, with_session=True))
    meter = UsageMeter()
    register_interceptor(agent, meter)
    if args.session_file is not None:
        args.session_file.load(agent, sys.stderr)
    return agent, meter
