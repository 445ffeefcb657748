"""Joining a model's byte chunks into one verified file (private; `plait.llms.catalogue` uses it).

`join` writes the chunks, in order, to a temporary file next to the destination, hashing
them as they go; only a file of the pinned size and sha256 is synced and renamed into
place, so no reader ever sees a partial or wrong file. A process-wide lock on the folder
(``flock``; none on Windows, where unique temporary names alone keep joins apart) makes
a second process wait for the first and then take its file, and lets the holder remove
the temporary files of joins that were killed.

A joined file gets a small marker beside it (``FILE.verified``: size, mtime and sha256),
so later uses check two ``stat`` results instead of hashing a gigabyte again
(`is_verified`); a file whose marker is missing or stale is hashed once more.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

if sys.platform != "win32":
    import fcntl

__all__ = ["JoinMismatch", "file_sha256", "is_verified", "join"]

_CHUNK = 4 << 20
_TEMP_SUFFIX = ".part"


class JoinMismatch(Exception):
    """The chunks do not make the pinned file; nothing was left behind.

    Attributes:
        size: The bytes the chunks hold together.
        sha256: Their hash.
    """

    def __init__(self, size: int, sha256: str) -> None:
        super().__init__(f"{size} bytes with sha256 {sha256}")
        self.size = size
        self.sha256 = sha256


@dataclass(frozen=True)
class _Marker:
    size: int
    mtime_ns: int
    sha256: str


def _marker_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _read_marker(path: Path) -> _Marker | None:
    try:
        data = json.loads(_marker_path(path).read_text("utf-8"))
        return _Marker(int(data["size"]), int(data["mtime_ns"]), str(data["sha256"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_marker(path: Path, sha256: str) -> None:
    stat = path.stat()
    body = json.dumps({"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256})
    marker = _marker_path(path)
    temp = marker.with_name(f".{marker.name}.{os.getpid()}{_TEMP_SUFFIX}")
    temp.write_text(body, "utf-8")
    os.replace(temp, marker)


def is_verified(path: Path, size: int, sha256: str) -> bool:
    """Whether `path` is the pinned file by its marker: same size, mtime and hash as when it was checked."""
    marker = _read_marker(path)
    try:
        stat = path.stat()
    except OSError:
        return False
    return marker == _Marker(size, stat.st_mtime_ns, sha256) and stat.st_size == size


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on `folder` (a no-op on Windows)."""
    if sys.platform == "win32":
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _remove_stale_temps(dest: Path) -> None:
    """Remove what killed joins of `dest` left (called holding the folder lock, so none is running)."""
    for leftover in dest.parent.glob(f".{dest.name}.*{_TEMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            leftover.unlink()


def _write_joined(parts: Sequence[Path], fd: int) -> tuple[int, str]:
    """Write `parts` to the open file `fd` (closing it), synced; their total size and sha256."""
    digest = hashlib.sha256()
    total = 0
    with open(fd, "wb") as out:
        for part in parts:
            with open(part, "rb") as fh:
                while block := fh.read(_CHUNK):
                    digest.update(block)
                    out.write(block)
                    total += len(block)
        out.flush()
        os.fsync(out.fileno())
    return total, digest.hexdigest()


def join(parts: Sequence[Path], dest: Path, size: int, sha256: str) -> bool:
    """Make `dest` the concatenation of `parts`, checked against `size` and `sha256`.

    Returns False when `dest` was already there and verified (nothing written), True when
    this call joined it. Safe to run in several processes at once: one joins, the others
    wait for it and take its file.

    Raises:
        JoinMismatch: The parts make another file (`dest` is untouched and no temporary file is left).
        OSError: Reading a part or writing the file failed (no temporary file is left).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    if is_verified(dest, size, sha256):
        return False
    with _folder_lock(dest.parent):
        if is_verified(dest, size, sha256):  # another process joined it while this one waited
            return False
        _remove_stale_temps(dest)
        if dest.is_file() and dest.stat().st_size == size and file_sha256(dest) == sha256:
            _write_marker(dest, sha256)  # a good file whose marker was lost (or is stale)
            return False
        fd, temp = tempfile.mkstemp(prefix=f".{dest.name}.{os.getpid()}.", suffix=_TEMP_SUFFIX, dir=dest.parent)
        try:
            total, digest = _write_joined(parts, fd)
            if total != size or digest != sha256:
                raise JoinMismatch(total, digest)
            os.chmod(temp, 0o644)
            os.replace(temp, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        _sync_folder(dest.parent)
        _write_marker(dest, sha256)
    return True


def _sync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable (POSIX; a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
