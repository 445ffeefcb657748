"""The ``plait`` command: ask an agent one question, or chat with it.

```
plait run "What is 37 * 91?"                 # embedded local model, Calculator tool
plait run --api-base http://127.0.0.1:8000/v1 --model qwen2.5 "..."   # any OpenAI-compatible server
plait chat --session chat.json               # REPL: /reset, /save FILE, /load FILE, /tools, /quit
plait chat --mcp "npx -y @modelcontextprotocol/server-filesystem ."   # add an MCP server's tools
plait web --port 8501                        # the web demo (streamlit) on http://127.0.0.1:8501
plait serve --port 8090 --store s.db         # the agent over HTTP (OpenAI-compatible at /v1), sessions kept
PLAIT_SERVER_TOKEN=... plait serve --host 0.0.0.0   # beyond loopback: clients send 'Authorization: Bearer ...'
```

API keys come from the environment (``--api-key-env NAME``, default ``OPENAI_API_KEY``),
never from the command line, where every user of the machine could read them.

The answer is streamed as the model writes it; tool calls and their results are shown as
they happen; errors go to stderr with exit status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from .exceptions import PlaitError, UserError

if TYPE_CHECKING:
    from .actions import BaseAction
    from .agents.function_calling import StreamingFunctionCallingAgent
    from .llms.llama_cpp import LlamaCppModel
    from .llms.openai import GPTAPI
    from .schema import AgentMessage

__all__ = ["build_agent", "build_llm", "main"]

DEFAULT_SYSTEM = (
    "You are a helpful assistant. When a question needs exact computation or outside information, "
    "call one of your tools, then answer the user briefly using the tool's result."
)


def build_llm(model: str | None, api_base: str | None, api_key: str | None, **gen: Any) -> GPTAPI | LlamaCppModel:
    """The model the options name: an OpenAI-compatible server when `api_base` is given, else the embedded one."""
    if api_base:
        from .llms.openai import GPTAPI

        return GPTAPI(model_type=model or "default", api_base=api_base, key=api_key or "ENV", **gen)
    from .llms.llama_cpp import LlamaCppModel

    path = model if model and os.path.exists(model) else None
    return LlamaCppModel(path=path, **gen)


def _tool(name: str) -> BaseAction:
    from .actions import (
        calculator,  # noqa: F401  (registers the default tool)
        get_tool,
        list_tools,
    )

    known = {tool.lower(): tool for tool in list_tools()}
    canonical = known.get(name.strip().lower())
    if canonical is None:
        raise PlaitError(f"unknown tool {name!r}; known tools: {', '.join(sorted(known.values()))}")
    return get_tool(canonical)


def build_agent(
    llm: object, tools: Sequence[str], system: str, max_turn: int, mcp: Sequence[str] = ()
) -> StreamingFunctionCallingAgent:
    """A streaming native function-calling agent over `tools` (registry names) and MCP servers."""
    from .actions.mcp import MCPToolkit
    from .agents.function_calling import StreamingFunctionCallingAgent

    actions = [_tool(name) for name in tools if name.strip()] + [MCPToolkit.from_spec(server) for server in mcp]
    return StreamingFunctionCallingAgent(llm, actions, system, max_turn=max_turn)


class _Printer:
    """Writes streamed replies as deltas and tool events as whole lines, never mixing the two on a line."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.shown = ""  # the current reply's text already written
        self.line_open = False

    def text(self, text: str) -> None:
        """Show a reply's cumulative `text` (a text that does not extend the last one starts anew)."""
        if not text.startswith(self.shown):
            self.end_line()
            self.shown = ""
        delta = text[len(self.shown) :]
        if delta:
            self.out.write(delta)
            self.out.flush()
            self.line_open = True
        self.shown = text

    def answer(self, text: str) -> None:
        """Finish with the answer `text` (written whole unless it was streamed)."""
        if text != self.shown:
            self.end_line()
            self.out.write(text)
        self.out.write("\n")
        self.out.flush()
        self.shown, self.line_open = "", False

    def line(self, text: str) -> None:
        """A line of its own (a tool event)."""
        self.end_line()
        self.out.write(f"{text}\n")
        self.out.flush()
        self.shown = ""

    def end_line(self) -> None:
        if self.line_open:
            self.out.write("\n")
            self.line_open = False


class _ToolEcho:
    """Executor hook that shows each tool call and its result."""

    def __init__(self, printer: _Printer) -> None:
        self.printer = printer

    def before_action(self, executor: object, message: AgentMessage, session_id: object) -> None:
        call = message.content
        self.printer.line(f"[tool call] {getattr(call, 'name', '?')} {getattr(call, 'parameters', '')}")

    def after_action(self, executor: object, message: AgentMessage, session_id: object) -> None:
        from .agents.aggregator.default_aggregator import content_to_text

        self.printer.line(f"[tool result] {content_to_text(message.content)}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="plait", description="Run plait agents from the command line.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--model", help="model name on the server, or a .gguf path for the embedded model")
    common.add_argument("--api-base", help="base URL of an OpenAI-compatible server (default: embedded model)")
    common.add_argument(
        "--api-key-env",
        metavar="NAME",
        default="OPENAI_API_KEY",
        help="environment variable holding the API key (default: OPENAI_API_KEY); keys never go on a command line",
    )
    common.add_argument("--api-key", help=argparse.SUPPRESS)  # refused with a pointer to --api-key-env
    common.add_argument("--tools", default="Calculator", help="comma-separated tool names (default: Calculator)")
    common.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="SERVER",
        help="an MCP server whose tools to add: a command line (stdio) or an http(s) URL; repeatable",
    )
    common.add_argument("--system", default=DEFAULT_SYSTEM, help="system prompt")
    common.add_argument("--session", help="JSON file to load the conversation from and save it to")
    common.add_argument("--max-turn", type=int, default=3, help="tool rounds before a final answer is forced")
    common.add_argument("--max-new-tokens", type=int, default=256)
    common.add_argument("--temperature", type=float, default=0.0)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", parents=[common], help="answer one question and exit")
    run.add_argument("question")
    sub.add_parser("chat", parents=[common], help="interactive chat (REPL)")
    serve = sub.add_parser("serve", parents=[common], help="serve the agent over HTTP (OpenAI-compatible too)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8090, help="port to listen on (default: 8090)")
    serve.add_argument("--store", metavar="DB", help="keep every session in this SQLite file (survives restarts)")
    serve.add_argument(
        "--token-file",
        metavar="FILE",
        help="bearer token(s) clients must send, mode 0600: one token, or 'name:token' lines, one tenant each "
        "(default: $PLAIT_SERVER_TOKEN); required off loopback",
    )
    serve.add_argument(
        "--insecure", action="store_true", help="serve a non-loopback address without a token (behind an auth proxy)"
    )
    web = sub.add_parser("web", help="serve the web demo (needs the 'web' extra)")
    web.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    web.add_argument("--port", type=int, default=8501, help="port to listen on (default: 8501)")
    web.add_argument("--api-base", help="preselect this OpenAI-compatible server (default: embedded model)")
    web.add_argument("--model", help="model name on the server, or a .gguf path for the embedded model")
    web.add_argument("--agent", choices=["function_calling", "internlm2", "react"], help="agent type at start")
    web.add_argument("--tools", help="comma-separated plugins selected at start (default: Calculator)")
    web.add_argument(
        "--tools-from", action="append", default=[], metavar="MODULE", help="module or .py file with extra tools"
    )
    web.add_argument("--work-dir", help="where session folders (uploads, images) are kept")
    web.add_argument(
        "--mcp", action="append", default=[], metavar="SERVER", help="an MCP server offered at start; repeatable"
    )
    return parser


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


def _setup(args: argparse.Namespace, printer: _Printer) -> StreamingFunctionCallingAgent:
    llm = build_llm(
        args.model, args.api_base, _api_key(args), max_new_tokens=args.max_new_tokens, temperature=args.temperature
    )
    agent = build_agent(llm, args.tools.split(","), args.system, args.max_turn, args.mcp)
    agent.executor.register_hook(_ToolEcho(printer))
    if args.session and os.path.exists(args.session):
        agent.load_state(args.session)
    return agent


def _ask(agent: StreamingFunctionCallingAgent, question: str, args: argparse.Namespace, printer: _Printer) -> None:
    from .schema import AgentStatusCode

    for chunk in agent(question):
        if chunk.stream_state == AgentStatusCode.END:
            printer.answer(str(chunk.content))
        elif isinstance(chunk.content, str):
            printer.text(chunk.content)
    if args.session:
        agent.save_state(args.session)


def _chat(agent: StreamingFunctionCallingAgent, args: argparse.Namespace, stdin: TextIO, printer: _Printer) -> None:
    out = printer.out
    out.write("plait chat: /reset, /save FILE, /load FILE, /tools, /quit\n")
    while True:
        out.write("> ")
        out.flush()
        line = stdin.readline()
        if not line:
            break
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            break
        if text == "/reset":
            agent.reset()
            out.write("(conversation cleared)\n")
        elif text == "/tools":
            out.write(", ".join(agent.executor.keys()) + "\n")
        elif text.startswith(("/save ", "/load ")):
            command, path = text.split(maxsplit=1)
            if command == "/save":
                agent.save_state(path)
            else:
                agent.load_state(path)
            out.write(f"({'saved to' if command == '/save' else 'loaded from'} {path})\n")
        else:
            _ask(agent, text, args, printer)


def main(argv: Sequence[str] | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """Entry point of the ``plait`` console script; returns the exit status."""
    out = stdout or sys.stdout
    args = _parser().parse_args(argv)
    try:
        if args.command == "web":
            return _web(args)
        if args.command == "serve":
            from .distributed.http_serve.app import AgentAPIServer, server_token

            token = server_token(args.token_file)
            agent = _setup(args, _Printer(sys.stderr))
            if args.store:
                from .memory.session_store import SessionStore

                SessionStore(args.store).attach(agent)
            server = AgentAPIServer(agent, args.host, args.port, token=token, insecure=args.insecure)
            server.serve_forever()
            return 0
        printer = _Printer(out)
        agent = _setup(args, printer)
        if args.command == "run":
            _ask(agent, args.question, args, printer)
        else:
            _chat(agent, args, stdin or sys.stdin, printer)
    except PlaitError as exc:
        sys.stderr.write(f"plait: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
