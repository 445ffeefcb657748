"""One trajectory: the messages of one conversation with a model, in training form, with its tokens and reward.

A trajectory is what a trainer reads: the conversation as OpenAI chat messages (``system``,
``user``, ``assistant`` with ``tool_calls`` and ``reasoning_content``, ``tool``), the tools the
model was offered, and where a source could give them, each model turn's exact token ids and
log-probabilities. A reward and per-step outcomes say how it went.

Every source writes this one shape: the recording proxy (``plait record-proxy``), evaluation
runs (``plait eval``), and an agent's own runs. Every export reads it. Files are JSON Lines,
one trajectory per line, written whole by `TrajectoryFile` so that a killed process leaves
each line complete or absent.

A trajectory read from a file is untrusted input: `Trajectory.from_json` checks its shape and
raises `ParseError` naming what is wrong.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..exceptions import ParseError, UserError
from ..untrusted import loads

__all__ = ["FORMAT_VERSION", "StepOutcome", "Trajectory", "TrajectoryFile", "TurnTokens", "read_trajectories"]

FORMAT_VERSION = 1
"""The version written in each trajectory's ``version`` field."""


class TurnTokens(BaseModel):
    """The exact tokens of one model turn, as the engine or server saw them.

    Attributes:
        message: Index in `Trajectory.messages` of the assistant message this turn produced.
        prompt_ids: The prompt's token ids (the whole rendered prompt), when the source gave them.
        completion_ids: The sampled token ids, in order.
        logprobs: The log-probability of each sampled token (same length as `completion_ids`),
            when the source gave them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    message: int = Field(ge=0)
    prompt_ids: list[int] | None = None
    completion_ids: list[int]
    logprobs: list[float] | None = None

    @model_validator(mode="after")
    def _lengths(self) -> TurnTokens:
        if self.logprobs is not None and len(self.logprobs) != len(self.completion_ids):
            raise ValueError(f"logprobs has {len(self.logprobs)} values for {len(self.completion_ids)} completion ids")
        return self


class StepOutcome(BaseModel):
    """How one step went: a tool message's result, or a model turn the source judged.

    Attributes:
        message: Index in `Trajectory.messages` of the step's message.
        status: ``"ok"``, ``"tool_error"`` (the tool ran and failed, or its arguments were
            wrong), ``"refused"`` (an approval rule or a person refused the call), or
            ``"invalid"`` (the model's reply could not be used).
        reward: A per-step reward, when the source gives one.
        detail: A short reason, for people.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    message: int = Field(ge=0)
    status: Literal["ok", "tool_error", "refused", "invalid"] = "ok"
    reward: float | None = None
    detail: str | None = None


class Trajectory(BaseModel):
    """One conversation with a model, in training form (see the module docstring).

    Attributes:
        id: Unique within its file.
        messages: OpenAI chat messages, in order.
        tools: The OpenAI tool schemas offered (``{"type": "function", "function": {...}}``).
        tokens: Exact tokens per model turn; empty when the source gave none.
        reward: The trajectory's reward, when scored.
        outcomes: Per-step outcomes (tool errors are marked ``"tool_error"``).
        source: Where it came from: ``"proxy"``, ``"eval"`` or ``"run"``.
        model: The model name the requests named, when known.
        metadata: Source-specific facts (case id, sample number, seed, temperature, session id).
        version: The format version (`FORMAT_VERSION`).
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tokens: list[TurnTokens] = Field(default_factory=list)
    reward: float | None = None
    outcomes: list[StepOutcome] = Field(default_factory=list)
    source: Literal["proxy", "eval", "run"] = "run"
    model: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    version: int = FORMAT_VERSION

    @model_validator(mode="after")
    def _indices(self) -> Trajectory:
        count = len(self.messages)
        for index, message in enumerate(self.messages):
            if not isinstance(message.get("role"), str):
                raise ValueError(f"messages[{index}] has no role")
        for tokens in self.tokens:
            if tokens.message >= count or self.messages[tokens.message].get("role") != "assistant":
                raise ValueError(f"tokens for message {tokens.message}, which is not an assistant message")
        for outcome in self.outcomes:
            if outcome.message >= count:
                raise ValueError(f"outcome for message {outcome.message} of {count}")
        if self.version != FORMAT_VERSION:
            raise ValueError(f"trajectory format version {self.version}; this plait reads {FORMAT_VERSION}")
        return self

    @property
    def token_exact(self) -> bool:
        """Whether every assistant message has its exact tokens (otherwise the trajectory is text only)."""
        turns = {tokens.message for tokens in self.tokens}
        assistants = [i for i, m in enumerate(self.messages) if m.get("role") == "assistant"]
        return bool(assistants) and all(i in turns for i in assistants)

    def to_json(self) -> str:
        """One JSON line (no newline), with ``token_exact`` written out for readers of the file."""
        data = self.model_dump(mode="json")
        data["token_exact"] = self.token_exact
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str | bytes | Mapping[str, Any]) -> Trajectory:
        """A trajectory from a JSON line or its decoded mapping.

        Raises:
            ParseError: Not JSON, or not a trajectory (the message names the field).
        """
        data = loads(raw) if isinstance(raw, (str, bytes)) else dict(raw)
        if not isinstance(data, dict):
            raise ParseError("a trajectory is a JSON object")
        data = {key: value for key, value in data.items() if key != "token_exact"}
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "trajectory"
            raise ParseError(f"not a trajectory: {where}: {first['msg']}") from None


class TrajectoryFile:
    """Append trajectories to a JSON Lines file, one whole line per write (safe against kill -9).

    Args:
        path: The file (created when missing; a torn last line is cut away on open).

    Raises:
        UserError: The file cannot be opened.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise UserError(f"cannot write trajectories to {self.path}: {exc.strerror or exc}") from None
        with open(self.path, "rb") as fh:
            data = fh.read()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            os.ftruncate(self._fd, end)

    def append(self, trajectory: Trajectory) -> None:
        """Write one trajectory as one line.

        Raises:
            OSError: The line could not be written whole.
        """
        line = (trajectory.to_json() + "\n").encode("utf-8", "replace")
        written = os.write(self._fd, line)
        if written != len(line):
            raise OSError(f"short write to {self.path}: {written} of {len(line)} bytes")

    def close(self) -> None:
        """Close the file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> TrajectoryFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_trajectories(path: str | os.PathLike[str]) -> Iterator[Trajectory]:
    """The trajectories of a JSON Lines file, in order (a torn last line is skipped).

    Raises:
        UserError: A complete line is not a trajectory (names the line).
    """
    with open(path, "rb") as fh:
        data = fh.read()
    end = data.rfind(b"\n") + 1
    for number, line in enumerate(data[:end].splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield Trajectory.from_json(line)
        except ParseError as exc:
            raise UserError(f"{os.fspath(path)} line {number}: {exc}") from None
