"""``results.jsonl``: one complete JSON line per finished case, safe against kill -9, and ``summary.json``.

Each line is written by one ``os.write`` of the whole encoded line on a file opened with
``O_APPEND``: the kernel places it at the end in one piece, so a killed process leaves
either the whole line or none of it. A torn last line can only come from a short write (a
full disk, a power cut before the data reached it); `ResultsFile` cuts it away when it opens
the file again, and its case runs again.

A case has one result: where a file holds several lines for one case id (written by two runs
at once before runs took the folder's lock, or files joined by hand), the last complete line
counts, as the newest, and the others are ignored by every reader (`read_results`): the
summary, a rerun, the export.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ..exceptions import ParseError, UserError
from ..untrusted import loads
from .cases import case_key

__all__ = ["RESULTS", "SUMMARY", "ResultsFile", "read_results", "record_key", "write_json"]

RESULTS = "results.jsonl"
"""The results file's name in the output folder."""

SUMMARY = "summary.json"
"""The summary file's name in the output folder."""


def record_key(record: Mapping[str, Any]) -> str:
    """The key of a results record: its case's key, with ``#K`` for sample K of ``plait eval --samples``."""
    key = case_key(record.get("id"))
    sample = record.get("sample")
    return key if sample is None else f"{key}#{sample}"


def _line(record: Mapping[str, Any]) -> bytes:
    """`record` as one JSON line (values JSON cannot hold become their text)."""
    return (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode(
        "utf-8", "replace"
    )  # a lone surrogate becomes ?


class ResultsFile:
    """The results of one output folder: what is finished, and appending what finishes next.

    Args:
        out_dir: The output folder (created when missing).

    Attributes:
        records: The finished cases' records, in file order.
        path: The ``results.jsonl`` path.

    Raises:
        UserError: The folder cannot be made, or a complete line of the file is not a result.
    """

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.path = os.path.join(os.fspath(out_dir), RESULTS)
        try:
            os.makedirs(os.fspath(out_dir), exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise UserError(f"cannot write results to {self.path}: {exc.strerror or exc}") from None
        self.records: list[dict[str, Any]] = self._read()

    def _read(self) -> list[dict[str, Any]]:
        """The complete lines' records; a torn last line is cut off the file."""
        records, end, size = read_results(self.path)
        if end < size:  # a line without its newline was never finished
            os.ftruncate(self._fd, end)
        return records

    def finished(self) -> set[str]:
        """The keys (`record_key`) of the finished cases (and samples)."""
        return {record_key(record) for record in self.records}

    def append(self, record: Mapping[str, Any]) -> None:
        """Append a finished case's record: one write of the whole line.

        Raises:
            OSError: The line could not be written whole (it is cut away on the next open).
        """
        line = _line(record)
        written = os.write(self._fd, line)
        if written != len(line):
            raise OSError(f"short write to {self.path}: {written} of {len(line)} bytes")
        self.records.append(dict(record))

    def close(self) -> None:
        """Close the file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_results(path: str) -> tuple[list[dict[str, Any]], int, int]:
    """``(records, end, size)`` of a results file: one record per case (or sample), where complete lines end, its size.

    A case's record is its last complete line (see the module docstring), in the place of
    the case's first line. Bytes after `end` are a torn last line (never finished); nothing
    is changed on disk.

    Raises:
        UserError: A complete line that is not a result.
    """
    with open(path, "rb") as fh:
        data = fh.read()
    end = data.rfind(b"\n") + 1
    records: dict[str, dict[str, Any]] = {}  # case key -> its last record; keeps the first line's place
    for number, line in enumerate(data[:end].splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = loads(line)
        except ParseError as exc:
            raise UserError(f"{path} line {number} is not a result ({exc}); remove the line") from None
        if not isinstance(record, dict) or "id" not in record:
            raise UserError(f"{path} line {number} is not a result (no 'id'); remove the line")
        records[record_key(record)] = record
    return list(records.values()), end, len(data)


def write_json(path: str | os.PathLike[str], value: Mapping[str, Any]) -> None:
    """Write `value` as JSON to `path`, replacing the file in one step (a reader never sees half of it)."""
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(value, fh, ensure_ascii=False, indent=2, default=str)
        fh.write("\n")
    os.replace(tmp, path)
