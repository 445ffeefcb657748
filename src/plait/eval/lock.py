"""`OutputLock`: one ``plait eval`` at a time per output folder.

Two runs on one folder would each see the same cases as not yet finished and both run them,
so ``results.jsonl`` would hold every case twice. A run therefore holds an exclusive
``fcntl.flock`` on ``OUT/eval.lock`` for as long as it runs; a second run on the folder fails
at once with a `UserError` naming the first one (its pid, host and start time, which the
holder writes into the file). The operating system releases the lock when its process ends,
however it ends, so a run that was killed never blocks the next one: the next run takes the
lock over and logs a note naming the run that did not release it (its details are still in
the file; a run that ends normally empties it).

The lock file is kept (never deleted): deleting it would let a run that opened the old file
and a run that made a new one both hold "the" lock.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import time
from datetime import datetime, timezone

from ..exceptions import UserError

__all__ = ["LOCK", "OutputLock"]

LOCK = "eval.lock"
"""The lock file's name in the output folder."""

_READ_TRIES = 50
"""How often a run that found the folder locked reads the holder's details before giving up on them."""

logger = logging.getLogger(__name__)


def _describe(text: str) -> str:
    """The holder's details as a phrase (``pid 123 on host, started 2026-01-02T03:04:05+00:00``)."""
    try:
        holder = json.loads(text)
        return f"pid {int(holder['pid'])} on {holder['host']}, started {holder['started']}"
    except (ValueError, TypeError, KeyError):
        return "details unknown"


def _gone(text: str) -> bool:
    """Whether the details name a process of this host that no longer runs (a killed run's leftovers)."""
    try:
        holder = json.loads(text)
        if holder["host"] != socket.gethostname():
            return False
        os.kill(int(holder["pid"]), 0)
    except ProcessLookupError:
        return True
    except (OSError, ValueError, TypeError, KeyError):
        return False
    return False


class OutputLock:
    """The exclusive lock of an output folder (see the module docstring); a context manager.

    Args:
        out_dir: The output folder (created when missing).

    Raises:
        UserError: Another run holds the folder, or the lock file cannot be made.
    """

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        folder = os.fspath(out_dir)
        self.path = os.path.join(folder, LOCK)
        try:
            os.makedirs(folder, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UserError(f"cannot lock {folder}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = self._holder()
            os.close(self._fd)
            self._fd = -1
            raise UserError(
                f"{folder} is in use by another plait eval ({holder}); wait for it to finish or use another --out"
            ) from None
        left = self._read()
        if left.strip():  # the last holder was killed before it could empty the file
            logger.warning(
                "took over the lock of %s from a run that ended without releasing it (%s)", folder, _describe(left)
            )
        mine = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, (json.dumps(mine) + "\n").encode(), 0)

    def _read(self) -> str:
        return os.pread(self._fd, 4096, 0).decode("utf-8", "replace")

    def _holder(self) -> str:
        """The details of the run holding the lock (it writes them just after it took the lock).

        Until it has, the file is empty or still names the killed run it took the lock over from.
        """
        for _ in range(_READ_TRIES):
            text = self._read()
            if text.endswith("\n") and not _gone(text):
                return _describe(text)
            time.sleep(0.02)
        return "details unknown"

    def release(self) -> None:
        """Empty the lock file (the run ended normally) and release the lock."""
        if self._fd >= 0:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # releases the flock
            self._fd = -1

    def __enter__(self) -> OutputLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
