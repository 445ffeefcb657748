"""`ChatSession`: everything one browser session owns, kept in its streamlit session state.

Each browser session gets its own session id, work directory, model, agent (so its own
memory and tool state: tools keep per-session state under that id) and transcript; nothing
is shared between sessions except the embedded model's engine, which is stateless.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..exceptions import PlaitError
from .events import ApprovalBlock, ChatEntry, Event, Failed, NoticeBlock, TextBlock, apply_event
from .runner import Turn, build_agent, build_llm, resume_tool_agent, run_internlm2, run_tool_agent
from .settings import AGENT_KINDS, Settings

if TYPE_CHECKING:
    from ..actions.mcp import MCPToolkit
    from ..llms.base_llm import BaseLLM

__all__ = ["ChatSession", "compose_message", "work_root"]


def work_root() -> str:
    """Where session work directories live: ``$PLAIT_WEB_WORK_DIR``, else ``<tmp>/plait-web``."""
    return os.environ.get("PLAIT_WEB_WORK_DIR") or os.path.join(tempfile.gettempdir(), "plait-web")


def compose_message(text: str, files: list[str]) -> str:
    """The message the agent receives: the user's text, then where the uploaded files were saved."""
    if not files:
        return text
    listing = "\n".join(f"- {path}" for path in files)
    return f"{text}\n\n(The user uploaded these files; they are saved on disk at:\n{listing})"


@dataclass
class ChatSession:
    """One browser session's conversation, agent and files.

    Attributes:
        session_id: The id the agent's memory and tools use for this session.
        transcript: What the chat pane shows (finished and running answers).
        history: The conversation in the InternLM2 agent's (old-API) form.
        turn: The answer being produced, if any.
        queued: Messages waiting for an answer, with the files uploaded for them (see `submit`).
        uploads: Files uploaded since the last message: ``{upload id: saved path}``.
        upload_epoch: Changes after each message, so the page shows an empty uploader.
    """

    session_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    transcript: list[ChatEntry] = field(default_factory=list)
    history: list[dict[str, object]] = field(default_factory=list)
    turn: Turn | None = None
    queued: list[tuple[str, list[str]]] = field(default_factory=list)
    uploads: dict[str, str] = field(default_factory=dict)
    upload_epoch: int = 0
    agent: Any = None
    settings: Settings | None = None
    _llm: BaseLLM | None = None
    _llm_key: tuple[str, str, str, int, float] | None = None
    _mcp: dict[str, MCPToolkit] = field(default_factory=dict)  # MCP toolkits by server, kept across rebuilds

    @property
    def work_dir(self) -> str:
        """This session's directory (uploads, interpreter images), created on demand, readable by sandboxes."""
        path = os.path.join(work_root(), self.session_id)
        os.makedirs(path, mode=0o755, exist_ok=True)
        os.chmod(path, 0o755)
        return path

    def save_upload(self, upload_id: str, name: str, data: bytes) -> str:
        """Save an uploaded file into the work directory (once per upload id); return its path."""
        saved = self.uploads.get(upload_id)
        if saved is not None:
            return saved
        safe = os.path.basename(name.replace("\\", "/")).strip() or "upload"
        path = os.path.join(self.work_dir, safe)
        stem, ext = os.path.splitext(path)
        counter = 1
        while os.path.exists(path):
            path, counter = f"{stem}-{counter}{ext}", counter + 1
        with open(path, "wb") as fh:
            fh.write(data)
        os.chmod(path, 0o644)
        self.uploads[upload_id] = path
        return path

    def configure(self, settings: Settings) -> list[str]:
        """Make the agent match `settings` (rebuilt only when they changed); return problems to show.

        The model is kept unless its own settings changed. A rebuilt agent of the same type
        keeps the conversation's memory; a different type starts without it.
        """
        if self.agent is not None and settings == self.settings:
            return []
        if self._llm is None or self._llm_key != settings.model_key():
            self._llm, self._llm_key = build_llm(settings), settings.model_key()
        previous, previous_settings = self.agent, self.settings
        for spec in [spec for spec in self._mcp if spec not in settings.mcp_servers]:
            self._mcp.pop(spec).close()  # a server taken off the list stops now
        agent, problems = build_agent(settings, self._llm, self.work_dir, self._mcp)
        if previous is not None and previous_settings is not None:
            if previous_settings.agent == settings.agent:
                if settings.agent != "internlm2":
                    agent.load_state_dict(previous.state_dict(self.session_id), self.session_id, strict=False)
            elif self.transcript:
                problems.append(
                    f"the agent type changed to {AGENT_KINDS[settings.agent]}: it does not see the messages above"
                )
                self.history = []
        self.agent, self.settings = agent, settings
        return problems

    def submit(self, text: str) -> None:
        """Queue a message with the files uploaded since the last one (the uploader starts empty again)."""
        self.queued.append((text, list(self.uploads.values())))
        self.uploads, self.upload_epoch = {}, self.upload_epoch + 1

    def send(self, text: str, files: list[str], settings: Settings) -> ChatEntry:
        """Add the user's message (with its files) and start answering it; returns the answer's (live) entry."""
        self.transcript.append(
            ChatEntry("user", [TextBlock(text)], files=[os.path.basename(f) for f in files], done=True)
        )
        answer = ChatEntry("assistant")
        self.transcript.append(answer)
        try:
            problems = self.configure(settings)
        except PlaitError as exc:
            apply_event(answer, Failed(f"could not set up the agent: {type(exc).__name__}: {exc}"))
            return answer
        for problem in problems:
            answer.blocks.append(NoticeBlock(problem))
        message = compose_message(text, files)
        agent, session_id = self.agent, self.session_id
        if settings.agent == "internlm2":
            history = self.history
            history.append({"role": "user", "content": message})

            def forget_message() -> None:
                history.pop()

            self.turn = Turn(lambda emit: run_internlm2(agent, history, session_id, emit), on_failure=forget_message)
        else:
            self.turn = Turn(lambda emit: run_tool_agent(agent, message, session_id, emit))
        self.turn.start()
        return answer

    def pending_approval(self) -> ApprovalBlock | None:
        """The tool calls the last answer waits on, while any is undecided (None: nothing waits)."""
        if self.turn is not None or not self.transcript:
            return None
        blocks = [b for b in self.transcript[-1].blocks if isinstance(b, ApprovalBlock)]
        return blocks[-1] if blocks and blocks[-1].waiting else None

    def decide(self, call_id: str, approved: object) -> ChatEntry | None:
        """Record the user's decision on a waiting call; once every call is decided, the run goes on.

        `approved` is True or False, or for a call that asks a question, the answer (`ApprovalBlock`).

        Returns the new answer's (live) entry when the run was resumed, else None.
        """
        block = self.pending_approval()
        if block is None or call_id not in {call.id for call in block.waiting}:
            return None
        block.decisions[call_id] = approved
        if block.waiting:
            return None
        answer = ChatEntry("assistant")
        self.transcript.append(answer)
        agent, session_id, decisions = self.agent, self.session_id, dict(block.decisions)
        self.turn = Turn(lambda emit: resume_tool_agent(agent, decisions, session_id, emit))
        self.turn.start()
        return answer

    def receive(self, event: Event) -> ChatEntry:
        """Apply an event of the running answer to its entry (the last one); returns the entry."""
        entry = self.transcript[-1]
        apply_event(entry, event)
        if entry.done:
            self.turn = None
        return entry

    def clear(self) -> None:
        """Forget the conversation: new session id (fresh memory and tool state), empty transcript."""
        old_dir = os.path.join(work_root(), self.session_id)
        self._close_tools()
        for toolkit in self._mcp.values():
            toolkit.close()  # its server restarts, empty, on the next call
        self.session_id = uuid.uuid4().hex
        self.transcript, self.history, self.queued, self.uploads = [], [], [], {}
        self.turn = None
        self.upload_epoch += 1
        shutil.rmtree(old_dir, ignore_errors=True)

    def _close_tools(self) -> None:
        agent = self.agent
        executors = [getattr(agent, name, None) for name in ("executor", "plugin_executor", "interpreter_executor")]
        for executor in executors:
            for action in getattr(executor, "actions", {}).values() if executor is not None else ():
                close = getattr(action, "close_session", None)
                if close is not None:
                    close(self.session_id)
