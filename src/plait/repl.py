"""What ``plait run`` and ``plait chat`` show: streamed answers, tool lines, and the chat's own commands.

`Printer` writes a streamed reply as deltas and tool events as whole lines; `ask` runs one
question through the agent and shows it (marking an answer cut at the token limit, and an
answer interrupted with Ctrl-C, which stays in the conversation marked as interrupted);
`chat` is the REPL: line editing and a history file (readline, where the terminal has it),
``/help`` and the other commands answered locally, their errors reported as messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .events import (
    Final,
    ReasoningDelta,
    StreamEvent,
    SubAgentStarted,
    TextDelta,
    ToolCallStarted,
    ToolResult,
    agent_name,
)
from .exceptions import PlaitError
from .hooks.usage import UsageMeter
from .llms._repetition import REPETITION
from .schema import AgentMessage, PendingCall

if TYPE_CHECKING:
    from ._session_file import SessionFile

__all__ = ["COMMANDS", "Printer", "ToolEcho", "ask", "chat", "history_file"]

COMMANDS = {
    "/help": "show the commands",
    "/reset": "forget the conversation (and clear the --session file)",
    "/save FILE": "save the conversation (and agent state) to FILE",
    "/load FILE": "load a conversation saved with /save",
    "/tools": "list the agent's tools",
    "/context": "how much of the model's context the last request used",
    "/think on|off": "show the model's reasoning after each answer (off: one line says it reasoned)",
    "/quit": "leave (also /exit or Ctrl-D)",
}

INTERRUPTED = " [interrupted]"
DISCARDED = " [discarded: the model tried again]"
"""Ends streamed text that turned out not to be the answer (the model's reply was retried)."""

logger = logging.getLogger(__name__)


def history_file() -> Path:
    """Where the chat's input history is kept (``$PLAIT_HISTORY``, else ``~/.local/state/plait/history``)."""
    explicit = os.environ.get("PLAIT_HISTORY")
    if explicit:
        return Path(explicit)
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state / "plait" / "history"


class Printer:
    """Writes streamed replies as deltas and tool events as whole lines, never mixing the two on a line."""

    STATUS = "… thinking"

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.shown = ""  # the current reply's text already written
        self.line_open = False
        self.status_shown = False
        self.speaker = ""  # the agent asked: its text is the answer; a sub-agent's is announced, not shown
        self.show_reasoning = False  # /think on: the model's reasoning after the answer, dimmed
        self.reasoning = ""

    def event(self, event: StreamEvent) -> Final | None:
        """Show one event of a run (see `plait.events`); the `Final` event is returned."""
        if isinstance(event, TextDelta):
            if event.agent == self.speaker or not self.speaker:
                self.text(event.text)
        elif isinstance(event, ReasoningDelta):
            self.reasoning += event.delta
        elif isinstance(event, ToolCallStarted):
            self.line(f"[tool call] {event.name} {event.arguments}")
        elif isinstance(event, ToolResult):
            self.line(f"[tool result] {event.output}")
        elif isinstance(event, SubAgentStarted):
            self.notice(f"[{event.agent} working for {event.parent}]")
        elif isinstance(event, Final):
            if not event.paused:
                self.answer(str(event.message.content))
                self.thoughts()
            return event
        return None

    def thoughts(self) -> None:
        """The reply's reasoning, after the answer: dimmed when ``/think on``, else one line saying it is there."""
        reasoning, self.reasoning = self.reasoning.strip(), ""
        if not reasoning:
            return
        if self.show_reasoning:
            self.notice(f"thinking: {reasoning}")
        else:
            self.notice(f"(the model reasoned for {len(reasoning.split())} words: /think on shows it)")

    def waiting(self) -> None:
        """On a terminal, say the model is thinking until its first words (erased then)."""
        if not self.line_open and not self.status_shown and self.out.isatty():
            self.out.write(self.STATUS)
            self.out.flush()
            self.status_shown = True

    def _clear_status(self) -> None:
        if self.status_shown:
            self.out.write("\r" + " " * len(self.STATUS) + "\r")
            self.status_shown = False

    def text(self, text: str) -> None:
        """Show a reply's cumulative `text` (one that does not extend the last was retried: see `discard`)."""
        if not text.startswith(self.shown):
            self.discard()
        delta = text[len(self.shown) :]
        if delta:
            self._clear_status()
            self.out.write(delta)
            self.out.flush()
            self.line_open = True
        self.shown = text

    def answer(self, text: str) -> None:
        """Finish with the answer `text`: the rest of it when it was streamed, else whole (after `discard`)."""
        self._clear_status()
        if self.shown and text.startswith(self.shown):
            self.out.write(text[len(self.shown) :])
        else:
            self.discard()
            self.out.write(text)
        self.out.write("\n")
        self.out.flush()
        self.shown, self.line_open = "", False

    def line(self, text: str) -> None:
        """A line of its own (a tool event, a notice)."""
        self._clear_status()
        self.end_line()
        self.out.write(f"{text}\n")
        self.out.flush()
        self.shown = ""

    def notice(self, text: str) -> None:
        """A line about the conversation itself (dim on a terminal)."""
        self.line(f"\x1b[2m{text}\x1b[0m" if self.out.isatty() else text)

    def prompt(self) -> None:
        """Make room for a question to the user (the status erased, an open line closed)."""
        self._clear_status()
        self.end_line()
        self.shown = ""

    def discard(self) -> None:
        """Mark the text streamed so far as not the answer (the model's reply was retried) and start anew."""
        if self.shown and self.line_open:
            self.out.write(DISCARDED)
        self.end_line()
        self.shown = ""

    def end_line(self) -> None:
        """Close a line a streamed reply left open."""
        if self.line_open:
            self.out.write("\n")
            self.line_open = False


class ToolEcho:
    """Executor hook that shows each tool call and its result (with its session, for a server's console)."""

    def __init__(self, printer: Printer, with_session: bool = False) -> None:
        self.printer = printer
        self.with_session = with_session

    def _tag(self, kind: str, session_id: object) -> str:
        return f"[{kind} session={session_id}]" if self.with_session else f"[{kind}]"

    def before_action(self, executor: object, message: AgentMessage, session_id: object) -> None:
        """``[tool call] name {arguments}``."""
        call = message.content
        name, parameters = getattr(call, "name", "?"), getattr(call, "parameters", "")
        self.printer.line(f"{self._tag('tool call', session_id)} {name} {parameters}")

    def after_action(self, executor: object, message: AgentMessage, session_id: object) -> None:
        """``[tool result] text``."""
        from .agents.aggregator.default_aggregator import content_to_text

        self.printer.line(f"{self._tag('tool result', session_id)} {content_to_text(message.content)}")


Approve = Callable[[PendingCall], "bool | str | dict[str, Any]"]


def approval_prompt(stdin: TextIO, printer: Printer) -> Approve:
    """What ``plait chat`` / ``plait run`` ask: ``Run Transfer(to='bob', amount=5)? [y/N/reason]``.

    ``y``/``yes`` runs the call; an empty answer, ``n``/``no`` or the end of input refuses it;
    any other text refuses it and is told to the model as the reason. A running call whose
    tool asks a question (an MCP server's elicitation, `PendingCall.question`) is answered
    field by field (`answer_question`).
    """

    def read(prompt: str) -> str | None:
        printer.prompt()
        try:
            if stdin.isatty() and printer.out.isatty():
                return input(prompt)
            printer.out.write(prompt)
            printer.out.flush()
            line = stdin.readline()
            return line if line else None
        except (EOFError, KeyboardInterrupt):  # no answer, or Ctrl-C
            CTRL_C.pending = False
            printer.out.write("\n")
            return None

    def approve(call: PendingCall) -> bool | str | dict[str, Any]:
        arguments = ", ".join(f"{name}={value!r}" for name, value in call.arguments.items())
        if call.question is not None:
            return answer_question(call.question, f"{call.name}({arguments})", read)
        answer = (read(f"Run {call.name}({arguments})? [y/N/reason] ") or "").strip()
        if answer.lower() in ("y", "yes"):
            return True
        return False if answer.lower() in ("", "n", "no") else answer

    return approve


def answer_question(question: dict[str, Any], call: str, read: Callable[[str], str | None]) -> str | dict[str, Any]:
    """A person's answer to a tool's question, asked with `read`: ``'decline'``, ``'cancel'`` or the accepted fields.

    ``y`` answers the fields one by one (an optional one left empty is left out, a value that
    does not fit is asked again); an empty answer or ``n`` declines; ``c`` or the end of input cancels.
    """
    server = question.get("server") or "the tool"
    choice = read(f"{server} asks, while {call} runs: {question.get('message', '')}\nAnswer? [y/N/c(ancel)] ")
    if choice is None or choice.strip().lower() in ("c", "cancel"):
        return "cancel"
    if choice.strip().lower() not in ("y", "yes"):
        return "decline"
    schema = question.get("requested_schema") or {}
    required = set(schema.get("required") or [])
    content: dict[str, Any] = {}
    for name, spec in (schema.get("properties") or {}).items():
        kind = str(spec.get("type", "string"))
        options = spec.get("enum") or (spec.get("items") or {}).get("enum")
        hint = f"one of {', '.join(map(str, options))}" if options else kind
        label = f"  {spec.get('title') or name} ({hint}{'' if name in required else ', optional'}): "
        while True:
            text = read(label)
            if text is None:
                return "cancel"
            text = text.strip()
            if not text and name not in required:
                break
            value = _field_value(text, kind)
            if value is not None and (not options or kind == "array" or value in options):
                content[name] = value
                break
    return {"action": "accept", "content": content}


def _field_value(text: str, kind: str) -> object:
    """`text` as a value of JSON type `kind` (None: it is not one)."""
    if kind == "boolean":
        return {"y": True, "yes": True, "true": True, "n": False, "no": False, "false": False}.get(text.lower())
    if kind in ("integer", "number"):
        try:
            return int(text) if kind == "integer" else float(text)
        except ValueError:
            return None
    if kind == "array":
        return [part.strip() for part in text.split(",") if part.strip()]
    return text if text else None


def ask(
    agent: Any,
    question: str,
    printer: Printer,
    meter: UsageMeter,
    max_new_tokens: int,
    approve: Approve | None = None,
    **kwargs: object,
) -> None:
    """Ask `agent` (any agent, sync or async) `question` and show its events as they come (`plait.events`).

    An answer the model cut at its token limit ends with ``[cut at N tokens]``. A tool call
    that needs approval is put to `approve` (refused without one) and the run resumed. On
    Ctrl-C the agent rolls its turn back; the question and what was shown of the answer are
    then added to its memory, marked as interrupted, and `KeyboardInterrupt` is raised again.
    """
    meter.take(0)
    printer.waiting()
    printer.speaker = agent_name(agent)
    events: Any = agent.stream_events(question, **kwargs)
    try:
        while events is not None:
            final = _show(events, printer)
            events = None
            if final is not None and final.paused:
                decisions = {call.id: approve(call) if approve else False for call in final.message.content}
                printer.waiting()
                events = agent.resume_events(decisions, **kwargs)
    except KeyboardInterrupt:
        CTRL_C.pending = False
        partial = printer.shown
        printer.line(INTERRUPTED.strip())
        try:
            if isinstance(events, Iterator):
                close = getattr(events, "close", None)
                if close is not None:
                    close()  # the agent rolls its turn back now, before the interrupted one is added
        except Exception as exc:  # the stop itself failed: the turn may not have been rolled back
            logger.warning("stopping the answer failed: %s", exc)
            raise KeyboardInterrupt from exc
        memory = getattr(agent, "memory", None)  # None for an agent built with memory=None
        if memory is not None:
            memory.add([question, AgentMessage(sender=agent.name, content=partial + INTERRUPTED)], 0)
        raise
    finish = meter.take(0).finish_reason
    if finish == "length":
        printer.line(f"[cut at {max_new_tokens} tokens: raise --max-new-tokens for longer answers]")
    elif finish == REPETITION:
        printer.line("[stopped: the model kept repeating itself]")


def _show(events: Iterator[StreamEvent] | AsyncIterator[StreamEvent], printer: Printer) -> Final | None:
    """Show a run's events (an async agent's on an event loop of their own); its `Final` event."""
    if isinstance(events, AsyncIterator):
        with CTRL_C.asyncio_owns():
            return asyncio.run(_ashow(events, printer))
    final = None
    for event in events:
        CTRL_C.check()
        final = printer.event(event) or final
    return final


async def _ashow(events: AsyncIterator[StreamEvent], printer: Printer) -> Final | None:
    final = None
    async for event in events:
        final = printer.event(event) or final
    return final


def _readline(history: Path) -> Callable[[], None]:
    """Line editing and a persistent history when the terminal has readline; returns what saves it."""
    try:
        import readline
    except ImportError:  # not on every platform
        return lambda: None
    with contextlib.suppress(OSError):
        readline.read_history_file(history)
    readline.set_history_length(1000)

    def save() -> None:
        with contextlib.suppress(OSError):
            history.parent.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(history)

    return save


def chat(
    agent: Any, stdin: TextIO, printer: Printer, turn: Callable[[str], None], session: SessionFile | None = None
) -> None:
    """The REPL: read lines, answer commands locally, send everything else to `turn`.

    Ctrl-C during an answer stops it and returns to the prompt (the conversation kept);
    Ctrl-C at the prompt clears the line; Ctrl-D or ``/quit`` leaves. With a `session`
    file, ``/reset`` clears it too.
    """
    out = printer.out
    interactive = stdin.isatty() and out.isatty()
    save_history = _readline(history_file()) if interactive else (lambda: None)
    restore = CTRL_C.install() if interactive else (lambda: None)
    out.write("plait chat: /help for the commands\n")
    try:
        while True:
            try:
                text = _read(stdin, out, interactive)
            except KeyboardInterrupt:
                CTRL_C.pending = False
                out.write("\n")
                continue
            if text is None or text in ("/quit", "/exit"):
                break
            if not text:
                continue
            try:
                if text.startswith("/"):
                    out.write(_command(agent, text, session, printer) + "\n")
                else:
                    turn(text)
            except KeyboardInterrupt:
                CTRL_C.pending = False
                continue  # the answer was stopped; the prompt comes back
            except (PlaitError, OSError) as exc:
                printer.line(f"error: {exc}")
    finally:
        restore()
        save_history()


class _CtrlC:
    """The REPL's SIGINT handler: raises `KeyboardInterrupt` and remembers that it did.

    A `KeyboardInterrupt` raised while a finalizer runs (``__del__``, a weakref callback) is
    printed and dropped by Python; `pending` is checked between a run's events, so a Ctrl-C
    stops the answer even then.
    """

    def __init__(self) -> None:
        self.pending = False

    def __call__(self, signum: int, frame: object) -> None:
        self.pending = True
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raise `KeyboardInterrupt` if a Ctrl-C came and was not handled yet."""
        if self.pending:
            raise KeyboardInterrupt

    def install(self) -> Callable[[], None]:
        """Take SIGINT (on a terminal: also when this process was started ignoring it); returns the undo.

        A shell starts background jobs with SIGINT ignored, and Python then leaves it ignored;
        the REPL's Ctrl-C (stop the answer, keep the conversation) must work wherever it runs
        on a terminal.
        """
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        before = signal.getsignal(signal.SIGINT)
        if before not in (signal.default_int_handler, signal.SIG_IGN, signal.SIG_DFL):
            return lambda: None  # the embedding program handles Ctrl-C its own way
        signal.signal(signal.SIGINT, self)

        def restore() -> None:
            signal.signal(signal.SIGINT, before)

        return restore

    @contextlib.contextmanager
    def asyncio_owns(self) -> Iterator[None]:
        """While an event loop runs: Python's own handler, which ``asyncio.run`` replaces with its own."""
        if signal.getsignal(signal.SIGINT) is not self:
            yield
            return
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, self)


CTRL_C = _CtrlC()


def _read(stdin: TextIO, out: TextIO, interactive: bool) -> str | None:
    if interactive:
        try:
            return input("> ").strip()
        except EOFError:
            return None
    out.write("> ")
    out.flush()
    line = stdin.readline()
    return line.strip() if line else None


def _context_report(policy: Any, summary: Any = None) -> str:
    """What ``/context`` says: the last request against the budget, what it held, how often history was shaped."""
    if policy is None:
        return "no context policy: the whole conversation is sent every time (--context auto to change that)"
    if 0 not in policy.last:
        return f"context policy: {policy.policy}; no request yet"
    used, budget, window = policy.last[0]
    shaped = f"history trimmed {policy.trimmed.get(0, 0)} time(s)"
    if policy.policy == "summarise":
        shaped = f"older turns summarised {policy.summarised.get(0, 0)} time(s), {shaped}"
    sent, made_of = policy.sent.get(0, (0, 0))
    held = f"{sent} of {made_of} messages"
    if summary is not None:
        held += f", with a summary of the first {summary.covers}: {summary.text[:160]!r}"
    return (
        f"last request: {used} tokens of {budget} available (context window {window}, the rest kept for the reply); "
        f"it held {held}; policy {policy.policy}, {shaped}"
    )


def _command(agent: Any, text: str, session: SessionFile | None = None, printer: Printer | None = None) -> str:
    """Run a chat command; its reply (errors included) as text."""
    command, _, argument = text.partition(" ")
    argument = argument.strip()
    if command == "/think" and printer is not None:
        if argument not in ("on", "off"):
            return f"/think {'on' if printer.show_reasoning else 'off'}: say /think on or /think off"
        printer.show_reasoning = argument == "on"
        return f"(reasoning {'shown after each answer' if printer.show_reasoning else 'hidden'})"
    if command == "/help":
        return "\n".join(f"  {name:<12} {what}" for name, what in COMMANDS.items())
    if command == "/reset":
        agent.reset()
        if session is None:
            return "(conversation cleared)"
        session.save(agent)  # the next run must not continue the forgotten conversation
        return f"(conversation cleared, and {session.path})"
    if command == "/tools":
        executor = getattr(agent, "executor", None)  # a user's agent (--agent) may hold no tools
        return ", ".join(executor.keys()) if executor is not None and len(executor.keys()) else "(no tools)"
    if command == "/context":
        memory = agent.memory.get(0) if getattr(agent, "memory", None) is not None else None
        return _context_report(getattr(agent, "context_policy", None), getattr(memory, "summary", None))
    if command in ("/save", "/load"):
        if not argument:
            return f"{command} needs a file name: {command} FILE"
        try:
            if command == "/save":
                agent.save_state(argument)
                return f"(saved to {argument})"
            agent.load_state(argument)
            return f"(loaded from {argument})"
        except FileNotFoundError:
            return f"no such file: {argument}"
        except (OSError, ValueError, PlaitError) as exc:
            return f"could not {command[1:]} {argument}: {exc}"
    return f"unknown command {command}; /help lists the commands"
