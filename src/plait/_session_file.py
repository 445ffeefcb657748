"""The conversation file of ``plait run --session FILE`` and ``plait chat --session FILE``.

The file is checked before anything runs (a directory that does not exist, a file that
cannot be read or written, or one that is not a saved conversation: one line, exit status
2), loading it says so (``continuing N messages from FILE``), every answer saves it, and
``/reset`` in the chat clears it along with the conversation.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TextIO

from .exceptions import PlaitError, UserError

__all__ = ["SessionFile"]


class SessionFile:
    """A conversation kept in a JSON file between runs (the agent's `save_state` format).

    Args:
        path: The file; it need not exist yet, but its directory must, and be writable.

    Raises:
        UserError: The file cannot work (see the module docstring), before anything runs.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        target = Path(path)
        if target.is_dir():
            raise UserError(f"--session {path}: is a directory; give a file name")
        folder = target.parent
        if not folder.is_dir():
            raise UserError(f"--session {path}: the directory {str(folder)!r} does not exist")
        writable = os.access(target, os.W_OK) if target.exists() else os.access(folder, os.W_OK | os.X_OK)
        if not writable:
            raise UserError(f"--session {path}: cannot write there (permission denied)")

    def load(self, agent: Any, err: TextIO) -> int:
        """Load the conversation into `agent` when the file exists; says how many messages on `err`.

        Returns:
            The number of messages loaded (0: no file yet).

        Raises:
            UserError: The file cannot be read, is not JSON, or not a conversation saved by plait.
        """
        if not os.path.exists(self.path):
            return 0
        try:
            agent.load_state(self.path)
        except json.JSONDecodeError as exc:
            raise UserError(f"--session {self.path}: not a saved conversation (bad JSON: {exc})") from None
        except UnicodeDecodeError:
            raise UserError(f"--session {self.path}: not a saved conversation (not UTF-8 text)") from None
        except OSError as exc:
            raise UserError(f"--session {self.path}: cannot read it ({exc.strerror or exc})") from None
        except (PlaitError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise UserError(f"--session {self.path}: not a conversation saved by plait ({exc})") from None
        count = len(agent.memory.get_memory(0)) if getattr(agent, "memory", None) is not None else 0
        err.write(f"plait: continuing {count} messages from {self.path}\n")
        return count

    def save(self, agent: Any) -> None:
        """Write `agent`'s conversation to the file.

        Raises:
            UserError: It could not be written (the disk is full, the directory went away...).
        """
        try:
            agent.save_state(self.path)
        except OSError as exc:
            raise UserError(f"could not save the conversation to {self.path}: {exc.strerror or exc}") from None
