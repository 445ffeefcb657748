"""What an evaluation shows while it runs: a progress bar with the pass rate, then a summary table.

On a terminal (and with ``rich`` installed) a live bar counts finished cases and shows the
pass rate so far; elsewhere (a pipe, a CI log) each finished case is one plain line. Either
way the run ends with a summary table (`summary_lines`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, TextIO

__all__ = ["Progress", "summary_lines"]


def _verdict(record: Mapping[str, Any]) -> str:
    if record.get("error"):
        return "ERROR"
    return "pass" if record.get("passed") else "FAIL"


def _short(value: object, limit: int = 60) -> str:
    text = " ".join(str(value).split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _why(record: Mapping[str, Any]) -> str:
    """What a failed case answered (or the error), to read beside its verdict; nothing for a pass."""
    if record.get("error"):
        return f"  {_short(record['error'])}"
    if record.get("passed"):
        return ""
    return f"  got {_short(record.get('output'))}, expected {_short(record.get('expected'))}"


def summary_lines(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The summary as ``(label, value)`` rows."""
    usage = summary.get("usage") or {}
    rows = [
        ("cases", str(summary["n"])),
        ("passed", str(summary["passed"])),
        ("pass rate", f"{summary['pass_rate']:.1%}"),
        ("errors", str(summary["errors"])),
        ("run this time", f"{summary['ran']} cases in {summary['wall_seconds']:.2f} s"),
        ("seconds per case", f"{summary['mean_case_seconds']:.3f} mean"),
    ]
    if usage:
        rows.append(("tokens", f"{usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion"))
    return rows


class Progress:
    """Shows finished cases as they arrive.

    Args:
        total: Cases in the run, finished ones included.
        done: Cases already finished (a resumed run).
        passed: Of those, the passed ones.
        stream: Where to write (default: stderr).
        live: Draw a live bar (default: when `stream` is a terminal and ``rich`` is installed).
    """

    def __init__(
        self, total: int, done: int = 0, passed: int = 0, stream: TextIO | None = None, live: bool | None = None
    ) -> None:
        self.total, self.done, self.passed = total, done, passed
        self.stream = stream or sys.stderr
        self._bar: Any = None
        if live is None:
            live = self.stream.isatty()
        if live:
            try:
                from rich.console import Console
                from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn
            except ImportError:
                return
            self._bar = Bar(
                TextColumn("eval"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("pass rate {task.fields[rate]}"),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
            )
            self._task = self._bar.add_task("eval", total=total, completed=done, rate=self._rate())
            self._bar.start()

    def _rate(self) -> str:
        return f"{self.passed / self.done:.0%}" if self.done else "-"

    def update(self, record: Mapping[str, Any]) -> None:
        """One more case finished."""
        self.done += 1
        self.passed += bool(record.get("passed"))
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, rate=self._rate())
            return
        line = f"[{self.done}/{self.total}] {record['id']}: {_verdict(record)} ({record.get('seconds', 0):.2f} s)"
        self.stream.write(f"{line}  pass rate {self._rate()}{_why(record)}\n")
        self.stream.flush()

    def finish(self, summary: Mapping[str, Any] | None = None) -> None:
        """Stop the bar and show `summary` as a table."""
        if self._bar is not None:
            self._bar.stop()
        if summary is None:
            return
        rows = summary_lines(summary)
        if self._bar is not None:
            from rich.console import Console
            from rich.table import Table

            table = Table(title="evaluation summary", show_header=False)
            for label, value in rows:
                table.add_row(label, value)
            Console(file=self.stream).print(table)
            return
        width = max(len(label) for label, _ in rows)
        self.stream.write("".join(f"{label.ljust(width)}  {value}\n" for label, value in rows))
        self.stream.flush()
